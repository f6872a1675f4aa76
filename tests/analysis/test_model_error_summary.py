"""The model-level error's figures from stored rows: point estimates, the bootstrap over documents, the floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis import P_TAIL, model_error_summary


def _rows(kernel, role, scope, layer, per_doc_kl, per_doc_top1):
    return [dict(kernel=kernel, role=role, scope=scope, layer=layer, document=d, kl_nats=list(kl), top1_match=list(t))
            for d, (kl, t) in enumerate(zip(per_doc_kl, per_doc_top1))]


def _docs(seed, n_docs=6, tokens=50, scale=1e-4):
    g = np.random.default_rng(seed)
    kl = [g.exponential(scale * (1 + d), size=tokens) for d in range(n_docs)]
    top1 = [g.random(tokens) < 0.97 for _ in range(n_docs)]
    return kl, top1


def test_point_estimates_pool_every_token():
    kl, top1 = _docs(0)
    (f,) = model_error_summary(_rows("k", "kernel", "all", None, kl, top1), resamples=200)
    flat = np.concatenate(kl)
    assert f["kl_mean_nats"] == pytest.approx(flat.mean()) and f["tokens"] == flat.size == 300
    assert f["top1_agreement"] == pytest.approx(np.concatenate(top1).mean())
    # p99: the smallest KL that at least 1 % of the tokens reach (3 of 300 here)
    assert f["kl_p99_nats"] == pytest.approx(np.sort(flat)[::-1][math.ceil(P_TAIL * 300) - 1])
    assert (flat >= f["kl_p99_nats"]).mean() >= P_TAIL > (flat > f["kl_p99_nats"]).mean()
    for key in ("kl_mean", "kl_p99"):
        assert f[f"{key}_lo_nats"] <= f[f"{key}_nats"] <= f[f"{key}_hi_nats"]
    assert f["top1_agreement_lo"] <= f["top1_agreement"] <= f["top1_agreement_hi"]
    assert f["kl_vs_floor"] is None and f["documents"] == 6 and f["resamples"] == 200


def test_the_interval_is_over_documents_not_tokens():
    # Identical documents: every resample has the same mean, so the interval is a point; documents that differ
    # widen it even though the token count is the same.
    same = [np.full(40, 2e-4)] * 5
    (f,) = model_error_summary(_rows("k", "kernel", "all", None, same, [np.ones(40, bool)] * 5), resamples=300)
    assert f["kl_mean_lo_nats"] == pytest.approx(f["kl_mean_hi_nats"]) == pytest.approx(2e-4)
    differ = [np.full(40, 1e-4 * (d + 1)) for d in range(5)]
    (g,) = model_error_summary(_rows("k", "kernel", "all", None, differ, [np.ones(40, bool)] * 5), resamples=300)
    assert g["kl_mean_hi_nats"] - g["kl_mean_lo_nats"] > 1e-4


def test_the_ratio_to_the_floor_is_paired_by_document():
    # The kernel is exactly 3x the floor in every document: paired resamples give exactly 3 every time.
    kl, top1 = _docs(1)
    rows = _rows("f", "floor", "all", None, kl, top1) + _rows("k", "kernel", "all", None, [3 * a for a in kl], top1)
    floor, kern = model_error_summary(rows, resamples=300)
    assert floor["role"] == "floor" and floor["kl_vs_floor"] == 1.0
    assert kern["kl_vs_floor"] == pytest.approx(3.0)
    assert kern["kl_vs_floor_lo"] == pytest.approx(3.0) and kern["kl_vs_floor_hi"] == pytest.approx(3.0)


def test_scopes_are_ordered_and_seeded():
    kl, top1 = _docs(2, n_docs=4)
    rows = []
    for scope, layer in (("layer", 15), ("all", None), ("layer", 3)):
        rows += _rows("k", "kernel", scope, layer, kl, top1) + _rows("f", "floor", scope, layer, kl, top1)
    out = model_error_summary(rows, resamples=200, seed=5)
    assert [(f["scope"], f["layer"], f["role"]) for f in out] == [
        ("all", None, "floor"), ("all", None, "kernel"), ("layer", 3, "floor"), ("layer", 3, "kernel"),
        ("layer", 15, "floor"), ("layer", 15, "kernel")]
    again = model_error_summary(rows, resamples=200, seed=5)
    assert out == again
    other = model_error_summary(rows, resamples=200, seed=6)
    assert other[0]["kl_mean_lo_nats"] != out[0]["kl_mean_lo_nats"]


def test_a_kernel_missing_a_document_is_refused():
    kl, top1 = _docs(3, n_docs=3)
    rows = _rows("k", "kernel", "all", None, kl, top1) + _rows("f", "floor", "all", None, kl[:2], top1[:2])
    with pytest.raises(ValueError, match=r"no rows for documents \[2\]"):
        model_error_summary(rows)
    assert model_error_summary([]) == []
