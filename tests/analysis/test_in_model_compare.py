"""`compare_in_model` (issue 43): the three ratios (isolated, attention in the model, end to end) decomposed into cycles
and clock by the one interval procedure, and the sentence that says whether the isolated speedup survived in the
model and where it went. Rows are built here with known clocks and times, so every figure is known."""

from __future__ import annotations

import json

import pytest

from harness.analysis import compare_in_model, isolated_label
from harness.errors import ResultsError

SHAPE = dict(dtype="bfloat16", batch=6, heads_q=9, heads_kv=3, seq_len=8192, head_dim_qk=64, head_dim_v=64, causal=True)
INFO = {"device_kind": "cuda", "protocol_json": json.dumps({"settle_chunk_tol": 0.003, "settle_trend_tol": 0.003})}
NOISE = {"ref": (1.0, 1.001, 0.999), "k": (1.0005, 0.9995, 1.0)}


def _runs(*, iso_k=(0.84, 1800 / 1.05), att_k=(24.0, 1800.0), rest_k=(70.0, 1800.0), random_weights=False):
    """The in-model run (the reference: 30 ms of attention and 70 ms of the rest at 1800 MHz) and the isolated one
    (the reference: 1 ms at 1800 MHz). `iso_k`, `att_k`, `rest_k`: the kernel's (time, in-band clock)."""
    meas, im, iso = [], [], []
    for kernel, att, rest, alone in (("ref", (30.0, 1800.0), (70.0, 1800.0), (1.0, 1800.0)),
                                     ("k", att_k, rest_k, iso_k)):
        for rep, n in enumerate(NOISE[kernel]):
            mid = f"c0-{kernel}-r{rep}"
            a_ns, r_ns = att[0] * 1e6 * n, rest[0] * 1e6 * n
            # one clock for the whole forward in its window: the time-weighted mean of its parts'
            clock = (a_ns * att[1] + r_ns * rest[1]) / (a_ns + r_ns)
            meas.append({**SHAPE, "measurement_id": mid, "kernel": kernel, "repeat": rep, "status": "ok",
                         "input_label": "m prefill B6 S8192", "time_ns": a_ns + r_ns, "inband_clock_mhz": clock,
                         "sm_clock_mhz": clock * 1.1, "power_w": 650.0, "launch_strategy": "graph"})
            im.append({"measurement_id": mid, "attention_ns": a_ns, "rest_ns": r_ns,
                       "attention_share": a_ns / (a_ns + r_ns), "pass_forward_ns": a_ns + r_ns,
                       "instrumentation_cost_ns": 1e4, "pass_inband_clock_mhz": att[1], "pass_sm_clock_mhz": att[1],
                       "pass_power_w": 650.0, "random_weights": random_weights})
            iso.append({**SHAPE, "kernel": kernel, "repeat": rep, "status": "ok", "input_label": "L15:captured",
                        "time_ns": alone[0] * 1e6 * n, "inband_clock_mhz": alone[1], "sm_clock_mhz": alone[1] * 1.1})
    return meas, im, iso


def _row(**kw):
    meas, im, iso = _runs(**kw)
    (row,) = compare_in_model(measurements=meas, in_model=im, info=INFO, reference="ref", isolated=iso,
                              isolated_info=INFO)
    return row


def test_a_speedup_won_by_cycles_and_lost_to_the_clock_alone_grows_in_the_model():
    # ZYFA's case: alone, the kernel needs 0.80 of the cycles but runs at a clock 5 % lower (time 0.84); in the
    # model the forward's clock is the same for both (attention 0.80).
    r = _row()
    assert r.isolated.time.value == pytest.approx(0.84, rel=1e-3)
    assert r.isolated.cycles.value == pytest.approx(0.80, rel=1e-3) and r.isolated.clock.value == pytest.approx(1.05)
    assert r.attention.time.value == pytest.approx(0.80, rel=1e-3) and r.attention.clock.value == pytest.approx(1.0)
    assert r.end_to_end.time.value == pytest.approx(0.94, rel=1e-3)
    assert r.share_reference == pytest.approx(0.30, rel=1e-3) and r.predicted == pytest.approx(0.952, rel=1e-3)
    assert r.isolated.verdict == r.attention.verdict == r.end_to_end.verdict == "faster"
    assert "survived and grew in the model's attention" in r.sentence
    assert "most of the difference is the clock" in r.sentence and "1.050 alone and 1.000 inside" in r.sentence
    assert r.sentence.startswith("k vs ref: alone on L15:captured time 0.840")


def test_a_speedup_that_the_model_takes_back_is_said_to_shrink_or_not_survive():
    shrank = _row(iso_k=(0.84, 1800.0), att_k=(28.0, 1800.0))  # alone 0.84, in the model 0.933: still faster
    assert "survived in the model's attention but shrank" in shrank.sentence
    assert "most of the difference is the attention's cycles" in shrank.sentence
    gone = _row(iso_k=(0.84, 1800.0), att_k=(30.3, 1800.0))  # in the model 1.01: slower
    assert "did not survive in the model's attention" in gone.sentence


def test_the_rest_of_the_forward_is_named_when_it_moved_the_end_to_end_ratio_most():
    # the kernel's attention keeps its isolated ratio, but its forward's other layers take 8 % longer
    r = _row(iso_k=(0.84, 1800.0), att_k=(25.2, 1800.0), rest_k=(75.6, 1800.0))
    assert r.rest.time.value == pytest.approx(1.08, rel=1e-3)
    assert r.end_to_end.time.value == pytest.approx((25.2 + 75.6) / 100, rel=1e-3)
    assert "most of the difference is the rest of the forward (its other layers" in r.sentence
    # end to end = s x attention + (1 - s) x rest, with s the reference's share
    s = r.share_reference
    assert r.end_to_end.time.value == pytest.approx(s * r.attention.time.value + (1 - s) * r.rest.time.value, rel=1e-3)


def test_random_weights_lead_every_sentence_and_a_missing_reference_is_said():
    meas, im, iso = _runs(random_weights=True)
    (r,) = compare_in_model(measurements=meas, in_model=im, info=INFO, reference="ref")
    assert r.random_weights and r.sentence.startswith("RANDOM WEIGHTS") and "no isolated run" in r.sentence
    with pytest.raises(ResultsError, match="reference kernel 'nope' has no timed"):
        compare_in_model(measurements=meas, in_model=im, info=INFO, reference="nope")
    only_ref = [r for r in iso if r["kernel"] == "ref"]
    (r,) = compare_in_model(measurements=meas, in_model=im, info=INFO, reference="ref", isolated=only_ref,
                            isolated_info=INFO)
    assert r.isolated is None and "k not timed on L15:captured in the isolated run" in r.sentence


def test_the_isolated_input_is_the_one_captured_layer_or_named():
    rows = [{"input_label": x} for x in ("L03:captured", "L03:gaussian:0.1", "L15:captured")]
    with pytest.raises(ResultsError, match="2 captured inputs .* --isolated-input"):
        isolated_label(rows)
    assert isolated_label(rows, "L15:captured") == "L15:captured" and isolated_label(rows[:2]) == "L03:captured"
