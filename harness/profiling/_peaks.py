"""Empirical peaks under the sustained protocol, and the roofline they draw (the paper's Table V).

Each peak is a harness `Kernel` in a registry of its own, so `run_sustained` times it exactly as it
times attention: idle, warm-in until the clock settles, a window with telemetry, rotated repeats. Its
work per launch (FLOP, bytes or exps) is in `Kernel.extra`; `peak_rows` turns the measured time per
launch into the achieved rate.

The runner wants attention inputs; peaks have their own operands, allocated in their factory. So
the run gets one dummy input (`peak_input_spec`: 1 x 1 x 16 x 16 zeros) that only carries the device
into the factories, whose attention FLOP count is declared 0: the measurement rows' tflops column
reads 0 for peaks, and the `peaks` table beside the run holds the real rates.

The memory peaks are SM kernels on a GPU (Triton streams, `_peak_triton`): a read stream (the roof a decode
kernel's bytes are set against), a write stream and a copy. Never a graph-captured `copy_`: that is a copy-engine
memcpy node, 35 % below what an SM kernel moves. Each peak is also timed by a second, independent method in the
same run (`_peak_checks`), and the two are shown side by side.

>>> reg = peak_registry(gemm_size=1024)
>>> reg.get("peak-gemm-bf16-random").extra["work_per_launch"] == 2 * 1024**3
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Sequence

from harness.config import RESULTS_ROOT, RunConfig, SustainedProtocol
from harness.devices import open_device
from harness.errors import ConfigError, ResultsError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec
from harness.kernels import Kernel, KernelRegistry
from harness.profiling._peak_checks import time_check
from harness.profiling._roofs import Roof, roofs_from_peaks
from harness.profiling._store import write_trace_table
from harness.runner import run_sustained

__all__ = [
    "OPERANDS",
    "PeakShape",
    "PeaksResult",
    "peak_input_spec",
    "peak_registry",
    "peak_rows",
    "run_peaks",
    "stream_bytes",
    "stream_kernel",
]

OPERANDS = ("random", "constant", "zero")
FMA_ITERS, EXP_ITERS, LOOP_GRID = 512, 64, 32768  # 32768 programs: >= 15 waves on any GPU, so the tail is small
# The memory streams' tiling (elements per tile, tiles per program, warps), tuned on the H200
# (benchmarks/h200/decode_tune.py, 2026-12-05: read 16384 x 1 x 8 warps 4.61 TB/s, every tiling tried 4.47-4.61;
# write 4.59 TB/s. The copy at 4096 x 1 x 4 with evict-first loads read 3.89 TB/s in `bench peaks`, 8 % below the
# eager copy_ beside it (flagged DISAGREE); of 16 tilings x load policies, 2048 x 1 x 4 with plain loads moved
# 4.25 TB/s graph-timed against eager copy_'s 4.24, and evict-first loads cost every tiling 2-9 %).
_STREAMS = {"read": (16384, 1, 8), "write": (16384, 1, 8), "copy": (2048, 1, 4)}
_STREAM_TILINGS = tuple(_STREAMS.values())


def stream_kernel(which: str):
    """The Triton SM kernel of the memory stream `which` ("read", "write" or "copy"; imports triton), for sweeps
    of its tiling: launched as `kernel[(grid,)](..., BLOCK=, UNROLL=, num_warps=)`, as the peaks launch it."""
    from harness.profiling import _peak_triton as pt

    return {"read": pt.read_stream, "write": pt.write_stream, "copy": pt.copy_stream}[which]


@dataclass(frozen=True, kw_only=True)
class PeakShape(AttentionShape):
    """The dummy input's shape: attention FLOPs 0, because peaks count their own work."""

    @property
    def flops(self) -> int:
        return 0


def peak_input_spec() -> InputSpec:
    """The one input a peaks run needs: tiny zeros that only carry the device into the factories."""
    return InputSpec(shape=PeakShape(batch=1, heads_q=1, heads_kv=1, seq_len=16, head_dim_qk=16, causal=False),
                     dtype="bfloat16", source="zeros", name="peak")


def _operand(torch, shape, kind: str, *, device, seed: int):
    if kind == "zero":
        return torch.zeros(shape, device=device)
    if kind == "constant":
        return torch.ones(shape, device=device)
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, device=device, generator=g)


