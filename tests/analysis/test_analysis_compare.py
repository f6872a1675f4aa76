"""Comparisons on real H200 runs: run A (gaussian:0.1) vs run B (gaussian:1), split from one run (see
tests/fixtures/compare/README.md), and captured vs control inside the SmolLM2 run."""

import dataclasses
import shutil

import polars as pl
import pytest
from h200_runs import ISSUE2, PAIR, RUN_A, RUN_B, SMOLLM2, set_run_field

from harness.analysis import (
    VerdictRule,
    captured_control_pairs,
    compare_inputs,
    compare_runs,
    geomean,
    parse_pairs,
    parse_threshold,
)
from harness.errors import ConfigError, ResultsError
from harness.results import expand_run, read_run

# A and B were split from one run (tests/fixtures/compare/README.md): measured in one process minutes apart, so
# no between-run variance is added here; `test_separate_runs_add_the_between_run_variance` shows the default.
ONE_RUN = VerdictRule(between_runs_cv=0.0, between_runs_source="split from one run")


@pytest.fixture(scope="module")
def runs():
    return read_run(RUN_A), read_run(RUN_B)


@pytest.fixture(scope="module")
def cmp(runs):
    return compare_runs(*runs, pairs=[PAIR], rule=ONE_RUN)


def test_one_row_per_kernel_with_factors_that_multiply_back(cmp, runs):
    assert [r.kernel for r in cmp.rows] == ["sdpa-cudnn", "sdpa-flash"]
    a, b = (run.measurements for run in runs)
    for r in cmp.rows:
        assert (r.input_a, r.input_b, r.repeats_a, r.repeats_b) == (*PAIR, 3, 3)
        assert r.clock_source == "inband"  # both runs had the in-band probe
        assert r.time.value == pytest.approx(r.cycles.value * r.clock.value, rel=1e-12)
        ta = a.filter(pl.col("kernel") == r.kernel)["time_ns"].to_list()
        tb = b.filter(pl.col("kernel") == r.kernel)["time_ns"].to_list()
        assert r.time.value == pytest.approx(geomean(tb) / geomean(ta), rel=1e-12)
        # The decomposition uses the stored clock: clock A/B from in-band clocks, cycles = time x clock.
        ca = a.filter(pl.col("kernel") == r.kernel)["inband_clock_mhz"].to_list()
        cb = b.filter(pl.col("kernel") == r.kernel)["inband_clock_mhz"].to_list()
        assert r.clock.value == pytest.approx(geomean(ca) / geomean(cb), rel=1e-12)
        assert r.limiter_a.startswith("power cap") and r.limiter_b.startswith("power cap")


def test_std_1_inputs_are_slower_on_the_h200_and_the_clock_says_why(cmp):
    # What the H200 showed (h200-measurements.md): std 1.0 operands lower the power-capped clock.
    for r in cmp.rows:
        assert r.verdict == "slower"
        assert 1.005 < r.time.value < 1.02 and r.time.low > 1.0
        # B ran at a lower clock, and the clock factor is larger than the cycles factor: the data moved the
        # clock more than the work.
        assert r.clock.value > r.cycles.value > 1.0


def test_slowdown_threshold(cmp, runs):
    assert [r.kernel for r in cmp.slowdowns()] == ["sdpa-cudnn", "sdpa-flash"]
    at_2 = compare_runs(*runs, pairs=[PAIR], rule=dataclasses.replace(ONE_RUN, threshold=0.02))
    assert at_2.slowdowns() == () and {r.verdict for r in at_2.rows} == {"slower, within threshold"}


def test_separate_runs_add_the_between_run_variance(runs):
    # Taken as two separate runs (the default), the same +1 % cannot be told from run-to-run noise at 0.5 %: the
    # interval includes the GPU's stated 0.5 % between-run cv, so the rows are unresolved, never a false slower.
    separate = compare_runs(*runs, pairs=[PAIR], rule=VerdictRule(threshold=0.005))
    assert {r.verdict for r in separate.rows} == {"unresolved"} and separate.slowdowns() == ()
    assert separate.between_cv == 0.005 and separate.between_source == "default for a GPU"
    assert separate.floor == pytest.approx(0.0117, abs=5e-4) and all(
        r.time.method == "Welch t + between-run" for r in separate.rows)
    one = compare_runs(*runs, pairs=[PAIR], rule=ONE_RUN).rows[0]
    assert separate.rows[0].time.resolution > 2 * one.time.resolution


def test_the_comparison_is_a_pure_function_of_the_rows(runs):
    one = compare_runs(*runs, pairs=[PAIR], rule=ONE_RUN).rows[0]
    two = compare_runs(*runs, pairs=[PAIR], rule=ONE_RUN).rows[0]
    assert one == two and one.time.method == "Welch t" and one.design == "independent"


