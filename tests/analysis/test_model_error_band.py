"""ZYFA's band in the model-level figures: dNLL with its paired interval, the band (the floor's upper 95 % KL) and
each kernel's verdict against it, from made-up rows."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis import BAND_VERDICTS, band_verdict, model_error_summary


def _rows(kernel, role, kl, dnll, reference="sdpa-cudnn"):
    return [dict(kernel=kernel, role=role, scope="all", layer=None, document=d, kl_nats=list(k),
                 top1_match=[True] * len(k), dnll_nats=None if dn is None else list(dn), reference=reference)
            for d, (k, dn) in enumerate(zip(kl, dnll))]


def _docs(seed, scale, n=8, tokens=64):
    g = np.random.default_rng(seed)
    return [g.exponential(scale * (1 + 0.2 * d), size=tokens) for d in range(n)]


def test_dnll_pools_every_predicted_token_and_its_interval_is_paired_by_document():
    floor_kl, kern_kl = _docs(0, 1e-4), _docs(1, 1e-3)
    g = np.random.default_rng(2)
    shared = [g.normal(0, 0.05, 63) for _ in range(8)]  # document-level noise both kernels share
    rows = (_rows("f", "floor", floor_kl, shared)
            + _rows("k", "kernel", kern_kl, [s + 0.01 for s in shared]))
    floor, kern = model_error_summary(rows, resamples=400)
    assert floor["reference"] == kern["reference"] == "sdpa-cudnn"
    assert kern["dnll_mean_nats"] == pytest.approx(np.concatenate(shared).mean() + 0.01)
    assert kern["dnll_mean_lo_nats"] <= kern["dnll_mean_nats"] <= kern["dnll_mean_hi_nats"]
    assert floor["dnll_mean_lo_nats"] + 0.01 == pytest.approx(kern["dnll_mean_lo_nats"])  # the same resamples
    # the percentile bootstrap over documents, written out: resample documents, pool their tokens, 2.5 / 97.5 %
    draws = np.random.default_rng(0).integers(0, 8, size=(400, 8))
    means = [sum(shared[d].sum() + 0.01 * 63 for d in r) / (63 * 8) for r in draws]
    assert (kern["dnll_mean_lo_nats"], kern["dnll_mean_hi_nats"]) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    old = model_error_summary(_rows("f", "floor", floor_kl, [None] * 8), resamples=100)[0]
    assert old["dnll_mean_nats"] is None and old["dnll_mean_lo_nats"] is None  # a v5 run kept none


def test_the_band_is_the_floors_upper_95_and_each_kernel_is_judged_against_it():
    floor_kl = _docs(3, 1e-4)
    rows = _rows("f", "floor", floor_kl, [None] * 8)
    rows += _rows("same", "kernel", [0.9 * k for k in floor_kl], [None] * 8)
    rows += _rows("worse", "kernel", [5 * k for k in floor_kl], [None] * 8)
    rows += _rows("edge", "kernel", [k * (0.2 + 2.6 * (d % 2)) for d, k in enumerate(floor_kl)], [None] * 8)
    figures = {f["kernel"]: f for f in model_error_summary(rows, resamples=500)}
    band = figures["f"]["kl_mean_hi_nats"]
    assert all(f["band_nats"] == band for f in figures.values())
    assert figures["f"]["band_verdict"] is None
    assert figures["same"]["band_verdict"] == "in band"
    assert figures["worse"]["band_verdict"] == "above band"
    edge = figures["edge"]
    assert edge["kl_mean_nats"] > band >= edge["kl_mean_lo_nats"] and edge["band_verdict"] == "not resolved"


def test_without_a_floor_there_is_no_band():
    (f,) = model_error_summary(_rows("k", "kernel", _docs(4, 1e-4), [None] * 8), resamples=100)
    assert f["band_nats"] is None and f["band_verdict"] is None


@pytest.mark.parametrize("mean,lo,band,want", [(1.0, 0.5, 1.0, "in band"), (1.01, 1.001, 1.0, "above band"),
                                               (1.01, 1.0, 1.0, "not resolved")])
def test_band_verdict_edges(mean, lo, band, want):
    assert band_verdict(mean, lo, band) == want and want in BAND_VERDICTS
