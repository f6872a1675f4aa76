"""The sweep section of a report: time, GB/s and TFLOP/s against the swept shape variable. A sweep run's report
opens with it (`build_report`): the sweep is what such a run is for.

A run whose timed rows differ in a shape column (batch, heads, S_q, S_kv, head dims, window, page size, varlen:
a sweep, `bench sustained --seq-len-kv 1024,4096,...`) gets one table row per kernel x input source x sweep
point and one figure of three panels against the variable with the most values (the others, and each kernel
and source, make the series). Each point shows its repeats' spread (min, max and range = (max - min) / median;
the time panel draws min-max bars), times in plain microseconds. GB/s is the run's own `bytes_per_launch` (the
least traffic of the workload, see `AttentionShape.bytes_moved`) over the median time; TFLOP/s its FLOPs over it.
Where the run holds empirical peaks (`bench peaks --into RUN`), each row is also put as a share of the measured
read roof (the read stream; a copy in runs measured before it existed) and of the bf16 GEMM rate. Runs written
before schema v5 have no bytes: their GB/s is "-".
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import median

from harness.profiling import read_roof, read_trace_table, roofs_from_peaks
from harness.report._blocks import Figure, ReportTable, Section
from harness.report._pyplot import fixed_layout, png, pyplot
from harness.report._tables import fmt

__all__ = ["SWEEP_COLUMNS", "sweep_points", "sweep_section"]

# Shape columns a sweep may vary, with the short name of each in tables and axes.
SWEEP_COLUMNS = (("batch", "B"), ("heads_q", "Hq"), ("heads_kv", "Hkv"), ("seq_len", "S_q"), ("seq_len_kv", "S_kv"),
                 ("head_dim_qk", "dqk"), ("head_dim_v", "dv"), ("window", "window"), ("page_size", "page"),
                 ("varlen", "varlen"))
_TIMED = ("ok", "unsettled")


def sweep_points(rows) -> tuple[list[str], list[dict]]:
    """(the swept columns, one dict per kernel x source x point: its columns, repeats, median time, GB/s,
    TFLOP/s), from measurement rows (dicts); no swept column: ([], [])."""
    timed = [r for r in rows if r.get("status") in _TIMED and r.get("time_ns")]
    swept = [c for c, _ in SWEEP_COLUMNS if len({r.get(c) for r in timed}) > 1]
    if not swept:
        return [], []
    groups: dict[tuple, list[dict]] = {}
    for r in timed:
        key = (r["kernel"], r.get("input_source"), *(r.get(c) for c, _ in SWEEP_COLUMNS))
        groups.setdefault(key, []).append(r)
    out = []
    for (kernel, source, *_), rs in groups.items():
        times = [r["time_ns"] for r in rs]
        t = median(times)
        nbytes, flops = rs[0].get("bytes_per_launch"), rs[0].get("flops_per_launch")
        out.append({"kernel": kernel, "input_source": source, **{c: rs[0].get(c) for c, _ in SWEEP_COLUMNS},
                    "repeats": len(rs), "time_ns": t, "time_min_ns": min(times), "time_max_ns": max(times),
                    "time_range_frac": (max(times) - min(times)) / t if t else None,
                    "gb_per_s": nbytes / t if nbytes else None,
                    "tflop_per_s": flops / t * 1e-3 if flops else None, "bytes_per_launch": nbytes})
    return swept, out


def plain_us(ns) -> str:
    """Microseconds as a plain number of four significant digits, never an exponent: 38640, 469.7, 5.312.

    >>> plain_us(3.8640e7), plain_us(469_712.0), plain_us(5312.4), plain_us(None)
    ('38640', '469.7', '5.312', '-')
    """
    if ns is None:
        return "-"
    us = ns / 1e3
    digits = max(0, 3 - math.floor(math.log10(abs(us)))) if us else 0
    return f"{us:.{digits}f}"


def _x_column(swept: list[str], points: list[dict]) -> str:
    """The variable drawn along x: the one with the most values (the later in SWEEP_COLUMNS on a tie)."""
    return max(reversed(swept), key=lambda c: len({p[c] for p in points}))


def _roofs(run) -> tuple:
    """(the read roof, a `Roof` in bytes/s, bf16 GEMM FLOP/s) from the run's stored peaks, None where it has none."""
    if not (Path(run.path) / "peaks").is_dir():
        return None, None
    roofs = roofs_from_peaks(read_trace_table(run.path, "peaks"))  # a damaged table is an error, not a silent "-"
    gemm = max((r.value for r in roofs if r.kind == "compute" and "bf16" in r.label), default=None)
    return read_roof(roofs), gemm


def _label(value) -> str:
    return "none" if value is None else str(value)


