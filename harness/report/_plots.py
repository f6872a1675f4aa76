"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes (embedded in the HTML).

Conventions every figure keeps: one colour per kernel (per repeat in the timeline), input A of a
comparison (the control / reference) drawn open and input B (captured) filled, and each axis names
its unit and which clock it is.
"""

from __future__ import annotations

import json

from harness.analysis import SUSTAINED_STATUSES, geomean
from harness.report._blocks import Figure
from harness.report._pyplot import fixed_layout, png, pyplot

__all__ = ["report_figures", "timeline_figure", "cycles_figure", "inputs_figure", "energy_figure", "burst_figure"]

_MARKERS = "osD^vP*X"


def _kernel_colors(summary) -> dict:
    plt = pyplot()
    kernels = list(dict.fromkeys(a["kernel"] for a in summary.sustained + summary.burst))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {k: cycle[i % len(cycle)] for i, k in enumerate(kernels)}


def _input_style(summary) -> tuple[dict, set]:
    labels = list(dict.fromkeys(a["input_label"] for a in summary.sustained if a.get("repeats")))
    return {x: _MARKERS[i % len(_MARKERS)] for i, x in enumerate(labels)}, summary.reference_inputs


def timeline_figure(run, summary) -> Figure | None:
    """Time per launch (chunks), SM clock (NVML poll and in-band probe) and board power, per measurement."""
    import polars as pl

    timed = [a for a in summary.sustained if a.get("repeats")]
    if not timed or run.chunks.height == 0:
        return None
    plt = pyplot()
    m = run.measurements.filter(pl.col("status").is_in(list(SUSTAINED_STATUSES)))
    samples = run.samples.filter((pl.col("source") == "poll") & pl.col("error").is_null()).select(
        "measurement_id", "t_ns", "sm_clock_mhz", "power_w").partition_by("measurement_id", as_dict=True)
    chunks = run.chunks.partition_by("measurement_id", as_dict=True)
    probes = run.probes.partition_by("measurement_id", as_dict=True)
    # Only panels with something to draw: a CPU run's host telemetry reads neither an SM clock nor board power,
    # and an empty axis per kernel x input says nothing; the caption names what was left out and why.
    timed_ids = set(m["measurement_id"].to_list())
    have_clock = any(s["sm_clock_mhz"].drop_nulls().len() for (mid,), s in samples.items() if mid in timed_ids) or any(
        p.height for (mid,), p in probes.items() if mid in timed_ids)
    have_power = any(s["power_w"].drop_nulls().len() for (mid,), s in samples.items() if mid in timed_ids)
    omitted = [name for name, have in (("SM clock", have_clock), ("board power", have_power)) if not have]
    ncols = 1 + have_clock + have_power
    fig, grid = plt.subplots(len(timed), ncols, figsize=(13 if ncols == 3 else 4.6 * ncols + 2, 2.4 * len(timed) + 0.9),
                             sharex=True, squeeze=False)
    # The rows keep three slots (time, clock, power); an omitted panel's slot is a detached axis never shown.
    axes = [[row[0], row[1] if have_clock else _Nowhere(), row[-1] if have_power else _Nowhere()] for row in grid]
    chunk_s = _protocol(run).get("chunk_s")
    repeat_colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    x_lo, x_hi = 0.0, 1.0
    for row, agg in enumerate(timed):
        ax_t, ax_c, ax_p = axes[row]
        mine = m.filter((pl.col("kernel") == agg["kernel"]) & (pl.col("input_label") == agg["input_label"])
                        & (pl.col("config_index") == agg["config_index"])).sort("repeat").to_dicts()
        idle_lo = 0.0
        for meas in mine:
            mid, color = meas["measurement_id"], repeat_colors[meas["repeat"] % len(repeat_colors)]
            ch = chunks.get((mid,))
            if ch is None or ch.height == 0:
                continue
            t0 = ch["t_start_ns"].min()  # the first timed chunk: warm-in starts here
            w0 = (meas["window_start_ns"] - t0) * 1e-9
            x_hi = max(x_hi, (ch["t_end_ns"].max() - t0) * 1e-9)
            for phase, alpha in (("warmin", 0.45), ("window", 1.0)):
                c = ch.filter(pl.col("phase") == phase)
                ax_t.plot((c["t_end_ns"] - t0) * 1e-9, c["time_ns"] * 1e-6, ".-", color=color, alpha=alpha, ms=3, lw=1)
            s = samples.get((mid,))
            if s is not None and s.height:
                x = (s["t_ns"] - t0) * 1e-9
                idle_lo = min(idle_lo, float(x.min()))
                ax_c.plot(x, s["sm_clock_mhz"], color=color, lw=0.8, alpha=0.8, drawstyle="steps-post")
                # 10 ms instant power swings by +-50 W at the cap; a 100 ms mean shows the level the cap holds.
                ax_p.plot(x, s["power_w"].rolling_mean(10, min_samples=1), color=color, lw=0.8, alpha=0.85)
            p = probes.get((mid,))
            if p is not None and p.height:
                ax_c.plot((p["t_ns"] - t0) * 1e-9, p["clock_mhz"], "o", color=color, ms=2.5, mfc="none")
            for ax in (ax_t, ax_c, ax_p):
                ax.axvline(w0, color=color, ls="--", lw=0.8)
        for ax in (ax_t, ax_c, ax_p):
            ax.axvspan(idle_lo, 0, color="0.88", zorder=0)
        x_lo = min(x_lo, idle_lo)
        ax_t.set_title(f"{agg['kernel']} on {agg['input_label']}", loc="left", fontweight="bold")
        ax_t.set_ylabel(f"ms / launch\n({chunk_s:g} s chunks)" if chunk_s else "ms / launch\n(per chunk)")
        ax_c.set_ylabel("SM clock (MHz)")
        ax_p.set_ylabel("board power (W)\n100 ms mean")
    axes[0][0].set_xlim(x_lo - 0.2, x_hi + 0.2)
    for ax in grid[-1]:
        ax.set_xlabel("s since warm-in start (first timed launch)")
    handles = [plt.Line2D([], [], color=repeat_colors[i], label=f"repeat {i + 1}") for i in range(
        max(a["repeats"] for a in timed))]
    handles += [plt.Line2D([], [], color="k", lw=0.8, label="NVML clock"),
                plt.Line2D([], [], color="k", ls="", marker="o", mfc="none", ms=3, label="in-band clock (probe)")
                ] if have_clock else []
    handles += [plt.Rectangle((0, 0), 1, 1, color="0.88", label="idle (before each repeat)"),
                plt.Line2D([], [], color="k", alpha=0.45, marker=".", label="warm-in"),
                plt.Line2D([], [], color="k", ls="--", lw=0.8, label="settled: timed window starts")]
    # As many legend columns as the figure's width holds (one panel wide on a CPU run): never cut at its edges.
    per_row = max(2, min((len(handles) + 1) // 2, int(fig.get_figwidth() / 2.3)))
    rows_needed = -(-len(handles) // per_row)
    fig.legend(handles=handles, loc="upper center", ncol=per_row, bbox_to_anchor=(0.5, 1.0), frameon=False)
    fixed_layout(fig, rows=len(timed), cols=ncols, left=1.0, right=0.15, top=0.5 + 0.25 * rows_needed, bottom=0.55,
                  wgap=1.05, hgap=0.45)
    missing = (f" Not drawn: {' and '.join(omitted)}, which the run's telemetry ({run.info.get('telemetry_backend') or 'none'}) "
               f"did not read{' (a CPU has no SM clock or board power reading)' if run.info.get('device_kind') == 'cpu' else ''}."
               if omitted else "")
    return Figure(key="timeline", title="Clock, power and time per launch through idle, warm-in and window",
                  caption=("grey: idle before the kernel; faint points: warm-in; dashed line: the clock settled and "
                           "the timed window starts; in-band dots: cycles the SMs counted per ns during the window "
                           "(a probe on a side stream; the runner probes only during the window, so the in-band dots start at "
                           "the dashed line). Each repeat is a separate idle / warm-in / window." + missing),
                  png=png(fig))


class _Nowhere:
    """An omitted panel: every drawing call on it does nothing (the timeline draws per slot, not per panel)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _protocol(run) -> dict:
    try:
        return json.loads(run.info.get("protocol_json") or "{}") or {}
    except ValueError:
        return {}


