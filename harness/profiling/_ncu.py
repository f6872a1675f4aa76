"""Nsight Compute: the command line, its CSV output, and the per-kernel pipe-cycle table.

Every command built here passes `--clock-control none`. ncu's default locks the SM clock to its base
value so that counters repeat; this project measures cards as they are found, so there is no option to
change it. Commands are argument lists, never shell strings: kernel names and paths pass untouched.

>>> cmd = ncu_command(target=["python", "-m", "child"], ncu="ncu")
>>> cmd[1:3]
['--clock-control', 'none']
>>> kernels = parse_ncu_csv('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\\n'
...                         '"0","k","sm__cycles_elapsed.max","cycle","1,000"\\n')
>>> kernels[0].value("sm__cycles_elapsed.max")
1000.0
"""

from __future__ import annotations

import csv
import glob
import io
import re
import shutil
from dataclasses import dataclass, field
from typing import Callable, Sequence

from harness.errors import ConfigError
from harness.profiling._errors import (
    CountersUnavailable,
    NothingProfiled,
    ProfilerError,
    ProfilerMissing,
    TraceFormatError,
)

__all__ = [
    "NCU_METRICS",
    "NcuKernel",
    "PipeCycles",
    "check_ncu_output",
    "find_ncu",
    "ncu_command",
    "parse_ncu_csv",
    "pipe_cycles",
]

TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
FMA = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
ALU = "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"
XU = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
ISSUE = "sm__issue_active.avg.pct_of_peak_sustained_active"
CLOCK = "sm__cycles_elapsed.avg.per_second"
ELAPSED = "sm__cycles_elapsed.max"
ACTIVE = "sm__cycles_active.avg"
DURATION = "gpu__time_duration.sum"

# The ones marked "seen working on the H200" in telemetry-apis.md, plus active cycles (the denominator of
# every pct_of_peak_sustained_active) and DRAM bytes (the roofline's x axis). gh100 has no XU cycles
# metric, so the MUFU pipe is read as its instruction rate against the pipe's peak.
NCU_METRICS = (
    DURATION, CLOCK, ELAPSED, ACTIVE, TENSOR, FMA, ALU, XU, "sm__inst_executed_pipe_xu.sum", ISSUE, "dram__bytes.sum",
)

# ncu prints units it scales ("msecond", "Ghz") unless told `--print-units base`; both are read back to
# one base unit per quantity, so a CSV from either setting gives the same numbers.
_UNITS = {
    "ns": ("ns", 1.0), "nsecond": ("ns", 1.0), "us": ("ns", 1e3), "usecond": ("ns", 1e3), "ms": ("ns", 1e6),
    "msecond": ("ns", 1e6), "s": ("ns", 1e9), "second": ("ns", 1e9),
    "hz": ("hz", 1.0), "khz": ("hz", 1e3), "mhz": ("hz", 1e6), "ghz": ("hz", 1e9),
    "cycle": ("cycle", 1.0), "kcycle": ("cycle", 1e3), "mcycle": ("cycle", 1e6), "gcycle": ("cycle", 1e9),
    "byte": ("byte", 1.0), "kbyte": ("byte", 1e3), "mbyte": ("byte", 1e6), "gbyte": ("byte", 1e9),
    "tbyte": ("byte", 1e12),
}


