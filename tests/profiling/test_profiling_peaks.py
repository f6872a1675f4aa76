"""Peaks: the registry and its work counts, rates from measurement rows, the roofline, a real sustained
peaks run on the CPU (torch-only peaks), and the Triton loops' SASS for sm_90 (no GPU needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.config import SustainedProtocol
from harness.errors import ResultsError, UnknownKernelError, UnsupportedInputError
from harness.profiling import (
    PeakShape,
    Roof,
    RooflinePoint,
    peak_input_spec,
    peak_registry,
    peak_rows,
    read_roof,
    read_trace_table,
    roofs_from_peaks,
    run_peaks,
    stream_bytes,
    stream_kernel,
)

ROOT = Path(__file__).resolve().parents[2]
ISSUE2 = ROOT / "tests" / "fixtures" / "h200" / "20261130-043508-issue2-b7147a"
PNG = b"\x89PNG\r\n\x1a\n"


def test_registry_declares_every_peak_with_its_work():
    reg = peak_registry(gemm_size=8192, copy_bytes=1 << 30)
    assert reg.names() == sorted(
        [f"peak-gemm-{d}-{o}" for d in ("bf16", "fp8") for o in ("random", "constant", "zero")]
        + ["peak-fma-fp32", "peak-exp2-mufu", "peak-copy-d2d", "peak-read-stream", "peak-write-stream"])
    work = {k.name: (k.extra["unit"], k.extra["work_per_launch"]) for k in reg}
    assert work["peak-gemm-fp8-zero"] == ("FLOP", 2 * 8192**3)
    assert work["peak-copy-d2d"] == ("byte", 2 * 2**30)  # read + written
    assert work["peak-read-stream"] == ("byte", 2 * 2**30) and work["peak-write-stream"] == ("byte", 2**30)
    # a size that is not whole tiles of the streams counts the bytes the streams touch, never more
    odd = peak_registry(gemm_size=64, copy_bytes=100_000, read_bytes=100_000, write_bytes=100_000)
    assert odd.get("peak-read-stream").extra["work_per_launch"] == stream_bytes(100_000) == 98304
    # every peak names its second, independent method; the copy's is the runtime's eager copy, not its own kernel
    assert all(k.extra["check"] for k in reg)
    assert "eager copy_" in reg.get("peak-copy-d2d").extra["check"]
    assert "graph-captured copy_" in reg.get("peak-copy-d2d").description
    assert work["peak-fma-fp32"] == ("FLOP", 2 * 512 * 32768 * 1024 * 4)  # 2 FLOP x iters x programs x BLOCK x chains
    assert work["peak-exp2-mufu"] == ("exp", 64 * 32768 * 1024 * 4)
    assert reg.get("peak-fma-fp32").unavailable_reason("cpu") == "runs on cuda, not cpu"
    with pytest.raises(UnknownKernelError, match="peak-gemm-bf16-random"):
        reg.get("peak-gemm")


def test_the_triton_loops_match_the_declared_work():
    pt = pytest.importorskip("harness.profiling._peak_triton", reason="triton is not installed")
    assert (pt.BLOCK, pt.CHAINS) == (1024, 4)


def test_dummy_input_counts_no_attention_flops():
    spec = peak_input_spec()
    assert isinstance(spec.shape, PeakShape) and spec.shape.flops == 0 and spec.label == "peak"


def test_rates_from_measurement_rows():
    reg = peak_registry(gemm_size=1024, copy_bytes=1 << 20)
    rows = peak_rows([
        {"kernel": "peak-gemm-bf16-random", "time_ns": 2e3, "repeat": 0, "status": "ok", "sm_clock_mhz": 1485.0},
        {"kernel": "peak-copy-d2d", "time_ns": 1e3, "repeat": 0, "status": "ok"},
        {"kernel": "peak-fma-fp32", "time_ns": None, "status": "error"},  # not timed: no rate
        {"kernel": "sdpa-cudnn", "time_ns": 5.0},  # not a peak
    ], reg, run_id="r1", device_name="NVIDIA H200")
    assert [r["kernel"] for r in rows] == ["peak-gemm-bf16-random", "peak-copy-d2d"]
    assert [r["rate_per_s"] for r in rows] == pytest.approx([2 * 1024**3 / 2e-6, 2 * 2**20 / 1e-6])
    assert rows[0]["group"] == "gemm-bf16" and rows[0]["operands"] == "random" and rows[0]["sm_clock_mhz"] == 1485.0


def test_roofs_are_medians_and_the_roofline_is_a_png():
    rows = [{"kernel": "peak-gemm-bf16-random", "unit": "FLOP", "operands": "random", "rate_per_s": r}
            for r in (600e12, 620e12, 610e12)]
    rows += [{"kernel": "peak-gemm-bf16-zero", "unit": "FLOP", "operands": "zero", "rate_per_s": 780e12},
             {"kernel": "peak-copy-d2d", "unit": "byte", "operands": "random", "rate_per_s": 4.0e12},
             {"kernel": "peak-exp2-mufu", "unit": "exp", "operands": "chaotic", "rate_per_s": 3.9e12}]
    roofs = {r.label: r for r in roofs_from_peaks(rows)}
    assert roofs["gemm-bf16-random"] == Roof(label="gemm-bf16-random", kind="compute", value=610e12, operands="random")
    assert roofs["copy-d2d"].kind == "memory" and roofs["exp2-mufu"].kind == "ops"  # exps are not drawn as FLOP
    from harness.report._roofline import roofline_figure_png, roofline_rows

    points = [RooflinePoint(label="sdpa-cudnn / gaussian:0.1", intensity=2.2e12 / 134e6, flops_per_s=560e12),
              RooflinePoint(label="sdpa-flash / gaussian:0.1", intensity=2.2e12 / 134e6, flops_per_s=330e12, note="x")]
    shape = {"input_label": "gaussian:0.1", "head_dim_qk": 128, "head_dim_v": 128, "dtype": "bfloat16"}
    rows = roofline_rows(points, [{**shape, "kernel": "sdpa-cudnn"}, {**shape, "kernel": "sdpa-flash"}],
                         list(roofs.values()))
    png = roofline_figure_png(roofs=list(roofs.values()), points=points, rows=rows)
    assert png[:8] == PNG
    with pytest.raises(ValueError, match="at least one roof"):
        roofline_figure_png(roofs=[], points=[], rows=[])


PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3, repeats=2)


def test_peaks_run_on_the_cpu_stores_rates_in_both_runs(tmp_path):
    into, into2 = tmp_path / ISSUE2.name, tmp_path / "second" / ISSUE2.name
    shutil.copytree(ISSUE2, into)
    shutil.copytree(ISSUE2, into2)
    reg = peak_registry(gemm_size=64, copy_bytes=1 << 16, read_bytes=1 << 16, write_bytes=1 << 16, devices=("cpu",))
    res = run_peaks(kernels=("peak-gemm-bf16-random", "peak-gemm-bf16-zero", "peak-copy-d2d", "peak-read-stream",
                             "peak-exp2-mufu"),
                    device="cpu", telemetry="none", protocol=PROTO, results_dir=tmp_path / "results", registry=reg,
                    into=[into, into2], check_warm_s=0.02)
    assert res.skipped == {"peak-exp2-mufu": "runs on cuda, not cpu"}
    assert res.run.status == "complete"
    rows = read_trace_table(res.run.path, "peaks")
    assert Counter(r["kernel"] for r in rows) == {"peak-gemm-bf16-random": 2, "peak-gemm-bf16-zero": 2,
                                                   "peak-copy-d2d": 2, "peak-read-stream": 2}
    for r in rows:
        assert r["rate_per_s"] == pytest.approx(r["work_per_launch"] / (r["time_ns"] * 1e-9))
        assert r["peaks_run_id"] == res.run.run_id == r["run_id"]
        # each peak's second timing, in the same run, with its method named
        assert r["check_time_ns"] > 0 and r["check_method"] == reg.get(r["kernel"]).extra["check"]
        assert r["check_rate_per_s"] == pytest.approx(r["work_per_launch"] / (r["check_time_ns"] * 1e-9))
    roofs = {x.label: x for x in roofs_from_peaks(rows)}
    assert read_roof(list(roofs.values())) is roofs["read-stream"]  # the read roof, not the copy
    assert roofs["copy-d2d"].check_method.startswith("eager copy_") and roofs["copy-d2d"].check_value > 0
    for target in (into, into2):  # --into several runs: each gets the table, under its own run id
        copied = read_trace_table(target, "peaks")
        assert {r["run_id"] for r in copied} == {target.name} and len(copied) == len(rows)
    # The measurement rows of a peaks run carry the dummy input's zero attention FLOPs, as documented.
    assert {m["tflops"] for m in res.run.measurements} == {0.0}
    # ... and its report builds, with the peaks section and a roofline of roofs only (no attention points).
    from harness.report import build_report
    from harness.report._trace_section import trace_sections
    from harness.results import read_run

    run = read_run(res.run.path)
    assert build_report(run).sections
    (section,) = trace_sections(run)
    assert section.title == "Empirical peaks and roofline" and section.figures[0].png[:8] == PNG
    assert {r[0] for r in section.tables[0].rows} == {"gemm-bf16-random", "gemm-bf16-zero", "copy-d2d", "read-stream"}


def test_peaks_that_cannot_run_here_and_a_bad_into(tmp_path):
    with pytest.raises(UnsupportedInputError, match="No peak kernel can run on cpu: peak-fma-fp32: runs on cuda"):
        run_peaks(kernels=("peak-fma-fp32",), device="cpu", telemetry="none", protocol=PROTO,
                  results_dir=tmp_path, registry=peak_registry(gemm_size=64, copy_bytes=1 << 16))
    with pytest.raises(ResultsError, match="is not a run directory"):
        run_peaks(device="cpu", into=tmp_path, results_dir=tmp_path, registry=peak_registry(gemm_size=64))


SASS_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from harness.profiling import _peak_triton as pt
from harness.profiling._peaks import EXP_ITERS, FMA_ITERS

out = {}
for name, fn, sig, consts in (("fma", pt.fma_loop, {"out_ptr": "*fp32", "c": "fp32"}, {"ITERS": FMA_ITERS}),
                              ("exp2", pt.exp2_loop, {"out_ptr": "*fp32"}, {"ITERS": EXP_ITERS})):
    consts["BLOCK"] = pt.BLOCK
    src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts,
                    attrs={(0,): [["tt.divisibility", 16]]})
    cc = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": pt.NUM_WARPS})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cc.asm["cubin"])
        f.flush()
        out[name] = subprocess.run([sys.argv[1], "-sass", f.name], capture_output=True, text=True, check=True).stdout
from harness.profiling._peaks import _STREAMS
for name, fn, sig in (("read", pt.read_stream, {"src_ptr": "*bf16", "out_ptr": "*fp32"}),
                      ("write", pt.write_stream, {"dst_ptr": "*bf16", "value": "fp32"}),
                      ("copy", pt.copy_stream, {"src_ptr": "*bf16", "dst_ptr": "*bf16"})):
    block, unroll, warps = _STREAMS[name]
    consts = {"BLOCK": block, "UNROLL": unroll}
    src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts,
                    attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
    cc = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cc.asm["cubin"])
        f.flush()
        out[name] = subprocess.run([sys.argv[1], "-sass", f.name], capture_output=True, text=True, check=True).stdout
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def loop_sass():
    triton = pytest.importorskip("triton", reason="triton is not installed")
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not (tool.exists() and (tool.parent / "ptxas").exists()):
        pytest.skip("this triton wheel ships no ptxas/cuobjdump")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", SASS_SCRIPT, str(tool)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _loop_body(sass: str) -> Counter:
    """Opcodes between the loop's backward branch target and the branch."""
    insns = re.findall(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?P\d\s+)?([A-Z0-9_.]+)([^;]*);", sass)
    addr, _, target = next((a, op, t) for a, op, t in insns if op == "BRA" and int(t.split("0x")[-1], 16) < int(a, 16))
    lo, hi = int(target.split("0x")[-1], 16), int(addr, 16)
    return Counter(op for a, op, _ in insns if lo <= int(a, 16) < hi)