def cycles_figure(run, summary) -> Figure | None:
    """Cycles per launch against the clock, with lines of equal time (cycles = time x clock).

    Points are geometric means over repeats, as in the decomposition tables, so each point lies exactly
    on its own equal-time line and the ratios between points are the tables' ratios.
    """
    import numpy as np
    import polars as pl

    def clock_of(r):
        return r.get("inband_clock_mhz") if r.get("cycles_clock") == "inband" else r.get("sm_clock_mhz")

    reps = [r for r in run.measurements.filter(pl.col("status").is_in(list(SUSTAINED_STATUSES))).to_dicts()
            if r.get("time_ns") and clock_of(r)]
    groups: dict[tuple, list] = {}
    for r in reps:
        groups.setdefault((r["kernel"], r["input_label"]), []).append(r)
    if not groups:
        return None
    plt = pyplot()
    colors, (markers, ref) = _kernel_colors(summary), _input_style(summary)
    kernels = list(dict.fromkeys(k for k, _ in groups))
    points = {key: (geomean([r["time_ns"] for r in rs]) * 1e-6, geomean([clock_of(r) for r in rs]))
              for key, rs in groups.items()}
    # Zoom panels only where a kernel has two repeats somewhere: a one-dot zoom shows nothing the overview lacks.
    zoom = [k for k in kernels if any(len(rs) >= 2 for (kk, _), rs in groups.items() if kk == k)]
    cols = 3
    zrows = (len(zoom) + cols - 1) // cols
    fig = plt.figure(figsize=(13, 4.6 + 3.6 * zrows))
    gs = fig.add_gridspec(1 + zrows, cols, height_ratios=[1.25] + [1] * zrows)
    overview = fig.add_subplot(gs[0, :2])
    legend_ax = fig.add_subplot(gs[0, 2])
    legend_ax.axis("off")
    panels = [(overview, None)] + [(fig.add_subplot(gs[1 + i // cols, i % cols]), k) for i, k in enumerate(zoom)]
    basis = "in-band" if reps[0].get("cycles_clock") == "inband" else "NVML"
    for ax, only in panels:
        keys = [k for k in groups if only is None or k[0] == only]
        xs = np.array([clock_of(r) for k in keys for r in groups[k]])
        pad = max(xs.max() - xs.min(), 0.02 * xs.mean())
        lo, hi = xs.min() - 0.3 * pad, xs.max() + 0.3 * pad
        grid = np.linspace(lo, hi, 20)
        for kernel, label in keys:
            (t_ms, clock), color = points[(kernel, label)], colors[kernel]
            filled, mk = label not in ref, markers.get(label, "o")
            ax.plot(grid, t_ms * grid * 1e-3, ls=":", lw=0.9, color=color)
            mine = groups[(kernel, label)]
            ax.plot([clock_of(r) for r in mine], [r["time_ns"] * clock_of(r) * 1e-9 for r in mine], mk, color=color,
                    ms=4, alpha=0.5, mfc=color if filled else "none")
            ax.plot(clock, t_ms * clock * 1e-3, mk, ms=9, mew=1.5, color=color, mfc=color if filled else "white",
                    label=f"{label}: {t_ms:.4f} ms" if only is not None else None)
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))  # clocks are 4 digits: five ticks never touch
        ax.set_xlabel(f"{basis} SM clock (MHz)")
        ax.set_ylabel("Mcycles per launch")
        ax.set_title("all kernels" if only is None else f"{only} (zoom)", loc="left")
        if only is not None:
            ax.legend(loc="best", fontsize=9)
    handles = [plt.Line2D([], [], ls="", marker="o", color=c, label=k) for k, c in colors.items() if k in kernels]
    handles += [plt.Line2D([], [], ls="", marker=mk, color="k", mfc="white" if x in ref else "k",
                           label=x + (" (A: ref)" if x in ref else "")) for x, mk in markers.items()]
    handles += [plt.Line2D([], [], ls="", marker="o", ms=4, color="k", alpha=0.5, label="one repeat (small)"),
                plt.Line2D([], [], ls=":", color="k", label="equal time")]
    legend_ax.legend(handles=handles, loc="upper left", fontsize=10, frameon=False)  # beside the data, never on it
    fig.subplots_adjust(left=0.07, right=0.98, top=1 - 0.45 / fig.get_figheight(), bottom=0.7 / fig.get_figheight(),
                        wspace=0.3, hspace=0.55 * (1 + zrows) / (1 + zrows * 0.9))
    return Figure(key="cycles", title="Cycles per launch vs clock",
                  caption=("big markers: geometric mean over repeats of one kernel on one input, as in the "
                           "decomposition table (small: each repeat). Dotted lines: equal time through each big "
                           "marker (cycles = time x clock): moving along one trades clock for cycles at the same "
                           "time; moving across them changes time. Open markers: the reference / control input (A); "
                           "filled: the other input (B, e.g. captured). Zoom panels: kernels with two or more "
                           "repeats on an input."),
                  png=png(fig))


def _bars(ax, groups, *, colors, ref, labels_fmt, delta_from=None):
    """Grouped bars: `groups` = [(kernel, [(input, value), ...])]; A inputs hatched, B filled; the input is
    written up each bar, the kernel under each group. With `delta_from` (group index -> input), the other
    bars of a group say their change from that input's bar."""
    x = 0.0
    ticks = []
    top = max((v for _, items in groups for _, v in items if v is not None), default=1.0)
    # Value labels sit above their bars; past six bars in a panel they would run into each other: turn them.
    crowded = sum(v is not None for _, items in groups for _, v in items) > 6
    for gi, (kernel, items) in enumerate(groups):
        start = x
        base_label = delta_from.get(gi) if delta_from else None
        base = dict(items).get(base_label)
        for label, v in items:
            if v is not None:
                filled = label not in ref
                ax.bar(x, v, width=0.8, color=colors[kernel] if filled else "white", edgecolor=colors[kernel], lw=1.5,
                       hatch=None if filled else "//")
                txt = labels_fmt(v)
                if base and label != base_label:
                    txt += f"\n{(v / base - 1) * 100:+.2f} %"
                ax.annotate(txt.replace("\n", "  ") if crowded else txt, (x, v), ha="center", va="bottom",
                            fontsize=8 if crowded else 9, rotation=90 if crowded else 0)
                ax.text(x, 0.03 * top, label, rotation=90, ha="center", va="bottom", fontsize=9,
                        color="white" if filled else "black",
                        bbox=None if filled else {"facecolor": "white", "edgecolor": "none", "pad": 1})
            x += 1
        ticks.append(((start + x - 1) / 2, kernel))
        x += 0.6
    # Kernel names are long (triton-fp8-exact) and groups can be one bar wide: tilt them so they never overlap.
    # per_gpu_view names (`kernel @ 00:06.0`) go on two lines, so a tilted label never runs off the figure's edge.
    ax.set_xticks([t for t, _ in ticks], [k.replace(" @ ", "\n@ ") for _, k in ticks], rotation=20, ha="right")
    ax.grid(False, axis="x")
    ax.margins(y=0.45 if crowded else 0.18)


def _grouped(summary, key):
    """[(kernel, [(input, value), ...])] over timed aggregates; `key` is a field name or a function."""
    get = key if callable(key) else (lambda a: a.get(key))
    out: dict[str, list] = {}
    for a in summary.sustained:
        if a.get("repeats"):
            out.setdefault(a["kernel"], []).append((a["input_label"], get(a)))
    return list(out.items())


def inputs_figure(summary) -> Figure | None:
    """Time, SCLK and power of input B next to input A for each kernel, and the decomposition of B/A."""
    rows = summary.inputs.rows
    if not rows:
        return None
    plt = pyplot()
    colors, ref = _kernel_colors(summary), summary.reference_inputs
    inband = rows[0].clock_source == "inband"
    # Geometric means from the comparison rows, so each % here is the table's ratio, not a ratio of medians.
    delta_from = {i: r.input_a for i, r in enumerate(rows)}
    panels = ((lambda r, s: getattr(r, f"time_{s}_ns") * 1e-6, "time per launch (ms)", "{:.4f}"),
              (lambda r, s: getattr(r, f"clock_{s}_mhz"), f"SM clock, {'in-band' if inband else 'NVML'} (MHz)",
               "{:.0f}"),
              (lambda r, s: getattr(r, f"power_{s}_w"), "board power (W)", "{:.0f}"))
    # A panel no row has a value for (clock and power on a CPU) is left out, and the caption says so.
    shown = [p for p in panels if any(p[0](r, side) is not None for r in rows for side in "ab")]
    omitted = [p[1].split(",")[0].split(" (")[0] for p in panels if p not in shown]
    fig, axes = plt.subplots(1, len(shown) + 1, figsize=(4 * (len(shown) + 1), 4.6))
    for ax, (get, unit, f) in zip(axes, shown):
        groups = [(r.kernel, [(r.input_a, get(r, "a")), (r.input_b, get(r, "b"))]) for r in rows]
        _bars(ax, groups, colors=colors, ref=ref, labels_fmt=f.format, delta_from=delta_from)
        ax.set_title(unit)
    ax = axes[-1]
    pos, names = [], []
    same_pair = len({(r.input_a, r.input_b) for r in rows}) == 1
    # Without a clock on either side (a CPU run) there is no split to draw: time alone, and the caption says so.
    split = any(r.clock is not None for r in rows)
    parts = ("time", "cycles", "clock") if split else ("time",)
    if not split:
        omitted.append("the cycles / clock split (no clock reading)")
    step = len(parts) + 1
    for i, r in enumerate(rows):
        clock_ba = None
        if r.clock is not None:  # shown as B over A here, like the other bars: + means B ran faster clocks
            lo, hi = (1 / r.clock.high, 1 / r.clock.low) if r.clock.low else (None, None)
            clock_ba = (1 / r.clock.value, lo, hi)
        vals = [(r.time.value, r.time.low, r.time.high),
                (r.cycles.value, r.cycles.low, r.cycles.high) if r.cycles else None, clock_ba]
        for j, (name, v) in enumerate(zip(parts, vals)):
            xpos = i * step + j
            pos.append(xpos)
            names.append(name)
            if v is None:
                continue
            err = [[(v[0] - v[1]) * 100], [(v[2] - v[0]) * 100]] if v[1] is not None else None
            ax.bar(xpos, (v[0] - 1) * 100, color=colors[r.kernel], alpha=(1.0, 0.6, 0.3)[j], yerr=err, capsize=3)
        # One pair of inputs for every kernel goes in the title, so the group labels stay one name wide.
        label = r.kernel if same_pair else f"{r.kernel}\n{r.input_b}\nvs {r.input_a}"
        ax.text(i * step + (len(parts) - 1) / 2, -0.16 if len(rows) > 2 else -0.12, label, transform=ax.get_xaxis_transform(),
                ha="right" if len(rows) > 2 else "center", va="top", fontsize=8,
                rotation=20 if len(rows) > 2 else 0)
    # time / cycles / clock per kernel as t / c / f once there are more than two kernels: the words collide.
    short = {"time": "t", "cycles": "cyc", "clock": "clk"} if len(rows) > 2 else {}
    ax.set_xticks(pos, [short.get(n, n) for n in names], fontsize=8 if short else 9)
    ax.axhline(0, color="k", lw=0.8)
    ax.grid(False, axis="x")
    ax.set_title(("B vs A (%): time = cycles / clock" if split else "B vs A (%): time") + (f"\n{rows[0].input_b} vs {rows[0].input_a}" if same_pair else ""),
                 fontsize=None if not same_pair else 10)
    ax.set_ylabel("% change, 95 % interval")
    fixed_layout(fig, rows=1, cols=len(shown) + 1, left=0.75, right=0.15, top=0.55 if same_pair else 0.35, bottom=1.05,
                  wgap=0.95, hgap=0)
    return Figure(key="inputs", title="Input B vs input A: time, clock, power",
                  caption=(f"hatched: input A (control / reference); filled: input B; the % under a value is B vs A. "
                           f"Right: the change of time (t) split into the change of cycles (cyc) and of the "
                           f"{'in-band' if inband else 'NVML'} clock (clk; time change ~ cycles change - clock change), "
                           f"with 95 % t intervals on log time per repeat (the comparison table's)."
                           + (f" Not drawn: {' and '.join(omitted)}, which no row has (no such telemetry on this device)."
                              if omitted else "")),
                  png=png(fig))


def energy_figure(summary) -> Figure | None:
    if not any(a.get("tflop_per_j") for a in summary.sustained):
        return None
    plt = pyplot()
    colors, ref = _kernel_colors(summary), summary.reference_inputs
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (key, unit, f) in zip(axes, (("tflops", "TFLOP/s (sustained)", "{:.0f}"),
                                         ("tflop_per_j", "TFLOP/J = TFLOP/s / board W", "{:.3f}"))):
        _bars(ax, _grouped(summary, key), colors=colors, ref=ref, labels_fmt=f.format)
        ax.set_ylabel(unit)
    fixed_layout(fig, rows=1, cols=2, left=1.0, right=0.15, top=0.2, bottom=0.85, wgap=1.15, hgap=0)
    return Figure(key="energy", title="Throughput and energy efficiency",
                  caption="bars per kernel, one per input (hatched: reference / control input).", png=png(fig))


def burst_figure(summary) -> Figure | None:
    bvs = summary.burst_vs_sustained
    if bvs is None or not bvs.rows:
        return None
    plt = pyplot()
    colors = _kernel_colors(summary)
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(bvs.rows)), 3.6))
    for i, r in enumerate(bvs.rows):
        for j, (t, clk) in enumerate(((r.time_a_ns, r.clock_a_mhz), (r.time_b_ns, r.clock_b_mhz))):
            x = i * 3 + j
            ax.bar(x, t * 1e-6, color=colors[r.kernel] if j else "white", edgecolor=colors[r.kernel], lw=1.5,
                   hatch=None if j else "//")
            ax.annotate(f"{t * 1e-6:.4f} ms\n{clk:.0f} MHz" if clk else f"{t * 1e-6:.4f} ms", (x, t * 1e-6),
                        ha="center", va="bottom", fontsize=9)
        top = max(r.time_a_ns, r.time_b_ns) * 1e-6
        ax.annotate(f"sustained / burst\n= {r.time.value:.3f}", (i * 3 + 0.5, top * 1.17), ha="center", va="bottom",
                    fontsize=10, color="k")
    ax.set_xticks([i * 3 + 0.5 for i in range(len(bvs.rows))], [f"{r.kernel}\n{r.input_a}" for r in bvs.rows],
                  fontsize=9)
    ax.set_ylabel("ms / launch")
    ax.margins(y=0.45)
    fig.tight_layout()
    return Figure(key="burst", title="Burst (kernel-only, rested GPU) vs sustained",
                  caption="hatched: burst; filled: sustained; MHz: NVML SM clock over the timed launches / window.",
                  png=png(fig))


def report_figures(run, summary) -> dict[str, Figure]:
    """Every figure that the run has data for, by key."""
    figs = [timeline_figure(run, summary), inputs_figure(summary), cycles_figure(run, summary), energy_figure(summary),
            burst_figure(summary)]
    return {f.key: f for f in figs if f is not None}
