"""The roofline of a run with its empirical roofs, the MUFU exp2 roof among them, and each kernel's % of the roof
that governs it and of the read roof.

Attention computes one exp per score and 2 x (d_qk + d_v) FLOPs per score (both products), so the exp2 roof
(exp/s, from `bench peaks`) is a FLOP/s roof of rate x 2 (d_qk + d_v) for a kernel of that head dim: at d = 128
and 4.1 Texp/s that is 2.1 PFLOP/s, above the bf16 GEMM roof; at d = 64 it falls to 1.05 PFLOP/s, below the
fp8 one. A kernel's governing roof is the lowest of: memory roof x its intensity, the GEMM roof of its operand
type (random operands: what real data meets; fp8 for kernels named fp8, else the input dtype) and its exp2 roof.

Every roof was measured at a clock of its own (the peak's in-band clock in its sustained window). The GEMM and
exp2 roofs count per SM cycle, so each is placed beside a kernel at that kernel's own clock (roof x kernel MHz /
roof MHz); the memory roof is the DRAM's and is not scaled (`harness.profiling.Roof.at_clock`). The memory roof is
the read stream where the run has one (attention reads its cache and writes little), else the highest memory roof.
Roofs are drawn in a palette of their own (dark blues, purples, greys, brown), points in another.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from harness.profiling import read_roof
from harness.report._blocks import ReportTable
from harness.report._tables import fmt

__all__ = ["roofline_figure_png", "roofline_rows", "roofline_table"]

_ROOF_COLORS = {"bf16": "#08306b", "fp8": "#54278f", "fma": "#525252", "exp2": "#8c2d04", "memory": "#000000"}
_POINT_COLORS = ("#1b9e77", "#e7298a", "#66a61e", "#e6ab02", "#e41a1c", "#17becf", "#a6761d", "#f781bf")
_POINT_MARKERS = "oDs^vP*X"


def _family(label: str) -> str:
    for k in ("bf16", "fp8", "fma", "exp2"):
        if k in label:
            return k
    return "other"


def roofline_rows(points: Sequence, measurements: Sequence[dict], roofs: Sequence) -> list[dict]:
    """Per point (`RooflinePoint` labelled "kernel / input"): the roofs that apply in FLOP/s at the kernel's clock and
    the governing one with the point's share of it, its GB/s and share of the read roof. Plain dicts, for the table
    and the JSON export."""
    shapes = {(m["kernel"], m["input_label"]): m for m in measurements}
    memory = read_roof(roofs)
    exp2 = next((r for r in roofs if r.kind == "ops" and "exp2" in r.label), None)
    gemm = {}
    for r in roofs:
        if r.kind == "compute" and r.operands in ("random", "") and _family(r.label) in ("bf16", "fp8"):
            gemm[_family(r.label)] = r
    out = []
    for p in points:
        kernel, _, label = p.label.partition(" / ")
        m = shapes.get((kernel, label), {})
        fam = "fp8" if "fp8" in kernel else ("fp8" if "8" in str(m.get("dtype", "")) else "bf16")
        d_sum = (m.get("head_dim_qk") or 0) + (m.get("head_dim_v") or 0)
        clock = getattr(p, "clock_mhz", None)
        applies = {}
        if memory:
            applies["memory"] = memory.value * p.intensity
        if fam in gemm:
            applies[f"gemm-{fam}"] = gemm[fam].at_clock(clock)
        if exp2 and d_sum:
            applies[f"exp2 (d={m.get('head_dim_qk')})"] = exp2.at_clock(clock) * 2 * d_sum
        name, roof = min(applies.items(), key=lambda kv: kv[1]) if applies else (None, None)
        gb_per_s = p.flops_per_s / p.intensity if p.intensity else None
        out.append({"kernel": kernel, "input_label": label, "head_dim_qk": m.get("head_dim_qk"), "d_sum": d_sum,
                    "intensity": p.intensity, "flops_per_s": p.flops_per_s,
                    "roofs": applies, "governing_roof": name, "governing_flops_per_s": roof,
                    "share_of_roof": p.flops_per_s / roof if roof else None, "note": p.note, "clock_mhz": clock,
                    "bytes_per_s": gb_per_s, "read_roof": memory.label if memory else None,
                    "read_roof_share": gb_per_s / memory.value if memory and gb_per_s else None})
    return out


def roofline_table(rows: Sequence[dict]) -> ReportTable:
    t = lambda v: fmt(v, ".0f", scale=1e-12)  # noqa: E731
    read = next((r["read_roof"] for r in rows if r.get("read_roof")), None)
    return ReportTable(
        title="Share of the governing roof", left=2, text_tail=2,
        columns=("kernel", "input", "TFLOP/s", "GB/s", "FLOP/B", "kernel MHz", "memory roof", "GEMM roof", "exp2 roof",
                 "% of roof", "governing roof", f"% of {read or 'read'} roof", "bytes"),
        rows=tuple((r["kernel"], r["input_label"], t(r["flops_per_s"]), fmt(r.get("bytes_per_s"), ".4g", scale=1e-9),
                    fmt(r["intensity"], ".0f"), fmt(r.get("clock_mhz"), ".0f"),
                    t(r["roofs"].get("memory")), t(next((v for k, v in r["roofs"].items() if k.startswith("gemm")), None)),
                    t(next((v for k, v in r["roofs"].items() if k.startswith("exp2")), None)),
                    fmt(r["share_of_roof"], ".0f", scale=100, suffix=" %"), r["governing_roof"] or "-",
                    fmt(r.get("read_roof_share"), ".1f", scale=100, suffix=" %"), r["note"]) for r in rows),
        caption=("roofs in TFLOP/s at the kernel's intensity, head dim and clock: memory = the read roof (bytes/s) x "
                 "FLOP/B, as measured; GEMM = the random-operand GEMM of its operand type and exp2 = MUFU exp2/s x 2 "
                 "(d_qk + d_v) FLOP per exp, each scaled from its own measured clock to the kernel's (kernel MHz: "
                 "in-band where probed); GB/s = the kernel's bytes / time, set against the read roof"),
    )


def _at(roof) -> str:
    """' @ 1755 MHz in-band': the clock a roof was measured at, where known."""
    if roof is None or not getattr(roof, "clock_mhz", None):
        return ""
    return f" @ {roof.clock_mhz:.0f} MHz" + (" in-band" if roof.clock_source == "inband" else "")


def _x_limits(intensities: Sequence[float], memory, roof_values: Sequence[float], y_lo: float) -> tuple[float, float]:
    """The intensity axis: each point with room for its label (x4 either side) and each roof's ridge (where the memory
    roof meets it) with a stretch of its flat part (x2), so every roof in the legend is drawn on the chart: MLA's exp2
    roof at d 576 + 512 starts near 1,900 FLOP/B, past 4x its points' 238, and was in the legend only."""
    ridge = [v / memory.value for v in roof_values] if memory else []
    lo = min([y_lo / memory.value if memory else 1.0, *(x / 4 for x in [*intensities, *ridge])])
    hi = max([100.0, *(x * 4 for x in intensities), *(x * 2 for x in ridge)])
    return lo, hi