def find_ncu(ncu: str | None = None, *, which: Callable[[str], str | None] = shutil.which,
             candidates: Sequence[str] = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu")) -> str:
    """The ncu executable: `ncu` as given (a path or a name on PATH), else ncu on PATH, else a standard install."""
    if ncu:
        found = which(ncu)
        if found is None:
            raise ProfilerMissing(
                f"--ncu {ncu!r} is not an executable file or a name on PATH. Pass the path of Nsight Compute's `ncu` "
                f"(e.g. /opt/nvidia/nsight-compute/2025.3.1/ncu), or leave --ncu out to use the one on PATH.")
        return found
    found = which("ncu")
    if found:
        return found
    for pattern in candidates:
        for path in sorted(glob.glob(pattern), reverse=True):  # newest version directory first
            if which(path):
                return path
    raise ProfilerMissing(
        "ncu (Nsight Compute) is not on PATH and not in /opt/nvidia/nsight-compute or /usr/local/cuda/bin. Install "
        "Nsight Compute (it ships with the CUDA toolkit) and put its directory on PATH, or pass --ncu /path/to/ncu. "
        "Nothing was profiled.")


def ncu_command(*, target: Sequence[str], ncu: str = "ncu", metrics: Sequence[str] = NCU_METRICS,
                kernel_regex: str | None = None, launch_skip: int | None = None, launch_count: int | None = None,
                profile_from_start: bool = False) -> list[str]:
    """The ncu argument list that profiles `target` (itself an argument list) with clocks as found.

    `profile_from_start=False` profiles only launches between cudaProfilerStart and cudaProfilerStop, so
    the warm-in before them runs unprofiled. `kernel_regex` becomes ncu's `-k regex:...`.
    """
    if isinstance(target, (str, bytes)) or not target or not all(isinstance(a, str) for a in target):
        raise ConfigError(f"The profiled command must be a non-empty list of strings (one per argument), not {target!r}: "
                          f"commands are never shell strings here.")
    for m in metrics:
        if not m or any(c in m for c in ", \t\n"):
            raise ConfigError(f"ncu metric {m!r} is not a single metric name (no commas or spaces).")
    if kernel_regex is not None:
        _compile(kernel_regex)
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "on" if profile_from_start else "off",
           "--metrics", ",".join(dict.fromkeys(metrics)), "--csv", "--print-units", "base"]
    if kernel_regex is not None:
        cmd += ["-k", f"regex:{kernel_regex}"]
    if launch_skip is not None:
        cmd += ["-s", str(int(launch_skip))]
    if launch_count is not None:
        cmd += ["-c", str(int(launch_count))]
    return cmd + list(target)


def _compile(regex: str) -> re.Pattern:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise ConfigError(f"Kernel name regex {regex!r} is not a valid regular expression: {exc}.") from None


@dataclass(frozen=True, kw_only=True)
class NcuKernel:
    """One profiled launch: its identity and every metric as (value in base units or None, base unit)."""

    launch_id: int
    name: str
    block: str = ""
    grid: str = ""
    device: str = ""
    compute_capability: str = ""
    metrics: dict[str, tuple[float | None, str]] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        return self.metrics.get(metric, (None, ""))[0]


def _number(text: str, unit: str) -> tuple[float | None, str]:
    base, scale = _UNITS.get(unit.strip().lower(), (unit.strip(), 1.0))
    text = text.strip().replace(",", "")
    try:
        return float(text) * scale, base
    except ValueError:  # "n/a" and the like: the metric exists but has no value for this kernel
        return None, base


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernels from ncu's `--csv` stdout (one row per metric). Lines before the header (ncu's ==PROF==
    messages, the program's own output) are skipped; an output with no CSV header gives an empty list."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    # The profiled program may print between rows; CSV rows are the lines that start with a quote.
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"')))))
    head = rows[0]
    need = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
    missing = [c for c in need if c not in head]
    if missing:
        raise TraceFormatError(f"ncu CSV header lacks columns {missing} (header: {head}); run ncu with --csv and "
                               f"without --page options, as ncu_command does.")
    col = {c: head.index(c) for c in head}
    kernels: dict[int, dict] = {}
    for r in rows[1:]:
        if len(r) != len(head):
            continue
        kid = int(r[col["ID"]])
        k = kernels.setdefault(kid, {
            "launch_id": kid, "name": r[col["Kernel Name"]], "metrics": {},
            **{key: r[col[c]] for key, c in (("block", "Block Size"), ("grid", "Grid Size"), ("device", "Device"),
                                             ("compute_capability", "CC")) if c in col},
        })
        k["metrics"][r[col["Metric Name"]]] = _number(r[col["Metric Value"]], r[col["Metric Unit"]])
    return [NcuKernel(**kernels[k]) for k in sorted(kernels)]


_PERMISSION = re.compile(r"ERR_NVGPUCTRPERM")
_LIBRARY = re.compile(r"LibraryNotLoaded")
_NO_KERNELS = re.compile(r"No kernels were profiled")


