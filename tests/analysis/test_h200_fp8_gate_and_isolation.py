"""The H200 session of 2026-12-03 for issues 31 and 32, read back from what the scripts wrote.

- `benchmarks/h200/fp8_captured.sh` (logs/20261203/fp8_captured, run 20261203-140700-fp8-captured-3da4f6): the
  gate by declared numerics on captured SmolLM2 L3 and L15 (B3 H9/3 S8192 d64, captured on the GPU in bf16) and
  a Gaussian 0.1 control; `bench error --model smollm2-135m` (16 pydoc documents x 1024 tokens, every layer and
  each alone, floor sdpa-cudnn); a sustained run of every bundled FP8 kernel and cuDNN on L15 and its control.
- `benchmarks/h200/isolation.sh` (logs/20261203/isolation, issue-31 at e1a6ddb): os._exit and a GPU kernel that
  never ends beside sdpa-cudnn in one run; cuDNN in the run's process against in its own.
"""

from __future__ import annotations

import json
import re

import pytest
from h200_runs import FIXTURES

from harness.analysis import compare_inputs, compare_kernels
from harness.results import read_run

H200 = FIXTURES / "h200"
FP8 = H200 / "logs" / "20261203" / "fp8_captured"
ISO = H200 / "logs" / "20261203" / "isolation"
RUN = H200 / "20261203-140700-fp8-captured-3da4f6"
FP8_KERNELS = ("triton-fp8-exact", "triton-fp8-lean", "gluon-fp8-lean-summma")


def test_the_declared_numerics_gate_passes_every_bundled_fp8_kernel_and_fails_every_mutant():
    rows = json.loads((FP8 / "gate.json").read_text())
    inputs = {r["input"] for r in rows}
    assert inputs == {"L03:captured", "L03:gaussian:0.1", "L15:captured"}
    bundled = [r for r in rows if not r["mutant"]]
    mutants = [r for r in rows if r["mutant"]]
    assert {r["kernel"] for r in bundled} == set(FP8_KERNELS) and len(bundled) == 9
    assert len({r["kernel"] for r in mutants}) == 5 and len(mutants) == 15
    assert all(r["passed"] and r["max_ratio"] < 1 and r["snr_db"] >= 30 for r in bundled)
    assert all(not r["passed"] for r in mutants)
    # The old format gate (max |diff| 0.03 beyond rounding) refused a correct kernel on the real layer.
    (summma_l15,) = [r for r in bundled if r["kernel"] == "gluon-fp8-lean-summma" and r["input"] == "L15:captured"]
    assert not summma_l15["format_gate_passed"] and round(summma_l15["max_ratio"], 3) == 0.817


def test_model_level_kl_per_layer_with_the_bf16_floor():
    rows = json.loads((FP8 / "error.json").read_text())
    every = {r["kernel"]: r for r in rows if r["scope"] == "all"}
    assert set(every) == {"sdpa-cudnn", *FP8_KERNELS, "triton-bf16"}
    assert every["sdpa-cudnn"]["role"] == "floor" and every["sdpa-cudnn"]["documents"] == 16
    # Two correct BF16 kernels agree at the model level; the FP8 kernels sit ~10x above that floor.
    assert every["triton-bf16"]["kl_vs_floor_lo"] <= 1 <= every["triton-bf16"]["kl_vs_floor_hi"]
    for k in FP8_KERNELS:
        assert 9 < every[k]["kl_vs_floor"] < 11 and every[k]["top1_agreement"] > 0.92
    layers = {r["layer"] for r in rows if r["scope"] == "layer"}
    assert layers == set(range(30))  # SmolLM2-135M: each of its 30 layers alone, too


def test_every_fp8_kernel_that_passed_the_gate_was_timed_and_split_into_cycles_and_clock():
    run = read_run(RUN)
    assert run.info["status"] == "complete"
    timed = run.measurements.filter(run.measurements["status"] == "ok")
    assert set(timed["kernel"].to_list()) == {*FP8_KERNELS, "sdpa-cudnn"}
    assert set(timed["input_label"].to_list()) == {"L15:captured", "L15:gaussian:0.1"}
    # Kernel against cuDNN on the captured layer, paired by repeat (the run interleaved its kernels).
    cmp = compare_kernels(run, [("sdpa-cudnn", k) for k in FP8_KERNELS], inputs=["L15:captured"])
    by = {r.kernel_b: r for r in cmp.rows}
    assert all(r.design == "interleaved" and r.clock_source == "inband" for r in cmp.rows)
    summma = by["gluon-fp8-lean-summma"]
    assert summma.time.value == pytest.approx(summma.cycles.value * summma.clock.value, rel=1e-12)
    assert round(summma.time.value, 3) == 1.008 and round(summma.cycles.value, 3) == 1.065
    assert round(summma.clock.value, 3) == 0.947  # cuDNN at the power cap, summma below it
    # Two interleaved pairs: no verdict (one degree of freedom), the +36 % is in the ratio and its cycles.
    assert by["triton-fp8-exact"].verdict == "too few repeats" and by["triton-fp8-exact"].time.low > 1.2
    assert by["triton-fp8-exact"].cycles.value > 1.4
    # Captured against its control: the FP8 kernels' clocks and cycles do not move with the data.
    for row in compare_inputs(run).rows:
        if row.kernel in FP8_KERNELS:
            assert abs(row.cycles.value - 1) < 0.002 and abs(row.clock.value - 1) < 0.003
    text = (FP8 / "sustained.log").read_text()
    assert "gluon-fp8-lean-summma          0.5625 ms" in text and "time x1.008 = cycles x1.065 x clock x0.947" in text


def test_isolation_on_the_h200_every_check_passed():
    checks = (ISO / "isolation-checks.log").read_text()
    assert "7 of 7 checks passed" in checks
    assert "its own process ended with exit status 0 without reporting why (os._exit(0)" in checks
    assert "its process was killed (SIGKILL) in stage prepare" in checks
    assert "GPU idle after run 1 (NVML: no compute process)" in checks
    m = re.search(r"child / in-process = ([0-9.]+) \(([+-][0-9.]+)%\)", checks)
    assert m and abs(float(m.group(1)) - 1) < 0.003
    assert (ISO / "isolation-run.exit").read_text().strip() == "0"