def test_a_run_against_itself_is_the_same(runs):
    cmp = compare_runs(runs[0], runs[0])  # same labels pair by default
    assert {r.verdict for r in cmp.rows} == {"same"}
    assert all(r.time.value == pytest.approx(1.0) for r in cmp.rows)


def test_frame_flattens_ratios(cmp):
    f = cmp.to_frame()
    assert f.height == 2 and {"time_ratio", "time_low", "cycles_ratio", "clock_high", "verdict"} <= set(f.columns)


def test_no_shared_label_asks_for_pair_inputs(runs):
    with pytest.raises(ResultsError, match="--pair-inputs gaussian:0.1=gaussian:1"):
        compare_runs(*runs)


def test_unknown_label_in_pairs(runs):
    with pytest.raises(ResultsError, match="has no timed input 'gaussian:2'"):
        compare_runs(*runs, pairs=[("gaussian:0.1", "gaussian:2")])


def test_shapes_that_differ_are_refused():
    with pytest.raises(ResultsError, match="shapes differ .*S=16384.* vs .*S=8192"):
        compare_runs(read_run(RUN_A), read_run(SMOLLM2), pairs=[("gaussian:0.1", "L15:gaussian:0.1")])


def test_incomplete_run_is_refused_unless_allowed(copy_run):
    b = copy_run(RUN_B)
    set_run_field(b, status="incomplete", status_detail="interrupted by the user after 4 measurements")
    with pytest.raises(ResultsError, match="not complete: its status is 'incomplete' .interrupted by the user"):
        compare_runs(read_run(RUN_A), read_run(b), pairs=[PAIR])
    assert len(compare_runs(read_run(RUN_A), read_run(b), pairs=[PAIR], allow_incomplete=True).rows) == 2


def test_kernel_on_one_side_only_is_listed_not_compared(copy_run):
    b = copy_run(RUN_B)
    expand_run(b)  # its parts, one per measurement (the fixture is compacted), to remove one kernel's
    for part in (b / "measurements").glob("*.parquet"):
        if "sdpa-flash" in pl.read_parquet(part)["kernel"].to_list():
            for table in ("measurements", "chunks", "samples", "probes"):
                (b / table / part.name).unlink()
    cmp = compare_runs(read_run(RUN_A), read_run(b), pairs=[PAIR])
    assert [r.kernel for r in cmp.rows] == ["sdpa-cudnn"]
    assert cmp.unmatched == ("sdpa-flash @ gaussian:0.1 (only in A (20261130-043508-issue2-b7147a-A))",)


def test_a_run_with_nothing_timed(copy_run):
    b = copy_run(RUN_B)
    for table in ("measurements", "chunks", "samples", "probes"):
        shutil.rmtree(b / table)
        (b / table).mkdir()
    with pytest.raises(ResultsError, match="has no timed ok/unsettled measurements"):
        compare_runs(read_run(RUN_A), read_run(b), pairs=[PAIR])


def test_captured_vs_control_within_one_run():
    assert captured_control_pairs(["L15:captured", "L15:gaussian:0.1", "L3:captured", "L3:zeros", "gaussian:1"]) == (
        ("L15:gaussian:0.1", "L15:captured"), ("L3:zeros", "L3:captured"))
    cmp = compare_inputs(read_run(SMOLLM2))  # its captured rows say bfloat16, the control bf16: same shape
    assert [(r.kernel, r.input_a, r.input_b) for r in cmp.rows] == [
        ("sdpa-cudnn", "L15:gaussian:0.1", "L15:captured"), ("sdpa-flash", "L15:gaussian:0.1", "L15:captured")]
    for r in cmp.rows:
        assert r.time.value == pytest.approx(r.cycles.value * r.clock.value, rel=1e-12)
        assert r.limiter_a == "none (NVML at max clock)"  # SmolLM2 at S=8192 never reached the power cap
    # No difference is claimed: both equivalence intervals (90 %) lie inside +-0.5 %, although cuDNN's 95 %
    # interval reaches +-0.58 %.
    assert [r.verdict for r in cmp.rows] == ["same", "same"]
    assert cmp.rows[0].time.resolution > 0.005 > cmp.rows[0].time.eq_high - 1


def test_inputs_of_a_run_without_captures_pair_with_the_first_input():
    cmp = compare_inputs(read_run(ISSUE2))
    assert {(r.input_a, r.input_b) for r in cmp.rows} == {PAIR}


def test_option_parsers():
    assert parse_threshold("2%") == 0.02 and parse_threshold("0.5 %") == 0.005 and parse_threshold("0.02") == 0.02
    assert parse_pairs(["a:1=b:2", "c=d"]) == (("a:1", "b:2"), ("c", "d"))
    for bad in ("2 percent", "-1%", "5"):
        with pytest.raises(ConfigError, match="fail-on-slowdown"):
            parse_threshold(bad)
    with pytest.raises(ConfigError, match="A_LABEL=B_LABEL"):
        parse_pairs(["gaussian:0.1"])
