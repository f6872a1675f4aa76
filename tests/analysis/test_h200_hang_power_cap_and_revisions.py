"""The H200 runs of 2026-12-01 read back and recomputed from their rows (pyarrow, plus polars where a
comparison needs it): what each run was made to show, so a change that breaks a figure breaks a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis import VerdictRule, compare_runs, input_sentences
from harness.results import read_rows, read_run

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
ENDINGS = H200 / "20261201-225219-endings-ba792f"
MAIN_JOB = H200 / "20261201-225635-main-job-09c5b6"
FP8 = H200 / "20261201-230026-fp8-variants-302b96"
COMMITS = sorted(H200.glob("20261201-225311-commits-*"))


def rows(run: Path) -> list[dict]:
    return read_rows(run, "measurements")


def test_the_hung_kernel_is_one_timeout_row_and_cudnn_is_timed():
    by = {}
    for r in rows(ENDINGS):
        by.setdefault(r["kernel"], []).append(r)
    (hung,) = by["hangs"]
    assert hung["status"] == "timeout" and "10 s launch timeout" in hung["error"] and hung["time_ns"] is None
    assert [r["status"] for r in by["sdpa-cudnn"]] == ["ok", "ok"]
    assert all(3.5e6 < r["time_ns"] < 4.5e6 for r in by["sdpa-cudnn"])
    assert read_rows(ENDINGS, "runs")[0]["status"] == "complete"


def test_the_main_job_puts_cudnn_at_the_power_cap_on_stacked_captures():
    ms = rows(MAIN_JOB)
    cudnn = [r for r in ms if r["kernel"] == "sdpa-cudnn"]
    assert {r["batch"] for r in ms} == {3} and {r["seq_len"] for r in ms} == {8192}
    assert len(cudnn) == 6 and all(r["power_limited_frac"] >= 0.9 for r in cudnn)
    flash = [r for r in ms if r["kernel"] == "sdpa-flash"]
    assert all(r["power_limited_frac"] < 0.1 and r["power_w"] < 680 for r in flash)  # d=64 flash stays under it
    sentences = input_sentences(ms, max_clock_mhz=read_rows(MAIN_JOB, "runs")[0]["max_sm_clock_mhz"])
    assert len(sentences) == 2 and any("sdpa-cudnn" in s and "power cap" in s for s in sentences)


def test_accumulating_pv_in_the_wgmma_wins_cycles_and_loses_clock():
    by = {r["kernel"]: r for r in rows(FP8)}
    lean, acc = by["triton-fp8-lean"], by["triton-fp8-lean-accmma"]
    # One repeat a side: no interval, the plain ratios of time = cycles / clock (in-band clock).
    time = acc["time_ns"] / lean["time_ns"]
    cycles = (acc["time_ns"] * acc["inband_clock_mhz"]) / (lean["time_ns"] * lean["inband_clock_mhz"])
    clock = lean["inband_clock_mhz"] / acc["inband_clock_mhz"]
    assert time == pytest.approx(cycles * clock, rel=1e-12)
    assert time < 0.96 and cycles < 0.94 and clock > 1.01  # 8 % fewer cycles, part given back by a 3 % lower clock
    assert by["triton-bf16"]["time_ns"] / acc["time_ns"] == pytest.approx(1.21, abs=0.02)


def test_a_plain_function_across_two_revisions_is_slower_by_its_extra_pass():
    pytest.importorskip("polars")
    a, b = (read_run(p) for p in COMMITS)
    # The revisions were timed interleaved by `bench commits`, and are judged as it judges them: paired.
    cmp = compare_runs(a, b, rule=VerdictRule(), design="interleaved")
    (row,) = cmp.rows
    assert row.kernel == "attn.py:attn" and row.verdict == "slower"
    # Read as two separate runs they carry the between-run variance and the 3 repeats cannot resolve 0.5 %.
    assert compare_runs(a, b, rule=VerdictRule()).rows[0].verdict == "unresolved"
    assert 1.01 < row.time.value < 1.03 and row.cycles.value > 1.01