def check_ncu_output(*, stdout: str, stderr: str = "", returncode: int = 0) -> None:
    """Raise a one-paragraph error when ncu could not profile: counters refused, a sandbox, a bad metric,
    nothing profiled, or a failed program. Returns quietly when the output holds profiled kernels."""
    text = f"{stdout}\n{stderr}"
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    quoted = " | ".join(errors[:3])
    if _PERMISSION.search(text):
        raise CountersUnavailable(
            f"ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver restricts them to "
            f"administrators. Run as root, or have an administrator load the driver with "
            f"NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM). ncu said: {quoted}")
    if _LIBRARY.search(text):
        raise CountersUnavailable(
            f"ncu could not start its profiler (LibraryNotLoaded). That is what it prints in a sandboxed GPU runtime "
            f"such as gVisor, where the counter interface does not reach the driver; run on a machine or runtime "
            f"(e.g. Firecracker, bare metal) where ncu can read counters. ncu said: {quoted}")
    if errors:
        hint = (" A metric this GPU does not have: drop it from --metrics." if any("metric" in e.lower() for e in errors)
                else "")
        raise ProfilerError(f"ncu reported errors (exit status {returncode}): {quoted}.{hint}")
    has_rows = any(ln.startswith('"ID"') for ln in stdout.splitlines())
    if _NO_KERNELS.search(text) or (returncode == 0 and not has_rows):
        raise NothingProfiled(
            "ncu profiled no kernel: no launch ran between cudaProfilerStart and cudaProfilerStop (or the -k filter "
            "matched none). Check that the kernel launches on the GPU ncu watches, and leave out the kernel filter "
            "to see every launch's name.")
    if returncode != 0:
        tail = " | ".join(ln.strip() for ln in text.strip().splitlines()[-4:])
        raise ProfilerError(f"ncu or the profiled program exited with status {returncode}; its last lines: {tail}")


@dataclass(frozen=True, kw_only=True)
class PipeCycles:
    """Per-SM cycles of one launch by pipe, as in the paper's Table IV.

    Busy cycles of a pipe = its % of peak sustained active x active cycles (the % counts against cycles
    with a warp resident, so active, not elapsed, cycles turn it back into cycles). `basis` says which
    was used: "elapsed" when sm__cycles_active.avg was not collected (then busy cycles are over-stated by
    elapsed / active). vector = FMA + ALU + XU busy cycles: the vector work if those pipes never ran at
    the same time. serialized = matrix + vector: the cycles if nothing overlapped. overlap =
    serialized / achieved: 1 means the matrix and vector work ran back to back, 2 fully overlapped.
    """

    launch_id: int
    name: str
    duration_ns: float | None
    sm_clock_mhz: float | None
    achieved_cycles: float | None
    active_cycles: float | None
    basis: str
    tensor_pct: float | None
    fma_pct: float | None
    alu_pct: float | None
    xu_pct: float | None
    issue_pct: float | None
    matrix_cycles: float | None
    fma_cycles: float | None
    alu_cycles: float | None
    xu_cycles: float | None
    vector_cycles: float | None
    serialized_cycles: float | None
    overlap: float | None
    xu_inst: float | None
    dram_bytes: float | None


def pipe_cycles(kernel: NcuKernel) -> PipeCycles:
    """The pipe-cycle row of one profiled launch (missing metrics give None, never a made-up number)."""
    v = kernel.value
    achieved = v(ELAPSED)
    active = v(ACTIVE)
    basis, cycles = ("active", active) if active else ("elapsed", achieved)

    def busy(pct):
        return pct / 100.0 * cycles if pct is not None and cycles else None

    tensor, fma, alu, xu = v(TENSOR), v(FMA), v(ALU), v(XU)
    matrix = busy(tensor)
    parts = [busy(fma), busy(alu), busy(xu)]
    vector = sum(parts) if all(p is not None for p in parts) else None
    serialized = matrix + vector if matrix is not None and vector is not None else None
    clock = v(CLOCK)
    return PipeCycles(
        launch_id=kernel.launch_id, name=kernel.name, duration_ns=v(DURATION),
        sm_clock_mhz=clock / 1e6 if clock else None, achieved_cycles=achieved, active_cycles=active, basis=basis,
        tensor_pct=tensor, fma_pct=fma, alu_pct=alu, xu_pct=xu, issue_pct=v(ISSUE), matrix_cycles=matrix,
        fma_cycles=parts[0], alu_cycles=parts[1], xu_cycles=parts[2], vector_cycles=vector,
        serialized_cycles=serialized, overlap=serialized / achieved if serialized is not None and achieved else None,
        xu_inst=v("sm__inst_executed_pipe_xu.sum"), dram_bytes=v("dram__bytes.sum"),
    )
