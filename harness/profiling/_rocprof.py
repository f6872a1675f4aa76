"""AMD: rocprofv3 command builders and parsers for its kernel trace and advanced thread trace (ATT).

Written against the documented formats (telemetry-apis.md, rocprofiler-sdk sources) and tested on
fixture files built from them: none of this has met an AMD GPU here.

- Kernel trace: `rocprofv3 --kernel-trace -f csv -d DIR -o NAME -- cmd` writes `*_kernel_trace.csv`;
  only `Kernel_Name`, `Start_Timestamp`, `End_Timestamp` (ns) are relied on, other columns are kept.
- ATT: `rocprofv3 --att ... -d DIR -- cmd` writes, per traced dispatch, `stats_<dispatch dir>.csv`
  (one row per instruction: Hitcount, Latency, Stall, Idle in shader-clock cycles) and a directory
  `ui_output_agent_<a>_dispatch_<d>/` with one JSON per wave, `se<e>_sm<s>_sl<l>_wv<n>.json`: top-level
  `name`, `duration`, `num_stitched`, `num_insts` and a `wave` object holding `instructions` entries
  `[time, category, stall, duration, line]` and `timeline` entries `[state, duration]`, in cycles
  (rocprofiler-sdk source/lib/att-tool/wave.cpp).

>>> kernel_trace_command(target=["python", "app.py"], out_dir="out", out_name="kt")[:5]
['rocprofv3', '--kernel-trace', '-f', 'csv', '-d']
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from harness.errors import ConfigError
from harness.profiling._errors import NothingProfiled, TraceFormatError

__all__ = [
    "ATT_CATEGORIES",
    "ATT_WAVE_STATES",
    "AttCycles",
    "AttDispatch",
    "KernelDispatch",
    "att_command",
    "att_stats_cycles",
    "att_wave_cycles",
    "instruction_class",
    "kernel_trace_command",
    "parse_kernel_trace_csv",
    "read_att_dir",
]

# rocprofiler_thread_trace_decoder_inst_category_t and _wstate_type_t, in enum order: the per-wave
# JSON stores the integers (the viewer maps them to these names).
ATT_CATEGORIES = ("NONE", "SMEM", "SALU", "VMEM", "FLAT", "LDS", "VALU", "JUMP", "NEXT", "IMMED", "CONTEXT",
                  "MESSAGE", "BVH")
ATT_WAVE_STATES = ("EMPTY", "IDLE", "EXEC", "WAIT", "STALL")

# The decoder's categories put matrix (MFMA/WMMA) and transcendental instructions under VALU (unverified
# on hardware), so the stats CSV's mnemonics are classed here to split matrix from vector work.
_CLASSES = (
    ("matrix", re.compile(r"^v_(mfma|smfmac|wmma|swmmac)")),
    ("transcendental", re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")),
    ("valu", re.compile(r"^v_")),
    ("wait", re.compile(r"^s_(waitcnt|wait_|barrier|sleep)")),
    ("branch", re.compile(r"^s_(branch|cbranch|setpc|swappc|getpc|endpgm)")),
    ("smem", re.compile(r"^s_(load|buffer_load|store|buffer_store|scratch|dcache)")),
    ("salu", re.compile(r"^s_")),
    ("lds", re.compile(r"^ds_")),
    ("vmem", re.compile(r"^(buffer|global|flat|scratch|tbuffer|image)_")),
)


def _target(target: Sequence[str]) -> list[str]:
    if isinstance(target, (str, bytes)) or not target or not all(isinstance(a, str) for a in target):
        raise ConfigError(f"The traced command must be a non-empty list of strings (one per argument), not {target!r}: "
                          f"commands are never shell strings here.")
    return list(target)


def kernel_trace_command(*, target: Sequence[str], out_dir: str | Path, out_name: str, rocprofv3: str = "rocprofv3",
                         kernel_regex: str | None = None) -> list[str]:
    """rocprofv3's kernel trace as CSV (ROCm 7 writes a SQLite database unless `-f csv` is given)."""
    cmd = [rocprofv3, "--kernel-trace", "-f", "csv", "-d", str(out_dir), "-o", out_name]
    if kernel_regex is not None:
        cmd += ["--kernel-include-regex", kernel_regex]
    return cmd + ["--"] + _target(target)