def _gemm(dtype: str, operands: str, n: int, fast_accum: bool):
    def prepare(inputs):
        import torch

        dev = inputs.q.device
        a = _operand(torch, (n, n), operands, device=dev, seed=1)
        b = _operand(torch, (n, n), operands, device=dev, seed=2)
        if dtype == "bf16":
            a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
            c = torch.empty((n, n), device=dev, dtype=torch.bfloat16)
            return lambda: torch.mm(a, b, out=c)
        a8 = a.to(torch.float8_e4m3fn)
        bt8 = b.t().contiguous().to(torch.float8_e4m3fn)  # cuBLASLt wants the second operand column-major
        one = torch.ones((), device=dev, dtype=torch.float32)
        return lambda: torch._scaled_mm(a8, bt8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                        use_fast_accum=fast_accum)

    return prepare


def _loop(which: str):
    def prepare(inputs):
        import torch

        from harness.profiling import _peak_triton as pt

        out = torch.empty(LOOP_GRID * pt.BLOCK, device=inputs.q.device, dtype=torch.float32)
        if which == "fma":
            def launch():
                pt.fma_loop[(LOOP_GRID,)](out, -1.9, ITERS=FMA_ITERS, BLOCK=pt.BLOCK, num_warps=pt.NUM_WARPS)
                return out
        else:
            def launch():
                pt.exp2_loop[(LOOP_GRID,)](out, ITERS=EXP_ITERS, BLOCK=pt.BLOCK, num_warps=pt.NUM_WARPS)
                return out
        launch()  # compile here, in setup, never in a timed launch
        return launch

    return prepare