def roofline_figure_png(*, roofs: Sequence, points: Sequence, rows: Sequence[dict], dpi: int = 150) -> bytes:
    """Log-log roofline: GEMM and FMA roofs, the exp2 roof per head dim, the memory roof, points with % labels."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    memory = read_roof(roofs)
    compute = sorted((r for r in roofs if r.kind == "compute"), key=lambda r: -r.value)
    exp_roof = next((r for r in roofs if r.kind == "ops" and "exp2" in r.label), None)
    # the exp2 roof drawn once per head dim at its own measured clock (the table scales it to each kernel's clock)
    exp_roofs = sorted({(f"exp2 (d={r['head_dim_qk']})", exp_roof.value * 2 * r["d_sum"]) for r in rows
                        if exp_roof is not None and r.get("d_sum")}, key=lambda kv: -kv[1])
    ys = [c.value for c in compute] + [v for _, v in exp_roofs] + [p.flops_per_s for p in points]
    if not ys:
        raise ValueError("a roofline needs at least one roof or point")
    y_lo, y_hi = min(ys) / 6, max(ys) * 2.5
    lo, hi = _x_limits([p.intensity for p in points if p.intensity > 0], memory,
                       [c.value for c in compute] + [v for _, v in exp_roofs], y_lo)
    fig, ax = plt.subplots(figsize=(14, 6.5), dpi=dpi)
    fig.subplots_adjust(left=0.06, right=0.5, bottom=0.1, top=0.94)
    for c in compute:
        style = {"constant": "--", "zero": ":"}.get(c.operands, "-")
        start = c.value / memory.value if memory else lo
        ax.plot([start, hi], [c.value / 1e12] * 2, style, color=_ROOF_COLORS.get(_family(c.label), "#525252"), lw=1.6,
                label=f"roof {c.label}: {c.value / 1e12:.0f} TFLOP/s{_at(c)}")
    for name, v in exp_roofs:
        ax.plot([v / memory.value if memory else lo, hi], [v / 1e12] * 2, "-.", color=_ROOF_COLORS["exp2"], lw=2.0,
                label=f"roof {name} MUFU: {v / 1e12:.0f} TFLOP/s equivalent{_at(exp_roof)}")
    if memory:
        top = max(ys)
        ax.plot([lo, top / memory.value], [lo * memory.value / 1e12, top / 1e12], "-", color=_ROOF_COLORS["memory"],
                lw=1.8, label=f"roof {memory.label}: {memory.value / 1e12:.2f} TB/s{_at(memory)}")
    for i, (p, r) in enumerate(zip(points, rows)):
        color, mk = _POINT_COLORS[i % len(_POINT_COLORS)], _POINT_MARKERS[i % len(_POINT_MARKERS)]
        share = f" = {r['share_of_roof']:.0%} of {r['governing_roof']}" if r["share_of_roof"] is not None else ""
        # two lines a point, so the legend fits beside the axes: what it is, then its figures
        traffic = (f"{p.flops_per_s / p.intensity / 1e9:.0f} GB/s = {r['read_roof_share']:.0%} of {r['read_roof']}, "
                   if r.get("read_roof_share") else "")
        clock = f", {p.clock_mhz:.0f} MHz" if getattr(p, "clock_mhz", None) else ""
        ax.plot([p.intensity], [p.flops_per_s / 1e12], mk, ms=9, color=color, mec="white", mew=0.8,
                label=f"{p.label}\n{traffic}{p.flops_per_s / 1e12:.0f} TFLOP/s @ {p.intensity:.0f} FLOP/B{share}{clock}")
        if share:
            # Kernels of one shape sit on top of each other: each label gets a line of its own, tied by its colour.
            ax.annotate(f"{r['share_of_roof']:.0%}", (p.intensity, p.flops_per_s / 1e12), xytext=(14, 22 - 13 * i),
                        textcoords="offset points", fontsize=9, color=color, fontweight="bold",
                        arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(y_lo / 1e12, y_hi / 1e12)
    ax.set_xlabel("arithmetic intensity, FLOP per DRAM byte")
    ax.set_ylabel("TFLOP/s (sustained)")
    ax.set_title("Roofline with the empirical roofs (exp2 as FLOP/s at each kernel's head dim)", fontsize=11, loc="left")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