def att_command(*, target: Sequence[str], out_dir: str | Path, rocprofv3: str = "rocprofv3", target_cu: int = 1,
                simd_select: int = 0xF, shader_engine_mask: int = 0x1, buffer_size: int | None = None,
                kernel_regex: str | None = None, iteration_range: str | None = None, activity: int | None = None,
                perfcounters: str | None = None) -> list[str]:
    """rocprofv3's advanced thread trace. Only one CU per traced shader engine is traced in detail."""
    if not 0 <= target_cu <= 15:
        raise ConfigError(f"--att-target-cu must be 0..15, got {target_cu}.")
    cmd = [rocprofv3, "--att", "--att-target-cu", str(target_cu), "--att-simd-select", hex(simd_select),
           "--att-shader-engine-mask", hex(shader_engine_mask)]
    if buffer_size is not None:
        cmd += ["--att-buffer-size", hex(buffer_size)]
    if activity is not None:
        cmd += ["--att-activity", str(activity)]
    if perfcounters is not None:
        cmd += ["--att-perfcounters", perfcounters]
    if kernel_regex is not None:
        cmd += ["--kernel-include-regex", kernel_regex]
    if iteration_range is not None:
        cmd += ["--kernel-iteration-range", iteration_range]
    return cmd + ["-d", str(out_dir), "--"] + _target(target)


@dataclass(frozen=True, kw_only=True)
class KernelDispatch:
    name: str
    start_ns: int
    end_ns: int
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def parse_kernel_trace_csv(text: str, *, source: str = "kernel trace") -> list[KernelDispatch]:
    """Dispatches of a `*_kernel_trace.csv`, in file order (timestamps: ns, CLOCK_BOOTTIME)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    need = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")
    head = list(rows[0].keys()) if rows else next(csv.reader(io.StringIO(text)), [])
    missing = [c for c in need if c not in head]
    if missing:
        raise TraceFormatError(f"{source} lacks columns {missing} (it has {head}); is it rocprofv3's "
                               f"*_kernel_trace.csv written with -f csv?")
    out = []
    for i, r in enumerate(rows):
        try:
            start, end = int(r["Start_Timestamp"]), int(r["End_Timestamp"])
        except (TypeError, ValueError):
            raise TraceFormatError(f"{source} row {i + 2}: timestamps {r['Start_Timestamp']!r}, "
                                   f"{r['End_Timestamp']!r} are not integers (ns).") from None
        out.append(KernelDispatch(name=r["Kernel_Name"], start_ns=start, end_ns=end,
                                  extra={k: v for k, v in r.items() if k not in need}))
    return out


def instruction_class(mnemonic: str) -> str:
    """matrix, transcendental, valu, wait, branch, smem, salu, lds, vmem or other, from an ISA mnemonic."""
    op = mnemonic.strip().split(" ", 1)[0].lower()
    return next((name for name, rx in _CLASSES if rx.match(op)), "other")


@dataclass(frozen=True, kw_only=True)
class AttCycles:
    """Cycles of one category (or instruction class) summed over a dispatch's traced waves."""

    category: str
    instructions: int
    cycles: int  # stats CSV: Latency (stall + issue); wave JSON: instruction duration
    stall_cycles: int
    idle_cycles: int = 0


def att_stats_cycles(text: str, *, source: str = "stats CSV") -> list[AttCycles]:
    """Per instruction class, from one `stats_*.csv`. Kernel-name rows (`; name`) are skipped."""
    reader = csv.DictReader(io.StringIO(text))
    need = ("Instruction", "Hitcount", "Latency", "Stall", "Idle")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceFormatError(f"{source} lacks columns {missing} (it has {reader.fieldnames}); expected "
                               f"CodeObj,Vaddr,Instruction,Hitcount,Latency,Stall,Idle,Source.")
    acc: dict[str, list[int]] = {}
    for r in reader:
        inst = (r["Instruction"] or "").strip()
        if not inst or inst.startswith(";"):
            continue
        a = acc.setdefault(instruction_class(inst), [0, 0, 0, 0])
        for i, c in enumerate(("Hitcount", "Latency", "Stall", "Idle")):
            a[i] += int(float(r[c] or 0))
    return sorted((AttCycles(category=k, instructions=v[0], cycles=v[1], stall_cycles=v[2], idle_cycles=v[3])
                   for k, v in acc.items()), key=lambda c: -c.cycles)


