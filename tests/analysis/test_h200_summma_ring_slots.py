"""Issue 19's last step on the H200: gluon-fp8-lean-summma's TMA ring at d=128 from 3 slots to 2 (commit
bf06879 against 8a13bf2), by `bench commits` and then sustained beside the references and traced
(benchmarks/h200/summma_step.sh at bdfb2fe, in git history; tests/fixtures/h200/logs/20261202/summma-step*).
S=16384, H=32, d=128, causal, gaussian:0.1, every measurement at the 700 W cap.

- bench commits, 3 interleaved repeats a revision: 2 slots run x0.974 the time of 3 [0.968, 0.979],
  x0.973 in cycles at the same clock (x1.0007): the whole win is cycles.
- sustained, 2 repeats each: summma 3.248 ms, x1.302 triton-bf16 (cycles x1.304, clock x0.998) and
  x1.200 sdpa-cudnn (cycles x1.127, clock x1.066: cuDNN runs 6 % lower in-band), the issue's goals of
  1.3 and 1.2 reached with no margin to spare.
Every figure is recomputed here from the stored chunks, samples and probes (test_recompute_fixtures.recompute).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from test_recompute_fixtures import recompute

from harness.analysis import compare_runs
from harness.profiling import read_trace_table
from harness.results import read_rows, read_run

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200"
COMMITS = (H200 / "20261202-035253-commits-0-8a13bf20-e5fb2c", H200 / "20261202-035253-commits-1-bf068796-d2dce3")
RUN = H200 / "20261202-035421-summma-2s-cdb2d5"
LOGS = H200 / "logs" / "20261202"
SUMMMA = "gluon-fp8-lean-summma"


def _medians(run):
    """Per kernel: the median over repeats of the recomputed time (ns), in-band clock (MHz) and cycles."""
    by: dict[str, list[dict]] = {}
    for stored, fig in recompute(run):
        assert stored["status"] == "ok" and stored["power_limited_frac"] >= 0.98, stored["measurement_id"]
        by.setdefault(stored["kernel"], []).append(fig)
    return {k: {c: statistics.median(f[c] for f in figs) for c in ("time_ns", "inband_clock_mhz", "cycles_per_launch")}
            for k, figs in by.items()}


def test_each_revision_ran_its_own_kernel_source():
    """Each revision's kernel file is that commit's file, byte for byte. (Its `git_commit` field reads the
    checkout's bf06879 for both: HARNESS_GIT_COMMIT overrode every tree's commit when this ran; fixed
    since, see tests/results/test_provenance.py.)"""
    for run, rev in zip(COMMITS, ("8a13bf2", "bf06879")):
        info = read_run(run).info
        source = json.loads(info["kernel_sources_json"])[SUMMMA]
        assert f"/rev-{COMMITS.index(run)}-{rev}" in source["file"] and f"this run is revision {rev} = {rev}" in info["notes"]
        assert info["git_commit"] == "bf06879"  # the measuring harness is the checkout's, for both
        if shutil.which("git") and (ROOT / ".git").exists():
            shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:kernels_under_test/gluon_fp8.py"],
                                   capture_output=True, check=True).stdout
            assert hashlib.sha256(shown).hexdigest() == source["file_sha256"], rev


def test_bench_commits_two_slots_are_faster_and_the_win_is_cycles():
    # The revisions were interleaved (bench commits), so they pair by repeat, as `bench commits` now compares them.
    (row,) = compare_runs(read_run(COMMITS[0]), read_run(COMMITS[1]), design="interleaved").rows
    assert (row.kernel, row.repeats_a, row.repeats_b, row.verdict) == (SUMMMA, 3, 3, "faster")
    assert row.clock_source == "inband" and row.limiter_a == row.limiter_b == "power cap 100%"
    # The paired t interval over 3 pairs (df 2) is wider than the bootstrap's [0.9677, 0.9787] the log printed.
    assert round(row.time.value, 4) == 0.9741 and (round(row.time.low, 4), round(row.time.high, 4)) == (0.9599, 0.9886)
    assert row.time.method == "paired t" and row.time.df == 2.0
    assert round(row.cycles.value, 4) == 0.9734 and row.cycles.high < 1
    assert row.clock.low < 1 < row.clock.high  # no clock difference: the whole change is cycles
    assert row.time.value == pytest.approx(row.cycles.value * row.clock.value, rel=1e-9)
    # what the command printed and wrote is this comparison
    (stored,) = json.loads((LOGS / "summma-step-commits.json").read_text())["tables"]["revisions"]
    assert (stored["commit_a"][:7], stored["commit_b"][:7], stored["verdict"]) == ("8a13bf2", "bf06879", "faster")
    assert stored["time_b_over_a"] == pytest.approx(row.time.value, rel=1e-9)
    assert stored["cycles_b_over_a"] == pytest.approx(row.cycles.value, rel=1e-9)
    assert "bf06879 vs 8a13bf2: time x0.9741 = cycles x0.9734 x clock A/B x1.0007: faster" in \
        (LOGS / "summma-step.log").read_text()


def test_the_sustained_run_is_the_two_slot_commit_and_every_kernel_passed_its_gate():
    run = read_rows(RUN, "runs")[0]
    assert run["status"] == "complete" and run["git_commit"] == "bf06879"
    rows = read_rows(RUN, "measurements")
    assert {r["kernel"] for r in rows} == {SUMMMA, "triton-fp8-lean-accmma", "triton-bf16", "sdpa-cudnn"}
    assert len(rows) == 8 and all(r["seq_len"] == 16384 and r["heads_q"] == 32 and r["causal"] for r in rows)
    snr = {r["kernel"]: r["gate_snr_db"] for r in rows}
    assert snr[SUMMMA] == pytest.approx(snr["triton-fp8-lean-accmma"], abs=0.01) and snr[SUMMMA] >= 30


def test_summma_reaches_1_3x_bf16_and_1_2x_cudnn_split_into_cycles_and_clock():
    m = _medians(RUN)
    s = m[SUMMMA]
    assert s["time_ns"] / 1e6 == pytest.approx(3.2484, abs=5e-5)
    split = {}
    for name in ("triton-bf16", "sdpa-cudnn", "triton-fp8-lean-accmma"):
        r = m[name]
        time, cycles = r["time_ns"] / s["time_ns"], r["cycles_per_launch"] / s["cycles_per_launch"]
        clock = time / cycles  # the clock factor the medians imply; each repeat's time is its cycles / clock
        assert clock == pytest.approx(s["inband_clock_mhz"] / r["inband_clock_mhz"], rel=1e-3), name
        split[name] = tuple(round(x, 3) for x in (time, cycles, clock))
    assert split == {"triton-bf16": (1.302, 1.304, 0.998), "sdpa-cudnn": (1.200, 1.127, 1.066),
                     "triton-fp8-lean-accmma": (1.078, 1.102, 0.978)}
    assert m["triton-bf16"]["time_ns"] / s["time_ns"] >= 1.3 and m["sdpa-cudnn"]["time_ns"] / s["time_ns"] >= 1.2


def test_the_burst_ranking_put_two_slots_first():
    text = (LOGS / "summma-step.log").read_text()
    ranked = [line.split()[0] for line in text.splitlines() if line.startswith(("gluon-fp8-lean[", "sdpa-cudnn ",
                                                                                 "triton-bf16 ")) and "TFLOP/s" in line]
    assert ranked == ["gluon-fp8-lean[64x4x2s]", "gluon-fp8-lean[64x4x3s]", "gluon-fp8-lean[64x4x4s]", "sdpa-cudnn",
                      "triton-bf16"]


def test_ncu_of_the_two_slot_kernel():
    (t,) = [r for r in read_trace_table(RUN, "traces") if r["kernel"] == SUMMMA]
    assert (round(t["tensor_pct"], 1), round(t["issue_pct"], 1)) == (41.8, 66.1)
    assert t["achieved_cycles"] / 1e6 == pytest.approx(5.215, abs=0.001)
    assert t["vector_cycles"] / 1e6 == pytest.approx(4.264, abs=0.001)
