"""compare_measurements, compare_runs, compare_inputs and summarize_run on small synthetic frames: which
rows count, how rows are grouped and paired, what each ComparisonRow carries, and what the user is told
when something cannot be compared. (The real H200 runs are in test_analysis_compare.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from harness.analysis import (
    BURST_STATUS,
    SUSTAINED_STATUSES,
    VerdictRule,
    aggregate_measurements,
    compare_inputs,
    compare_measurements,
    compare_runs,
    geomean,
    parse_pairs,
    parse_threshold,
    summarize_run,
)
from harness.errors import ConfigError, ResultsError

TIMES = (1000.0, 1010.0, 990.0)


def _m(kernel="k", t=1000.0, *, label="x", status="ok", clock=1500.0, inband=None, power=500.0, seq_len=1024,
       repeat=0, **kw):
    return {"kernel": kernel, "input_label": label, "time_ns": t, "sm_clock_mhz": clock, "inband_clock_mhz": inband,
            "status": status, "power_w": power, "batch": 1, "heads_q": 8, "heads_kv": 8, "seq_len": seq_len,
            "head_dim_qk": 64, "head_dim_v": 64, "causal": True, "dtype": "bfloat16", "power_limited_frac": None,
            "thermal_limited_frac": None, "reason_names": None, "config_index": 0, "repeat": repeat,
            "launch_note": None, "error": None, **kw}


def _frame(rows):
    return pl.DataFrame(rows, infer_schema_length=None)


def _side(scale=1.0, clock=1500.0, **kw):
    return [_m(t=t * scale, clock=clock, repeat=i, **kw) for i, t in enumerate(TIMES)]


def _run(rows, run_id="r1", device="NVIDIA H200", status="complete", **info):
    return SimpleNamespace(measurements=_frame(rows), path=Path("/runs") / f"{run_id or 'unnamed'}-dir",
                           info={"run_id": run_id, "device_name": device, "status": status, **info})


def test_public_names_exist():
    import harness.analysis._compare as compare

    assert all(hasattr(compare, name) for name in compare.__all__) and "compare_runs" in compare.__all__


def test_a_row_carries_the_geometric_means_of_time_clock_and_power():
    a = _side(power=400.0)
    b = _side(scale=1.1, clock=1400.0, power=500.0)
    (row,) = compare_measurements(_frame(a), _frame(b)).rows
    assert (row.kernel, row.input_a, row.input_b, row.repeats_a, row.repeats_b) == ("k", "x", "x", 3, 3)
    assert row.time_a_ns == pytest.approx(geomean(TIMES)) and row.time_b_ns == pytest.approx(1.1 * geomean(TIMES))
    assert (row.clock_source, row.clock_a_mhz, row.clock_b_mhz) == ("nvml", pytest.approx(1500.0), pytest.approx(1400.0))
    assert (row.power_a_w, row.power_b_w) == (pytest.approx(400.0), pytest.approx(500.0))
    assert row.shape == "B=1 H=8/8 S=1024 d=64/64 causal bfloat16" and row.note == ""


def test_the_in_band_clock_is_used_when_both_sides_have_it_and_none_without_any_clock():
    a = _side(inband=1600.0)
    b = _side(inband=1500.0)
    (row,) = compare_measurements(_frame(a), _frame(b)).rows
    assert row.clock_source == "inband" and row.clock.value == pytest.approx(1600.0 / 1500.0)
    assert row.clock_a_mhz == pytest.approx(1600.0)
    (bare,) = compare_measurements(_frame(_side(clock=None, power=None)), _frame(_side(clock=None, power=None))).rows
    assert bare.clock_source == "none" and bare.clock is None and bare.cycles is None
    assert bare.clock_a_mhz is None and bare.power_a_w is None and bare.power_b_w is None


def test_only_timed_rows_of_the_given_statuses_count_and_unsettled_ones_are_noted():
    a = _side() + [_m(t=5000.0, status=BURST_STATUS), _m(t=None, status="gate_failed", error="x")]
    b = _side()
    b[1] = {**b[1], "status": "unsettled"}
    (row,) = compare_measurements(_frame(a), _frame(b)).rows
    assert (row.repeats_a, row.repeats_b) == (3, 3) and row.time.value == pytest.approx(1.0)
    assert row.note == "1 of 6 repeats unsettled" and row.caveats == ("1 of 6 repeats unsettled",)
    assert set(SUSTAINED_STATUSES) == {"ok", "unsettled"}
    (burst,) = compare_measurements(_frame(a), _frame(b), statuses=(BURST_STATUS,) + SUSTAINED_STATUSES).rows
    assert burst.repeats_a == 4


def test_the_side_with_nothing_timed_is_named():
    none = [_m(t=None, status="gate_failed")]
    with pytest.raises(ResultsError, match=r"^A has no timed ok/unsettled measurements to compare \(every kernel "
                                           r"failed, or the run stopped before the first window\)\.$"):
        compare_measurements(_frame(none), _frame(_side()))
    with pytest.raises(ResultsError, match=r"^B has no timed ok/unsettled measurements to compare \(every kernel"):
        compare_measurements(_frame(_side()), _frame(none))


def test_kernels_on_one_side_only_are_listed_for_each_side():
    a = _side() + [_m("only-a")]
    b = _side() + [_m("only-b")]
    cmp = compare_measurements(_frame(a), _frame(b), name_a="A", name_b="B")
    assert [r.kernel for r in cmp.rows] == ["k"]
    assert cmp.unmatched == ("only-a @ x (only in A)", "only-b @ x (only in B)")


def test_an_input_label_at_two_shapes_is_refused_on_either_side():
    two = _side() + [_m("other", seq_len=2048)]
    for a, b, name in ((two, _side(), "A"), (_side(), two, "B")):
        with pytest.raises(ResultsError, match=f"^{name} holds input 'x' at more than one shape; a comparison by "
                                               f"label cannot tell them apart. Give the inputs distinct names.$"):
            compare_measurements(_frame(a), _frame(b), name_a="A", name_b="B")


def test_paired_labels_must_exist_on_their_own_side():
    a, b = _side(label="p"), _side(label="q")
    assert len(compare_measurements(_frame(a), _frame(b), pairs=[("p", "q")]).rows) == 1
    with pytest.raises(ResultsError, match=r"^A has no timed input 'q'; its inputs are p\."):
        compare_measurements(_frame(a), _frame(b), pairs=[("q", "q")], name_a="A")
    with pytest.raises(ResultsError, match=r"^B has no timed input 'p'; its inputs are q, s\.$"):
        compare_measurements(_frame(a), _frame(b + _side(label="s")), pairs=[("p", "p")], name_b="B")
    with pytest.raises(ResultsError, match=r"The runs share no input label: A has p; B has q\. .*--pair-inputs p=q\."):
        compare_measurements(_frame(a), _frame(b), name_a="A", name_b="B")
    with pytest.raises(ResultsError, match=r"The runs share no input label: A has p, r; B has q, s\. .*--pair-inputs p=q\."):
        compare_measurements(_frame(a + _side(label="r")), _frame(b + _side(label="s")), name_a="A", name_b="B")


def test_a_shape_mismatch_names_both_shapes_and_the_way_out():
    with pytest.raises(ResultsError) as e:
        compare_measurements(_frame(_side()), _frame(_side(seq_len=2048)), name_a="A", name_b="B")
    msg = str(e.value)
    assert msg.startswith("Cannot compare A input 'x' with B input 'x': their shapes differ (B=1 H=8/8 S=1024 ")
    assert " vs B=1 H=8/8 S=2048 d=64/64 causal bfloat16). A time ratio across shapes mixes the kernel " in msg
    assert msg.endswith("pair inputs that share one with --pair-inputs A=B.")


def test_frame_has_one_column_per_field_and_flattened_ratios():
    cmp = compare_measurements(_frame(_side()), _frame(_side(clock=None)))
    f = cmp.to_frame()
    (row,) = cmp.rows
    plain = [n for n in row.__dataclass_fields__ if n not in ("time", "cycles", "clock", "caveats")]
    flat = [f"{n}_{part}" for n in ("time", "cycles", "clock") for part in ("ratio", "low", "high")]
    assert f.columns == plain + ["note"] + flat
    assert f["time_ratio"][0] == row.time.value and f["time_low"][0] == row.time.low
    assert f["time_high"][0] == row.time.high
    assert f["cycles_ratio"][0] is None and f["clock_high"][0] is None  # B had no clock: no factors


def test_compare_runs_refuses_an_incomplete_run_naming_its_status():
    with pytest.raises(ResultsError) as e:
        compare_runs(_run(_side()), _run(_side(), run_id="r2", status="incomplete"))
    assert str(e.value).startswith("Run /runs/r2-dir is not complete: its status is 'incomplete'. Its figures may lack")
    assert str(e.value).endswith("or pass --allow-incomplete to compare what it holds.")


def test_runs_on_different_devices_are_compared_with_a_note():
    b = _side()
    b[0] = {**b[0], "status": "unsettled"}
    (row,) = compare_runs(_run(_side()), _run(b, run_id="r2", device="AMD MI300X")).rows
    assert row.note == "different devices: NVIDIA H200 vs AMD MI300X; 1 of 6 repeats unsettled"
    (same,) = compare_runs(_run(_side()), _run(_side(), run_id="r2")).rows
    assert same.note == ""
    cmp = compare_runs(_run(_side() + [_m("only-a")]), _run(b, run_id="r2", device="AMD MI300X"))
    assert cmp.unmatched == ("only-a @ x (only in A (r1))",) and cmp.name_b == "B (r2)"


def test_compare_runs_passes_the_rule_and_the_max_clock():
    rule = VerdictRule(level=0.9, threshold=0.01)
    a = _side(clock=1979.5, power_limited_frac=0.0)
    cmp = compare_runs(_run(a, max_sm_clock_mhz=1980.0), _run(a, run_id="r2"), rule=rule)
    assert cmp.rule is rule and cmp.rows[0].limiter_a == "none (NVML at max clock)"


def test_inputs_of_one_run_pair_with_the_first_input_of_their_own_shape():
    rows = (_side(label="s1-a") + _side(label="s1-b", scale=1.1) + _side(label="s2-a", seq_len=2048)
            + _side(label="s2-b", seq_len=2048))
    cmp = compare_inputs(_run(rows))
    assert [(r.input_a, r.input_b) for r in cmp.rows] == [("s1-a", "s1-b"), ("s2-a", "s2-b")]
    assert (cmp.name_a, cmp.name_b) == ("A", "B")
    given = compare_inputs(_run(rows), pairs=[("s1-b", "s1-a")])
    assert [(r.input_a, r.input_b) for r in given.rows] == [("s1-b", "s1-a")]


def test_inputs_of_a_run_with_one_input_or_nothing_timed_give_no_rows():
    for rows in (_side(), [_m(t=None, status="gate_failed")]):
        cmp = compare_inputs(_run(rows))
        assert cmp.rows == () and (cmp.name_a, cmp.name_b) == ("A", "B")


def test_captured_inputs_pair_with_their_layers_controls():
    rows = _side(label="L3:gaussian:0.1") + _side(label="L3:captured", scale=1.2) + _side(label="other")
    cmp = compare_inputs(_run(rows))
    assert [(r.input_a, r.input_b) for r in cmp.rows] == [("L3:gaussian:0.1", "L3:captured")]
    assert cmp.rows[0].verdict == "slower"


def test_aggregate_rows_carry_shape_limiter_and_launch_note():
    rows = [_m(t=t, repeat=i, power_limited_frac=0.9, launch_note="graph of 10" if i == 1 else None)
            for i, t in enumerate(TIMES)]
    (agg,) = aggregate_measurements(rows)
    assert agg["shape"] == "B=1 H=8/8 S=1024 d=64/64 causal bfloat16"
    assert agg["limiter"] == "power cap 90%" and agg["launch_note"] == "graph of 10"
    (failed,) = aggregate_measurements([{**_m(t=None, status="gate_failed", error="bad"), "batch": None}])
    assert failed["shape"] == "" and failed["limiter"] == "" and failed["launch_note"] == ""
    two = aggregate_measurements(rows + [_m("k2", t=5.0)])
    assert [a["kernel"] for a in two] == ["k", "k2"] and two[0]["repeats"] == 3 and two[1]["repeats"] == 1


def test_summarize_run_sets_burst_beside_sustained():
    burst = [_m(t=t * 0.98, status=BURST_STATUS, repeat=i) for i, t in enumerate(TIMES)]
    run = _run(_side() + burst, run_id="")
    s = summarize_run(run)
    assert s.run_id == run.path.name == "unnamed-dir"  # no run id recorded: the directory's name
    (row,) = s.burst_vs_sustained.rows
    assert (s.burst_vs_sustained.name_a, s.burst_vs_sustained.name_b) == ("burst", "sustained")
    assert row.repeats_a == 3 and row.time.value == pytest.approx(1 / 0.98)
    assert [a["kernel"] for a in s.sustained] == ["k"] and s.sustained[0]["repeats"] == 3
    assert s.sustained[0]["time_ns"] == pytest.approx(1000.0) and s.burst[0]["time_ns"] == pytest.approx(980.0)
    assert len(s.burst) == 1 and s.burst[0]["repeats"] == 3 and s.notes == ()
    assert s.inputs.rows == () and s.reference_inputs == set()


def test_summarize_run_without_burst_rows_has_no_burst_comparison():
    rows = _side(label="a") + _side(label="b", scale=1.1)
    s = summarize_run(_run(rows))
    assert s.burst_vs_sustained is None and s.burst == () and s.run_id == "r1"
    assert s.reference_inputs == {"a"} and [r.input_b for r in s.inputs.rows] == ["b"]


def test_summarize_run_notes_what_it_could_not_compare():
    burst = [_m(t=t, status=BURST_STATUS, seq_len=2048, repeat=i) for i, t in enumerate(TIMES)]
    s = summarize_run(_run(_side() + burst))
    assert s.burst_vs_sustained is None
    (note,) = s.notes
    assert note.startswith("burst vs sustained not compared: Cannot compare burst input 'x' with sustained input 'x'")
    two_shapes = _side(label="L1:captured") + _side(label="L1:zeros", seq_len=2048)
    summary = summarize_run(_run(two_shapes))
    (inputs_note,) = summary.notes
    assert summary.inputs.rows == () and (summary.inputs.name_a, summary.inputs.name_b) == ("A", "B")
    assert inputs_note.startswith("inputs not compared: Cannot compare A input 'L1:zeros' with B input 'L1:captured'")


def test_option_parsers_refuse_what_they_cannot_read():
    assert parse_threshold("150%") == pytest.approx(1.5)  # with a percent sign, any size is meant
    with pytest.raises(ConfigError, match=r"^--fail-on-slowdown '1' reads as 100%; write 2% or 0\.02 for two percent\.$"):
        parse_threshold("1")
    with pytest.raises(ConfigError, match=r"^--fail-on-slowdown 'x' is not a percentage; write it like 2% \(or 0\.02\)\.$"):
        parse_threshold("x")
    for bad in ("=b", "a=", "a=b=c", "ab"):
        with pytest.raises(ConfigError, match=rf"^--pair-inputs '{bad}' must be A_LABEL=B_LABEL, e\.g\. "):
            parse_pairs([bad])


def test_a_slowdown_is_a_growth_strictly_beyond_the_threshold():
    import math

    cmp = compare_measurements(_frame(_side()), _frame(_side(scale=1.1)))
    (row,) = cmp.rows
    assert row.verdict == "slower" and [r.kernel for r in cmp.slowdowns()] == ["k"]
    at = compare_measurements(_frame(_side()), _frame(_side(scale=1.1)), rule=VerdictRule(threshold=row.time.change))
    assert at.slowdowns() == () and at.rows[0].verdict == "unresolved"  # real, but not shown beyond or within it
    past = VerdictRule(threshold=math.nextafter(row.time.change, 0))
    assert [r.kernel for r in compare_measurements(_frame(_side()), _frame(_side(scale=1.1)), rule=past).slowdowns()] == ["k"]


def test_comparison_rows_are_keyword_only():
    (row,) = compare_measurements(_frame(_side()), _frame(_side())).rows
    fields = [getattr(row, f) for f in row.__dataclass_fields__]
    with pytest.raises(TypeError):
        type(row)(*fields)


def test_a_single_repeat_a_side_is_compared_without_a_verdict():
    (row,) = compare_measurements(_frame([_m(t=1000.0)]), _frame([_m(t=1100.0)])).rows
    assert (row.repeats_a, row.repeats_b, row.verdict) == (1, 1, "too few repeats")
    assert row.shape.startswith("B=1 H=8/8 S=1024") and row.time.value == pytest.approx(1.1)


def test_kernels_unmatched_in_every_pair_are_all_listed():
    a = _side(label="p") + [_m("only-a", label="p")] + _side(label="r") + [_m("only-a", label="r")]
    b = _side(label="q") + _side(label="s") + [_m("only-b", label="s")]
    cmp = compare_measurements(_frame(a), _frame(b), pairs=[("p", "q"), ("r", "s")], name_a="A", name_b="B")
    assert len(cmp.rows) == 2
    assert cmp.unmatched == ("only-a @ p (only in A)", "only-a @ r (only in A)", "only-b @ s (only in B)")


def test_summarize_run_judges_the_limiter_against_the_runs_max_clock():
    rows = _side(clock=1979.5, power_limited_frac=0.0)
    burst = [_m(t=t, status=BURST_STATUS, clock=1979.5, power_limited_frac=0.0, repeat=i) for i, t in enumerate(TIMES)]
    s = summarize_run(_run(rows + burst, max_sm_clock_mhz=1980.0))
    assert s.sustained[0]["limiter"] == "none (NVML at max clock)" and s.burst[0]["limiter"] == "none (NVML at max clock)"
    assert s.burst_vs_sustained.rows[0].limiter_a == "none (NVML at max clock)"


def test_aggregate_limiter_comes_from_this_kernels_timed_rows_only():
    timed = [_m("fast", t=t, repeat=i, power_limited_frac=0.9) for i, t in enumerate(TIMES)]
    failed = [_m("broken", t=5.0, status="gate_failed", error="bad", power_limited_frac=0.9, launch_note="n")]
    aggs = {a["kernel"]: a for a in aggregate_measurements(timed + failed)}
    assert aggs["fast"]["limiter"] == "power cap 90%"
    assert aggs["broken"]["limiter"] == "" and aggs["broken"]["launch_note"] == ""


def test_run_summary_is_a_frozen_keyword_only_record():
    import dataclasses

    from harness.analysis import RunSummary

    s = summarize_run(_run(_side()))
    fields = {f: getattr(s, f) for f in s.__dataclass_fields__ if f != "notes"}
    assert RunSummary(**fields).notes == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.run_id = "x"
    with pytest.raises(TypeError):
        RunSummary(*fields.values())