def test_fma_loop_is_ffma_only(loop_sass):
    body = _loop_body(loop_sass["fma"])
    assert body["FFMA"] >= 32 and body["FFMA"] >= 0.95 * sum(body.values())  # only loop control besides


def test_exp2_loop_is_bound_by_mufu(loop_sass):
    body = _loop_body(loop_sass["exp2"])
    # one MUFU.EX2 per step of each chain; the FFMA and |.| beside it go to the FMA pipe, which has 8x
    # MUFU's rate, so the loop stays MUFU-bound (fewer than 8 other instructions per EX2).
    assert body["MUFU.EX2"] >= 32
    assert sum(body.values()) - body["MUFU.EX2"] < 8 * body["MUFU.EX2"]


@pytest.mark.parametrize("stream, op", [("read", "LDG"), ("write", "STG"), ("copy", "LDG"), ("copy", "STG")])
def test_memory_streams_move_16_bytes_per_access(loop_sass, stream, op):
    """The read roof must come from a read kernel as good as the best: every global access of the streams is a
    16-byte vector (LDG.E.128 / STG.E.128), each thread moving its share of a program's tiles in as many of them as
    the bytes need (no narrower access, no access twice)."""
    from harness.profiling._peaks import _STREAMS

    block, unroll, warps = _STREAMS[stream]
    accesses = re.findall(rf"\b{op}\.E(\.[A-Z0-9_.]+)?", loop_sass[stream])
    assert accesses and all(".128" in (a or "") for a in accesses), accesses
    assert len(accesses) == block * unroll * 2 // (32 * warps * 16)


def test_stream_kernel_is_the_kernel_the_peaks_launch():
    pytest.importorskip("triton")
    from harness.profiling import _peak_triton as pt

    assert [stream_kernel(w) for w in ("read", "write", "copy")] == [pt.read_stream, pt.write_stream, pt.copy_stream]
    with pytest.raises(KeyError):
        stream_kernel("gather")
