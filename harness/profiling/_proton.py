"""Triton Proton intra-kernel timelines: record one launch's scopes per warp, draw them like the paper's Fig. 6.

Proton's instrumentation backend records, per warp, the cycle (or global-timer) counter when a scope
(`pl.enter_scope` / `pl.exit_scope` in the kernel source) starts and ends. Its Chrome trace has one
"X" event per scope instance with `pid` "<kernel> Core<sm> CTA<block>[ ...]" and `tid`
"warp <w> (line <l>)"; `ts` and `dur` are the counter divided by 1000. Older Proton wrote cycles
(`args.Unit` "GPU cycle", the pid noting "clock cycle"); newer Proton writes global-timer ns. The parser
reads both and says which it found.

A kernel without scopes gives an empty timeline: the scopes (QK, softmax, PV, waits) must be in its source.

>>> trace = {"traceEvents": [{"ph": "X", "name": "qk", "pid": "k Core0 CTA0", "tid": "warp 0 (line 0)",
...                           "ts": 0.0, "dur": 1.5, "args": {"Unit": "GPU cycle"}}]}
>>> events, unit = parse_proton_trace(trace)
>>> (events[0].scope, events[0].start, events[0].duration, unit)
('qk', 0.0, 1500.0, 'cycle')
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.profiling._errors import NothingProfiled, ProfilerMissing, TraceFormatError

__all__ = [
    "ScopeEvent", "iteration_period", "parse_proton_trace", "record_proton_trace", "scope_summary", "timeline_png",
    "zoom_window",
]

_PID = re.compile(r"Core(\d+)\s+CTA(\d+)")
_TID = re.compile(r"warp\s+(\d+)(?:\s+\(line\s+(\d+)\))?")


@dataclass(frozen=True, kw_only=True)
class ScopeEvent:
    scope: str
    core: int  # the SM the block ran on
    cta: int
    warp: int
    line: int  # Proton's row for overlapping scopes of one warp (nested or asynchronous)
    start: float  # in `unit` (cycles or ns), from the trace's origin
    duration: float


def _load(trace) -> dict:
    if isinstance(trace, (str, Path)) and not (isinstance(trace, str) and trace.lstrip().startswith(("{", "["))):
        path = Path(trace)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TraceFormatError(f"Proton trace {path} cannot be read as JSON ({exc}).") from None
    if isinstance(trace, str):
        return json.loads(trace)
    return trace


def parse_proton_trace(trace) -> tuple[list[ScopeEvent], str]:
    """Scope events of a Proton Chrome trace (a dict, JSON text or a path) and their unit: "cycle" or "ns"."""
    doc = _load(trace)
    raw = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    events, cycles = [], False
    for e in raw:
        if e.get("ph") != "X":
            continue
        pid, tid = _PID.search(str(e.get("pid", ""))), _TID.search(str(e.get("tid", "")))
        if pid is None or tid is None:
            continue  # host-side and kernel-level events share the file; only warp scopes are drawn
        cycles |= "clock cycle" in str(e.get("pid")) or (e.get("args") or {}).get("Unit") == "GPU cycle"
        events.append(ScopeEvent(scope=str(e.get("name", "")), core=int(pid.group(1)), cta=int(pid.group(2)),
                                 warp=int(tid.group(1)), line=int(tid.group(2) or 0),
                                 start=float(e["ts"]) * 1000.0, duration=float(e["dur"]) * 1000.0))
    return events, ("cycle" if cycles else "ns")


def scope_summary(events: list[ScopeEvent]) -> dict[str, dict[str, float]]:
    """Per scope: instances, total and mean duration, and its share of all scope time (what the note quotes)."""
    total = sum(e.duration for e in events) or 1.0
    out: dict[str, dict[str, float]] = {}
    for e in events:
        s = out.setdefault(e.scope, {"count": 0, "total": 0.0})
        s["count"] += 1
        s["total"] += e.duration
    for s in out.values():
        s["mean"] = s["total"] / s["count"]
        s["share"] = s["total"] / total
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["total"]))


def iteration_period(events: list[ScopeEvent]) -> float:
    """Median time from one key block to the next in one warp: the gap between successive starts of the
    scope that opens each block (the first scope name a warp records). 0 when no warp has two blocks."""
    by_row: dict[tuple[int, int, int, int], list[ScopeEvent]] = {}
    for e in events:
        by_row.setdefault((e.core, e.cta, e.warp, e.line), []).append(e)
    gaps = []
    for row in by_row.values():
        row.sort(key=lambda e: e.start)
        first = row[0].scope
        starts = [e.start for e in row if e.scope == first]
        gaps += [b - a for a, b in zip(starts, starts[1:])]
    gaps.sort()
    return gaps[len(gaps) // 2] if gaps else 0.0


def zoom_window(events: list[ScopeEvent], *, blocks: int = 4) -> tuple[float, float]:
    """A window of about `blocks` key-block iterations in the middle of the longest-recorded CTA on these
    events' SM: the view of the paper's Fig. 6, where single scopes are wide enough to see."""
    spans: dict[int, list[float]] = {}
    for e in events:
        lo_hi = spans.setdefault(e.cta, [e.start, e.start + e.duration])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], e.start), max(lo_hi[1], e.start + e.duration)
    lo, hi = max(spans.values(), key=lambda v: v[1] - v[0])
    width = blocks * iteration_period(events) or (hi - lo)
    mid = (lo + hi) / 2
    return max(lo, mid - width / 2), min(hi, mid + width / 2)


def timeline_png(trace, *, max_rows: int = 32, core: int | None = None, title: str = "", dpi: int = 80,
                 zoom_blocks: int = 4) -> bytes:
    """A per-warp timeline of one SM as PNG bytes: every recorded scope (one row per CTA x warp, one
    colour per scope), and below it a zoom into about `zoom_blocks` key blocks of one CTA, where each
    scope is wide enough to read (the paper's Fig. 6). 0 leaves the zoom out.

    Pure: the trace in, the picture out. `core` picks the SM (default: the one with the most events);
    rows beyond `max_rows` are left out and the title says so. Proton's buffer is circular, so each
    warp shows its last scopes only.
    """
    events, unit = parse_proton_trace(trace)
    if not events:
        raise NothingProfiled(
            "The Proton trace holds no warp scope events. The kernel records none: add pl.enter_scope / "
            "pl.exit_scope (triton.profiler.language) around QK, softmax and PV in its source, and enable "
            "Triton-DSL instrumentation (pl.enable_semantic('triton')) before it compiles.")
    counts: dict[int, int] = {}
    for e in events:
        counts[e.core] = counts.get(e.core, 0) + 1
    core = max(counts, key=counts.get) if core is None else core
    mine = [e for e in events if e.core == core]
    if not mine:
        raise NothingProfiled(f"No scope events on SM {core}; the trace has SMs {sorted(counts)}.")
    t0 = min(e.start for e in mine)
    scopes = list(dict.fromkeys(e.scope for e in sorted(mine, key=lambda e: e.start)))

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    color = {s: cmap(i % 10) for i, s in enumerate(scopes)}
    panels = [(mine, None)]
    if zoom_blocks:
        lo, hi = zoom_window(mine, blocks=zoom_blocks)
        panels.append(([e for e in mine if e.start < hi and e.start + e.duration > lo], (lo, hi)))
    heights = [0.3 * min(len({(e.cta, e.warp, e.line) for e in evs}), max_rows) + 0.8 for evs, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 1.2), dpi=dpi, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    axis_unit = "cycles" if unit == "cycle" else "ns"
    for ax, (evs, window) in zip(axes[:, 0], panels):
        rows = sorted({(e.cta, e.warp, e.line) for e in evs})
        shown = rows[:max_rows]
        index = {r: i for i, r in enumerate(shown)}
        for e in evs:
            r = (e.cta, e.warp, e.line)
            if r in index:
                ax.broken_barh([(e.start - t0, e.duration)], (index[r] - 0.4, 0.8), color=color[e.scope], linewidth=0)
        ax.set_yticks(range(len(shown)), [f"CTA {c} w{w}" + (f".{ln}" if ln else "") for c, w, ln in shown],
                      fontsize=8)
        ax.invert_yaxis()
        left = len(rows) - len(shown)
        more = f", {left} rows not shown" if left else ""
        if window is None:
            ax.set_title((title or "Proton intra-kernel timeline") + f" (SM {core}: every recorded scope{more})",
                         fontsize=10)
        else:
            ax.set_xlim(window[0] - t0, window[1] - t0)
            ax.set_title(f"zoom: about {zoom_blocks} key blocks ({window[1] - window[0]:,.0f} {axis_unit}){more}",
                         fontsize=10)
        ax.set_xlabel(f"{axis_unit} since the first scope on this SM", fontsize=9)
    axes[0, 0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=color[s]) for s in scopes], labels=scopes,
                      loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def record_proton_trace(launch: Callable[[], object], *, out: Path, warm_s: float = 2.0, granularity: str = "warp",
                        buffer_size: int = 0, synchronize: Callable[[], None] | None = None, profiler=None,
                        clock: Callable[[], float] = time.monotonic) -> Path:
    """Run `launch` (a Triton kernel whose source has Proton scopes) once under instrumentation after a warm-in,
    and return the Chrome trace written at `out` (suffix `.chrome_trace`).

    Three steps, so the recorded launch is warm and runs at the clock of back-to-back work: a throwaway
    session compiles the instrumented kernel (instrumentation is part of Triton's compile key, so it is
    a separate binary); `warm_s` of back-to-back uninstrumented launches; then one recorded launch.
    Proton's shared-memory buffer is circular: a long loop keeps its last scopes only (`buffer_size`).
    """
    if profiler is None:
        try:
            import triton.profiler as profiler
            import triton.profiler.language as pl
        except ImportError as exc:
            raise ProfilerMissing(f"Proton (triton.profiler) cannot be imported ({exc}); install triton >= 3.4.") from None
        if hasattr(pl, "enable_semantic"):
            # Triton >= 3.7 records scopes only in Gluon kernels unless the Triton DSL is enabled.
            pl.enable_semantic("triton")
    if synchronize is None:
        import torch

        synchronize = torch.cuda.synchronize
    # Warp granularity is the default; spelling it out ("default:granularity=warp") makes Triton 3.6/3.7
    # fail at kernel exit with "Only warp granularity is supported" (the string option arrives unparsed).
    mode = "default" + (f":granularity={granularity}" if granularity != "warp" else "")
    mode += f":buffer_size={buffer_size}" if buffer_size else ""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stem = out.with_suffix("") if out.suffix == ".chrome_trace" else out
    with tempfile.TemporaryDirectory() as tmp:
        profiler.start(str(Path(tmp) / "compile"), data="trace", backend="instrumentation", mode=mode)
        launch()
        synchronize()
        profiler.finalize()
    end = clock() + warm_s
    while clock() < end:
        for _ in range(10):
            launch()
        synchronize()
    profiler.start(str(stem), data="trace", backend="instrumentation", mode=mode)
    launch()
    synchronize()
    profiler.finalize()
    written = sorted(stem.parent.glob(stem.name + "*"))
    trace = next((p for p in written if p.suffix in (".chrome_trace", ".json")), None)
    if trace is None:
        raise NothingProfiled(f"Proton wrote no Chrome trace next to {stem} (found: {[p.name for p in written]}).")
    return trace