def _wave_body(doc: object) -> dict | None:
    """The object holding a wave's `instructions` and `timeline`: under "wave" as att-tool's wave.cpp writes
    it; a document with them at the top level (this project's first, hand-made fixtures) is read too."""
    if not isinstance(doc, dict):
        return None
    body = doc.get("wave")
    if isinstance(body, dict) and "instructions" in body:
        return body
    return doc if "instructions" in doc else None


def att_wave_cycles(waves: Sequence[dict]) -> tuple[list[AttCycles], dict[str, int]]:
    """Per decoder category from per-wave JSON documents (as written, `wave` object and all), and the
    wave-state cycle totals."""
    acc: dict[str, list[int]] = {}
    states: dict[str, int] = {}
    for doc in waves:
        w = _wave_body(doc)
        if w is None:
            raise TraceFormatError(f"an ATT wave document has no `wave.instructions` (keys: {sorted(doc)[:8]}); is it "
                                   f"a per-wave se*_sm*_sl*_wv*.json of rocprofv3 --att?")
        for inst in w.get("instructions", []):
            cat = inst[1]
            name = ATT_CATEGORIES[cat] if isinstance(cat, int) and 0 <= cat < len(ATT_CATEGORIES) else str(cat)
            a = acc.setdefault(name, [0, 0, 0])
            a[0] += 1
            a[1] += int(inst[3])
            a[2] += int(inst[2])
        for state, duration in w.get("timeline", []):
            key = ATT_WAVE_STATES[state] if isinstance(state, int) and 0 <= state < len(ATT_WAVE_STATES) else str(state)
            states[key] = states.get(key, 0) + int(duration)
    cats = sorted((AttCycles(category=k, instructions=v[0], cycles=v[1], stall_cycles=v[2]) for k, v in acc.items()),
                  key=lambda c: -c.cycles)
    return cats, states


@dataclass(frozen=True, kw_only=True)
class AttDispatch:
    name: str  # the ui_output directory name (agent and dispatch ids)
    classes: list[AttCycles]  # from the stats CSV, by instruction class
    categories: list[AttCycles]  # from the wave JSON, by decoder category
    wave_states: dict[str, int]
    waves: int


_WAVE_NAME = re.compile(r"^se\d+_sm\d+_sl\d+_wv\d+\.json$")  # wave.cpp's file name


def _wave_docs(folder: Path) -> list[dict]:
    # Per-wave files hold a wave; code.json, filenames.json, snapshots.json and the like do not. A file named
    # like a wave that holds none is a format this parser does not know: an error, never zero waves.
    out = []
    for p in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TraceFormatError(f"ATT file {p} is not JSON ({exc}).") from None
        if _wave_body(doc) is not None:
            out.append(doc)
        elif _WAVE_NAME.match(p.name):
            keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
            raise TraceFormatError(f"ATT wave file {p} holds no `wave` object with `instructions` (it has {keys}): "
                                   f"rocprofv3's per-wave JSON layout has changed; see rocprofiler-sdk att-tool/wave.cpp.")
    return out


def read_att_dir(path: str | Path) -> list[AttDispatch]:
    """Every traced dispatch under an ATT output directory (searched recursively, as rocprofv3 nests it
    under host and process directories)."""
    root = Path(path)
    if not root.is_dir():
        raise NothingProfiled(f"ATT directory {root} does not exist: rocprofv3 --att wrote nothing there. Check -d and "
                              f"that the traced program ran.")
    dirs = sorted(d for d in root.rglob("ui_output_agent_*") if d.is_dir())
    stats = {p.name[len("stats_"):-len(".csv")]: p for p in root.rglob("stats_*.csv")}
    if not dirs and not stats:
        raise NothingProfiled(
            f"ATT directory {root} holds no traced dispatch (no stats_*.csv and no ui_output_agent_*/): rocprofv3 traced "
            f"nothing. Check that --kernel-include-regex matches the kernel, that --kernel-iteration-range includes a "
            f"launch, and that the ROCprof Trace Decoder is installed (--att-library-path or ROCPROF_ATT_LIBRARY_PATH).")
    out = []
    for name in sorted(set(stats) | {d.name for d in dirs}):
        classes = (att_stats_cycles(stats[name].read_text(encoding="utf-8"), source=str(stats[name]))
                   if name in stats else [])
        folder = next((d for d in dirs if d.name == name), None)
        docs = _wave_docs(folder) if folder else []
        cats, states = att_wave_cycles(docs)
        out.append(AttDispatch(name=name, classes=classes, categories=cats, wave_states=states, waves=len(docs)))
    return out
