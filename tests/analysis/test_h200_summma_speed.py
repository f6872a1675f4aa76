"""gluon-fp8-lean-summma on the H200 once its row sum stopped swamping (issue 19; fixture
20261202-015428-gluon-fp8-6d9f07, benchmarks/h200/gluon_fp8.sh at commit 91528db; logs gluon-fp8-v3-*).

S=16384, H=32, d=128, causal, gaussian:0.1, one 2 s sustained window each. The fixed summma passes the gate
with the plain kernel's error (SNR 34.6 dB, was 17.8) and is the fastest kernel, 6.4 % ahead of
triton-fp8-lean-accmma, but short of the goal: x1.287 triton-bf16 (goal 1.3) and x1.187 sdpa-cudnn (goal
1.2). Of the x1.187 against cuDNN, x1.098 is cycles and x1.082 clock: cuDNN runs 8 % lower in-band.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.profiling import read_trace_table
from harness.results import read_rows

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
RUN = H200 / "20261202-015428-gluon-fp8-6d9f07"
BEFORE = H200 / "20261202-012708-gluon-fp8-ef3b83"  # gluon-fp8-lean (no summma), the previous run
TUNE = H200 / "logs" / "20261202" / "gluon-fp8-v3-tune.json"
SUMMMA = "gluon-fp8-lean-summma"


def _rows(run):
    return {r["kernel"]: r for r in read_rows(run, "measurements")}


def test_the_run_is_complete_at_the_fix_and_every_kernel_passed_its_gate():
    run = read_rows(RUN, "runs")[0]
    assert run["status"] == "complete" and run["git_commit"].startswith("91528db")
    ms = _rows(RUN)
    assert set(ms) == {SUMMMA, "triton-fp8-lean-accmma", "triton-bf16", "sdpa-cudnn"}
    assert all(r["status"] == "ok" and r["batch"] == 1 and r["seq_len"] == 16384 and r["causal"] for r in ms.values())
    # summma now has the same error as the kernel whose P it shares (was SNR 17.8 dB, rel. RMS 0.129)
    assert ms[SUMMMA]["gate_snr_db"] == pytest.approx(ms["triton-fp8-lean-accmma"]["gate_snr_db"], abs=0.01)
    assert ms[SUMMMA]["gate_snr_db"] == pytest.approx(34.55, abs=0.01) and ms[SUMMMA]["gate_snr_db"] >= 30


def test_the_tune_step_gated_all_three_gluon_configs_and_picked_summma():
    k = json.loads(TUNE.read_text())["kernels"]
    for cfg in ("64x4x3s", "64x4x2s", "64x4x3"):
        assert "SNR 34.6 dB" in k[f"gluon-fp8-lean[{cfg}]"]["gate"], cfg
    assert k["gluon-fp8-lean[64x4x3s]"]["ms"] < k["gluon-fp8-lean[64x4x3]"]["ms"]
    # burst: 2 stages a little ahead of 3 (3.223 vs 3.260 ms); the registry took 2 for d=128 in bf06879
    assert k["gluon-fp8-lean[64x4x2s]"]["ms"] == pytest.approx(3.223, abs=0.001)
    assert k["gluon-fp8-lean[64x4x3s]"]["ms"] == pytest.approx(3.260, abs=0.001)


def test_time_is_cycles_times_the_in_band_clock():
    for name, r in _rows(RUN).items():
        assert r["cycles_clock"] == "inband", name
        assert r["cycles_per_launch"] == pytest.approx(r["time_ns"] * 1e-9 * r["inband_clock_mhz"] * 1e6, rel=1e-9), name


def test_summma_against_bf16_and_cudnn_short_of_the_goal():
    ms = _rows(RUN)
    s = ms[SUMMMA]
    assert s["time_ns"] / 1e6 == pytest.approx(3.254, abs=0.001)  # goal ~3.17 ms
    assert s["inband_clock_mhz"] == pytest.approx(1654, abs=1) and s["cycles_per_launch"] / 1e6 == pytest.approx(5.383, abs=0.001)
    measured = {  # (time ratio, cycle ratio, clock ratio) of each against summma
        "triton-bf16": (1.287, 1.277, 1.008),
        "sdpa-cudnn": (1.187, 1.098, 1.082),
        "triton-fp8-lean-accmma": (1.064, 1.072, 0.993),
    }
    for name, (t, c, f) in measured.items():
        r = ms[name]
        time_ratio = r["time_ns"] / s["time_ns"]
        cycle_ratio = r["cycles_per_launch"] / s["cycles_per_launch"]
        clock_ratio = s["inband_clock_mhz"] / r["inband_clock_mhz"]
        assert time_ratio == pytest.approx(cycle_ratio * clock_ratio, rel=1e-9), name
        assert (round(time_ratio, 3), round(cycle_ratio, 3), round(clock_ratio, 3)) == (t, c, f), name
    # the goal (issue 19): >= 1.3 x triton-bf16 and >= 1.2 x sdpa-cudnn; not met, by 1 % each
    assert ms["triton-bf16"]["time_ns"] / s["time_ns"] < 1.3
    assert ms["sdpa-cudnn"]["time_ns"] / s["time_ns"] < 1.2


def test_summma_beats_the_plain_gluon_kernel_of_the_previous_run():
    before, after = _rows(BEFORE)["gluon-fp8-lean"], _rows(RUN)[SUMMMA]
    assert before["time_ns"] / after["time_ns"] == pytest.approx(1.063, abs=0.001)
    assert before["cycles_per_launch"] / after["cycles_per_launch"] == pytest.approx(1.090, abs=0.001)


def test_ncu_summma_issues_less_and_its_vector_pipes_are_a_sixth_lighter():
    t = {r["kernel"]: r for r in read_trace_table(RUN, "traces")}
    s, a = t[SUMMMA], t["triton-fp8-lean-accmma"]
    assert (round(s["issue_pct"], 1), round(a["issue_pct"], 1)) == (67.0, 70.3)
    assert (round(s["tensor_pct"], 1), round(a["tensor_pct"], 2)) == (41.1, 37.05)
    assert s["vector_cycles"] / 1e6 == pytest.approx(4.274, abs=0.001)
    assert a["vector_cycles"] / 1e6 == pytest.approx(5.117, abs=0.001)
    assert s["achieved_cycles"] / 1e6 == pytest.approx(5.277, abs=0.001)
    assert round(s["overlap"], 2) == 1.21 and round(a["overlap"], 2) == 1.25