def _stream(which: str, nbytes: int):
    """The memory stream `which` ("read", "write", "copy") over `nbytes` per buffer: the Triton SM kernel on a GPU
    (its tiling from `_peak_triton.STREAMS`), torch's own op on the CPU (no graphs there, so no memcpy node)."""

    def prepare(inputs):
        import torch

        dev = inputs.q.device
        src = _operand(torch, (stream_bytes(nbytes) // 2,), "random", device=dev, seed=3).to(torch.bfloat16)
        if dev.type == "cpu":
            dst = torch.empty_like(src)
            out = torch.empty((), dtype=torch.float32)
            return {"read": lambda: torch.sum(src, 0, dtype=torch.float32, out=out),
                    "write": lambda: dst.fill_(0.25), "copy": lambda: dst.copy_(src)}[which]
        from harness.profiling import _peak_triton as pt

        block, unroll, warps = _STREAMS[which]
        grid = src.numel() // (block * unroll)  # whole programs: `stream_bytes` made the buffer whole tiles
        if which == "read":
            part = torch.empty(grid, device=dev, dtype=torch.float32)
            launch = lambda: pt.read_stream[(grid,)](src, part, BLOCK=block, UNROLL=unroll, num_warps=warps)  # noqa
        elif which == "write":
            launch = lambda: pt.write_stream[(grid,)](src, 0.25, BLOCK=block, UNROLL=unroll, num_warps=warps)  # noqa
        else:
            dst = torch.empty_like(src)
            launch = lambda: pt.copy_stream[(grid,)](src, dst, BLOCK=block, UNROLL=unroll, num_warps=warps)  # noqa
        launch()  # compile here, in setup, never in a timed launch
        return launch

    return prepare


def _eager_copy(nbytes: int):
    """The copy's second method: the runtime's eager device-to-device copy of the same bytes."""

    def prepare(inputs):
        import torch

        src = _operand(torch, (stream_bytes(nbytes) // 2,), "random", device=inputs.q.device, seed=3).to(torch.bfloat16)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    return prepare


def stream_bytes(nbytes: int) -> int:
    """Bytes per buffer a stream over `nbytes` touches: whole tiles of the largest Triton stream tiling (every
    stream, on any device, covers these same bytes, so its work per launch is exact).

    >>> stream_bytes(1 << 30), stream_bytes(100_000)
    (1073741824, 98304)
    """
    tile = 2 * max(b * u for b, u, _ in _STREAM_TILINGS)
    return nbytes // tile * tile


def _triton_ok(kind: str) -> str | None:
    return None if find_spec("triton") else "triton is not installed (pip install triton)"


def _fp8_ok(kind: str) -> str | None:
    import torch

    if kind == "cuda" and torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9):
        return "FP8 matrix products need compute capability 8.9 or newer"
    return None


def peak_registry(*, gemm_size: int = 8192, copy_bytes: int = 1 << 30, read_bytes: int = 2 << 30,
                  write_bytes: int = 1 << 30, devices: Sequence[str] = ("cuda", "rocm", "cpu"),
                  fp8_fast_accum: bool = False) -> KernelRegistry:
    """The peak kernels: bf16 and fp8 GEMMs (random, constant, zero operands), an FMA loop, an exp2 loop, and the
    memory streams (read, write, copy), each with its second method (`_peak_checks`).

    `devices` applies to the torch-only kernels (bf16 GEMM) and the streams (Triton on a GPU, torch on the CPU), so
    a CPU dry run can time them (figures of the host, not of a GPU); the fp8 GEMM (e4m3fn, not MI300's fnuz) and the
    Triton loops (inline PTX) are CUDA-only. Copy bytes count the read and the write.
    """
    least = 2 * max(b * u for b, u, _ in _STREAM_TILINGS)  # one tile of the streams
    if gemm_size < 16 or min(copy_bytes, read_bytes, write_bytes) < least:
        raise ConfigError(f"Peak sizes too small: gemm_size={gemm_size} (>= 16), copy/read/write bytes "
                          f"{copy_bytes}/{read_bytes}/{write_bytes} (>= {least} each: one tile of the streams).")
    reg = KernelRegistry()
    flop = float(2 * gemm_size**3)
    same = "the same kernel in an eager loop, timed with device events"

    def add(name, prepare, *, group, operands, unit, work, on=("cuda",), availability=None, what="", check=None):
        check_text, check_prepare = check or (same, prepare)
        reg.add(Kernel(
            name=name, prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset(on), description=what,
            source=f"{__name__}:{name}", extra={"group": group, "operands": operands, "unit": unit,
                                                "work_per_launch": float(work), "check": check_text,
                                                "check_prepare": check_prepare},
            **({"availability": availability} if availability else {})))

    for ops in OPERANDS:
        add(f"peak-gemm-bf16-{ops}", _gemm("bf16", ops, gemm_size, fp8_fast_accum), group="gemm-bf16", operands=ops,
            unit="FLOP", work=flop, on=devices, what=f"bf16 GEMM {gemm_size}^3, {ops} operands (torch.mm)")
        add(f"peak-gemm-fp8-{ops}", _gemm("fp8", ops, gemm_size, fp8_fast_accum), group="gemm-fp8", operands=ops,
            unit="FLOP", work=flop, availability=_fp8_ok,
            what=f"fp8 e4m3 GEMM {gemm_size}^3, {ops} operands (torch._scaled_mm, bf16 out)")
    from_loop = LOOP_GRID * 1024 * 4  # programs x BLOCK x CHAINS (see _peak_triton)
    add("peak-fma-fp32", _loop("fma"), group="fma-fp32", operands="chaotic", unit="FLOP",
        work=2 * FMA_ITERS * from_loop, availability=_triton_ok, what="fp32 FFMA-only loop (Triton)")
    add("peak-exp2-mufu", _loop("exp2"), group="exp2-mufu", operands="chaotic", unit="exp",
        work=EXP_ITERS * from_loop, availability=_triton_ok, what="ex2.approx (MUFU.EX2) loop (Triton)")
    # The streams' bytes are those their programs touch: whole tiles (`stream_bytes`), on any device.
    tiling = "; GPU: Triton SM kernel, {} elements x {} tiles a program, {} warps, 16-byte accesses"
    add("peak-read-stream", _stream("read", read_bytes), group="read", operands="random", unit="byte",
        work=stream_bytes(read_bytes), on=devices, availability=_stream_ok,
        what=f"read stream of {read_bytes / 2**20:.0f} MiB bf16 summed in fp32, loads evict-first"
             + tiling.format(*_STREAMS["read"]) + "; CPU: torch.sum")
    add("peak-write-stream", _stream("write", write_bytes), group="write", operands="pattern", unit="byte",
        work=stream_bytes(write_bytes), on=devices, availability=_stream_ok,
        what=f"write stream of {write_bytes / 2**20:.0f} MiB bf16 (an address pattern)"
             + tiling.format(*_STREAMS["write"]) + "; CPU: fill_")
    add("peak-copy-d2d", _stream("copy", copy_bytes), group="copy", operands="random", unit="byte",
        work=2 * stream_bytes(copy_bytes), on=devices, availability=_stream_ok,
        what=f"device-to-device copy of {copy_bytes / 2**20:.0f} MiB (bytes read + written)"
             + tiling.format(*_STREAMS["copy"]) + " (never a graph-captured copy_: a copy-engine memcpy node); CPU: "
             "copy_", check=("eager copy_ (the runtime's device-to-device memcpy), timed with device events",
                             _eager_copy(copy_bytes)))
    return reg


def _stream_ok(kind: str) -> str | None:
    """On a GPU the streams are Triton kernels; on the CPU torch's ops."""
    return None if kind == "cpu" else _triton_ok(kind)


def peak_rows(measurements: Sequence[dict], registry: KernelRegistry, *, run_id: str, device_name: str | None = None,
              checks: dict | None = None) -> list[dict]:
    """`peaks` table rows from a peaks run's measurement rows: achieved rate = work per launch / time per launch;
    `checks` (kernel -> `time_check`'s dict) adds each kernel's second timing to its rows."""
    checks = checks or {}
    out = []
    for m in measurements:
        if m.get("kernel") not in registry or not m.get("time_ns"):
            continue
        extra = registry.get(m["kernel"]).extra
        out.append({
            "run_id": run_id, "peaks_run_id": run_id, "measurement_id": m.get("measurement_id"), "kernel": m["kernel"],
            "group": extra["group"], "operands": extra["operands"], "unit": extra["unit"],
            "work_per_launch": extra["work_per_launch"], "repeat": m.get("repeat"), "status": m.get("status"),
            "time_ns": m["time_ns"], "rate_per_s": extra["work_per_launch"] / (m["time_ns"] * 1e-9),
            "sm_clock_mhz": m.get("sm_clock_mhz"), "inband_clock_mhz": m.get("inband_clock_mhz"),
            "power_w": m.get("power_w"), "power_limited_frac": m.get("power_limited_frac"),
            "reason_names": m.get("reason_names"), "settled": m.get("settled"), "device_name": device_name,
            **_check_columns(checks.get(m["kernel"]), extra["work_per_launch"]),
        })
    return out


def _check_columns(check: dict | None, work: float) -> dict:
    if not check or not check.get("check_time_ns"):
        return {"check_method": (check or {}).get("check_method"), "check_time_ns": None, "check_rate_per_s": None}
    return {**check, "check_rate_per_s": work / (check["check_time_ns"] * 1e-9)}


@dataclass(kw_only=True)
class PeaksResult:
    run: object  # harness.runner.RunResult of the peaks run
    rows: list[dict]
    skipped: dict[str, str] = field(default_factory=dict)  # kernel -> why it could not run here
    written: list[Path] = field(default_factory=list)

    @property
    def roofs(self) -> list[Roof]:
        return roofs_from_peaks(self.rows)


def run_peaks(*, device: str, kernels: Sequence[str] = (), telemetry: str = "auto", protocol=None,
              results_dir: Path = RESULTS_ROOT, run_name: str = "peaks", registry: KernelRegistry | None = None,
              into: Path | Sequence[Path] | None = None, allow_busy: bool = False, observer=None, command: str = "",
              check_warm_s: float = 1.0) -> PeaksResult:
    """Time the peak kernels under the sustained protocol (a run of its own), then each by its second method
    (`_peak_checks`, warmed `check_warm_s`), and store their rates.

    The `peaks` table goes into the peaks run and, with `into` (one run or several), into those runs too, whose
    reports then draw their kernels on these roofs. Kernels that cannot run on this device are skipped and listed.
    """
    reg = registry or peak_registry()
    names = list(kernels) or reg.names()
    chosen = [reg.get(n) for n in names]  # an unknown name raises here, listing the known ones
    targets = [] if into is None else [Path(into)] if isinstance(into, (str, Path)) else [Path(p) for p in into]
    for target in targets:
        if not (target / "runs.parquet").is_file():
            raise ResultsError(f"--into {target} is not a run directory (no runs.parquet); give a run of `bench "
                               f"sustained`.")
    dev = open_device(device)
    skipped = {k.name: r for k in chosen if (r := k.unavailable_reason(dev.kind))}
    runnable = tuple(k.name for k in chosen if k.name not in skipped)
    if not runnable:
        why = "; ".join(f"{k}: {r}" for k, r in skipped.items())
        raise UnsupportedInputError(f"No peak kernel can run on {device}: {why}.")
    config = RunConfig(kernels=runnable, inputs=(peak_input_spec(),), device=device, telemetry=telemetry,
                       protocol=protocol or SustainedProtocol(), results_dir=Path(results_dir), run_name=run_name,
                       allow_busy=allow_busy, gate=False,
                       notes="empirical peaks: the measurement rows' tflops are 0 by design; rates are in peaks/")
    result = run_sustained(config, observer=observer, registry=reg, device=dev, command=command)
    timed = {m["kernel"] for m in result.measurements if m.get("time_ns")}
    checks = {}
    for name in runnable:
        if name in timed:
            if observer is not None:
                observer.on_message(f"{name}: second timing ({reg.get(name).extra['check']})")
            checks[name] = time_check(reg.get(name), dev, peak_input_spec(), warm_s=check_warm_s)
    rows = peak_rows(result.measurements, reg, run_id=result.run_id, device_name=result.info.get("device_name"),
                     checks=checks)
    written = [write_trace_table(result.path, "peaks", rows)]
    for target in targets:
        written.append(write_trace_table(target, "peaks", [{**r, "run_id": target.name} for r in rows]))
    return PeaksResult(run=result, rows=rows, skipped=skipped, written=written)