def sweep_table(swept: list[str], points: list[dict], *, read_roof=None, gemm_roof=None) -> ReportTable:
    short = dict(SWEEP_COLUMNS)
    memory = read_roof.value if read_roof is not None else None
    label = read_roof.label if read_roof is not None else "read"
    roofs = [(f"% of {label}", memory, "gb_per_s", 1e9), ("% of bf16 GEMM", gemm_roof, "tflop_per_s", 1e12)]
    roofs = [r for r in roofs if r[1]]
    rows = tuple((
        p["kernel"], p["input_source"] or "-", *(_label(p[c]) for c in swept), str(p["repeats"]),
        plain_us(p["time_ns"]), plain_us(p.get("time_min_ns")), plain_us(p.get("time_max_ns")),
        fmt(p.get("time_range_frac"), ".2f", scale=100, suffix=" %"),
        fmt(p["gb_per_s"], ".4g"), fmt(p["tflop_per_s"], ".4g"),
        *(fmt(p[key] * unit / roof if p[key] is not None else None, ".1%") for _, roof, key, unit in roofs),
    ) for p in points)
    roof_text = ""
    if roofs:
        roof_text = "; % of the run's empirical peaks"
        if read_roof is not None:
            clock = f" at {read_roof.clock_mhz:.0f} MHz" if read_roof.clock_mhz else ""
            roof_text += f" ({read_roof.label}: {read_roof.value / 1e9:.0f} GB/s{clock})"
    return ReportTable(
        title="Sweep", left=2 + len(swept),
        columns=("kernel", "input", *(short[c] for c in swept), "repeats", "median us", "min us", "max us", "range",
                 "GB/s", "TFLOP/s", *(name for name, *_ in roofs)),
        rows=rows,
        caption=("median over repeats, with the fastest and slowest repeat and range = (max - min) / median; GB/s = "
                 "the workload's least traffic (q, the visible K/V once per KV head, the output, the page table and "
                 "lengths) / time; TFLOP/s = its FLOPs (visible query-key pairs, a causal query's own key counted "
                 "half) / time" + roof_text))


def sweep_figure(swept: list[str], points: list[dict]) -> Figure | None:
    x = _x_column(swept, points)
    short = dict(SWEEP_COLUMNS)
    others = [c for c in swept if c != x]
    numeric = all(isinstance(p[x], (int, float)) and not isinstance(p[x], bool) for p in points)
    categories = sorted({_label(p[x]) for p in points}) if not numeric else None
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), squeeze=False)
    fixed_layout(fig, rows=1, cols=3, left=0.8, right=0.2, top=0.45, bottom=1.25, wgap=0.75, hgap=0.4)
    series: dict[tuple, list[dict]] = {}
    for p in points:
        series.setdefault((p["kernel"], p["input_source"], *(p[c] for c in others)), []).append(p)
    markers = "osD^vP*X"
    for i, (key, ps) in enumerate(series.items()):
        ps = sorted(ps, key=lambda p: p[x] if numeric else categories.index(_label(p[x])))
        xs = [p[x] if numeric else categories.index(_label(p[x])) for p in ps]
        label = " / ".join([key[0], key[1] or "-", *(f"{short[c]} {_label(v)}" for c, v in zip(others, key[2:]))])
        for ax, field, scale in zip(axes[0], ("time_ns", "gb_per_s", "tflop_per_s"), (1e-3, 1, 1)):
            ys = [p[field] * scale if p[field] is not None else float("nan") for p in ps]
            line, = ax.plot(xs, ys, marker=markers[i % len(markers)], label=label if field == "time_ns" else None)
            if field == "time_ns":  # each point's spread over its repeats: min to max
                lo = [(p["time_ns"] - p.get("time_min_ns", p["time_ns"])) * scale for p in ps]
                hi = [(p.get("time_max_ns", p["time_ns"]) - p["time_ns"]) * scale for p in ps]
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor=line.get_color(), capsize=3, lw=1)
    for ax, title in zip(axes[0], ("time per launch (us, median; bars: min-max)", "GB/s (least traffic / time)",
                                   "TFLOP/s")):
        ax.set_title(title)
        ax.set_xlabel(short[x])
        if numeric:
            values = sorted({p[x] for p in points})
            if values[-1] >= 4 * max(1, values[0]):
                ax.set_xscale("log", base=2)
            ax.set_xticks(values, [str(v) for v in values], rotation=30 if len(values) > 6 else 0)
            ax.minorticks_off()
        if not numeric:
            ax.set_xticks(range(len(categories)), categories, rotation=20)
    axes[0][0].set_yscale("log")
    fig.legend(loc="lower center", ncol=min(3, len(series)), fontsize=9, frameon=False)
    return Figure(key="sweep", title=f"Sweep over {short[x]}",
                  caption=("one line per kernel x input" + (f" x {', '.join(short[c] for c in others)}" if others else "")
                           + f"; x: {short[x]}; medians over repeats"), png=png(fig))


def sweep_section(run, *, figures: bool = True) -> Section | None:
    """The section of a run whose timed rows differ in a shape column, else None."""
    rows = run.measurements.to_dicts() if hasattr(run.measurements, "to_dicts") else list(run.measurements)
    swept, points = sweep_points(rows)
    if not swept:
        return None
    read_roof, gemm_roof = _roofs(run)
    figs = (sweep_figure(swept, points),) if figures else ()
    return Section(title="Sweep", text=(f"The run sweeps {', '.join(dict(SWEEP_COLUMNS)[c] for c in swept)}: "
                                        f"time (with its spread over repeats), bandwidth and throughput of each point."),
                   tables=(sweep_table(swept, points, read_roof=read_roof, gemm_roof=gemm_roof),),
                   figures=tuple(f for f in figs if f is not None))
