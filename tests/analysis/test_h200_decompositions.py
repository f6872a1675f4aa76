"""Decompositions of real H200 runs (tests/fixtures/h200/README.md): a kernel commit that won cycles and lost
clock, and burst next to sustained for the same kernels in one run."""

from __future__ import annotations

import math

import pytest
from h200_runs import COLD_BURST, COMMITS_BASE, COMMITS_HEAD, ISSUE4

from harness.analysis import compare_runs, summarize_run
from harness.results import read_run


def test_the_triton_bf16_tuning_won_cycles_and_lost_clock():
    # 7e7d700 (8 warps, 2 stages) vs the tuned config (packed P, 3 stages), timed A B A B by `bench commits`.
    (row,) = compare_runs(read_run(COMMITS_BASE), read_run(COMMITS_HEAD)).rows
    # Two repeats a side: no verdict (one degree of freedom), but the factors are plain to see.
    assert row.kernel == "triton-bf16" and row.verdict == "too few repeats" and row.time.high < 0.8
    assert row.time.value == pytest.approx(row.cycles.value * row.clock.value, rel=1e-9)
    assert row.time.value == pytest.approx(0.703, abs=0.002)
    assert row.cycles.value == pytest.approx(0.653, abs=0.002)  # a third fewer cycles ...
    assert row.clock.value == pytest.approx(1.077, abs=0.002)  # ... at a 7 % lower clock
    # the old kernel never reached the power cap; the tuned one lives on it
    assert "power cap" not in row.limiter_a and "power cap" in row.limiter_b
    assert row.clock_source == "inband" and row.clock_a_mhz > row.clock_b_mhz


def test_burst_and_sustained_of_one_run_sit_side_by_side():
    summary = summarize_run(read_run(ISSUE4))
    rows = {r.kernel: r for r in summary.burst_vs_sustained.rows}
    assert set(rows) == {"sdpa-cudnn", "triton-bf16", "triton-fp8-exact"}  # fp8-lean's burst ran out of time
    cudnn = rows["sdpa-cudnn"]
    # 500 warm-up launches (2 s) already put cuDNN on the 700 W cap: burst and sustained agree within 1 %
    assert cudnn.time_a_ns == pytest.approx(3.9244e6, rel=1e-3) and cudnn.time_b_ns == pytest.approx(3.9405e6, rel=1e-3)
    assert abs(cudnn.time.value - 1) < 0.01


def test_a_cold_burst_starts_at_boost_and_is_capped_within_a_tenth_of_a_second():
    run = read_run(COLD_BURST)
    (m,) = run.measurements.to_dicts()
    assert m["status"] == "burst" and m["window_launches"] == 25
    samples = [s for s in run.samples.to_dicts() if s["sm_clock_mhz"] is not None]
    (chunk,) = run.chunks.to_dicts()
    before = [s["sm_clock_mhz"] for s in samples if s["t_ns"] < chunk["t_start_ns"] - 20e6]
    during = [s["sm_clock_mhz"] for s in samples if chunk["t_start_ns"] + 10e6 < s["t_ns"] < chunk["t_end_ns"]]
    assert max(before) == 1980 and set(during) == {1650}
    sustained = [r for r in read_run(ISSUE4).measurements.to_dicts()
                 if r["kernel"] == "sdpa-cudnn" and r["input_label"] == "gaussian:0.1" and r["status"] == "ok"]
    gmean = math.exp(sum(math.log(r["time_ns"]) for r in sustained) / len(sustained))
    assert 0.97 < m["time_ns"] / gmean < 0.995  # 25 launches after 15 s idle: 1.6 % faster than sustained
