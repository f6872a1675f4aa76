"""Report sections from the profiling tables stored beside a run: ncu pipe cycles with GPM's in-run view
beside them, Proton timelines, and the empirical peaks with their roofline.

A run without `traces/` or `peaks/` gets no section. Tables are `ReportTable`s, so the terminal
(`bench trace`, `bench peaks`), the Markdown twin and the HTML page show the same strings.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Sequence

from harness.profiling import (
    DISAGREE_FRAC,
    RooflinePoint,
    check_disagreement,
    gpm_medians,
    read_trace_table,
    roofs_from_peaks,
)
from harness.report._blocks import Figure, ReportTable, Section
from harness.report._roofline import roofline_figure_png, roofline_rows, roofline_table
from harness.report._tables import fmt

__all__ = ["peaks_table", "pipe_tables", "roofline_points", "trace_sections"]

_ELEM_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp32": 4, "float32": 4, "fp8": 1,
               "float8_e4m3fn": 1, "e4m3": 1}


def pipe_tables(traces: Sequence[dict], gpm: dict | None = None) -> list[ReportTable]:
    """Pipe cycles per launch (per SM) and the tensor-pipe figure of ncu beside GPM's in-run one."""
    if not traces:
        return []
    gpm = gpm or {}
    mcyc = lambda v: fmt(v, ".3f", scale=1e-6)
    cycles = ReportTable(
        title="Pipe cycles per launch (per SM, ncu, one warm launch)", left=3,
        columns=("kernel", "input", "CUDA kernel", "ms", "SM MHz", "achieved Mcyc", "matrix Mcyc", "vector Mcyc",
                 "FMA / ALU / XU Mcyc", "serialized Mcyc", "serialized / achieved", "basis"),
        rows=tuple((
            t["kernel"], t["input_label"], t["launch_kernel"], fmt(t["duration_ns"], ".4f", scale=1e-6),
            fmt(t["sm_clock_mhz"], ".0f"), mcyc(t["achieved_cycles"]), mcyc(t["matrix_cycles"]),
            mcyc(t["vector_cycles"]), f"{mcyc(t['fma_cycles'])} / {mcyc(t['alu_cycles'])} / {mcyc(t['xu_cycles'])}",
            mcyc(t["serialized_cycles"]), fmt(t["overlap"], ".2f"), t["cycles_basis"] or "-",
        ) for t in traces),
        caption=("busy cycles of a pipe = its % of peak sustained active x active cycles (basis 'elapsed': "
                 "sm__cycles_active was not collected, so elapsed cycles stand in and busy cycles read high); matrix "
                 "= tensor pipe; vector = FMA + ALU + XU (MUFU) busy cycles; serialized = matrix + vector, the "
                 "cycles if nothing overlapped; serialized / achieved > 1 is overlap. ncu profiles one launch after "
                 "the warm-in with clocks as found (never locked) and replays it once per counter pass."),
    )
    rows = []
    for t in traces:
        g = gpm.get((t["kernel"], t["input_label"]), {})
        tensor = t["tensor_pct"]
        expect = tensor * g["sm_util_pct"] / 100 if tensor is not None and g.get("sm_util_pct") is not None else None
        diff = g.get("tensor_util_pct") - expect if expect is not None and g.get("tensor_util_pct") is not None else None
        verdict = "-" if diff is None else ("agree (within 5 pts)" if abs(diff) <= 5 else "differ: see caption")
        rows.append((
            t["kernel"], t["input_label"], fmt(tensor, ".1f"), fmt(t["fma_pct"], ".1f"), fmt(t["alu_pct"], ".1f"),
            fmt(t["xu_pct"], ".1f"), fmt(t["issue_pct"], ".1f"), fmt(g.get("sm_util_pct"), ".1f"),
            fmt(expect, ".1f"), fmt(g.get("tensor_util_pct"), ".1f"), fmt(diff, "+.1f"), verdict,
        ))
    util = ReportTable(
        title="Tensor pipe: ncu (one launch) beside GPM (in-run, sustained window)", text_tail=1,
        columns=("kernel", "input", "ncu tensor %", "FMA %", "ALU %", "XU %", "issue %", "GPM SM util %",
                 "ncu tensor x SM util", "GPM tensor %", "GPM - expected (pts)", "verdict"),
        rows=tuple(rows),
        caption=("ncu's % counts against cycles with a warp resident on the SM; GPM's tensor utilisation counts "
                 "against all time on all SMs over the sampled window, so GPM should read ncu's % times GPM's SM "
                 "utilisation. Beyond 5 points, look at: a profiled launch whose clock differs from the sustained "
                 "one (ncu's SM MHz vs the run's), ncu's replay passes (caches flushed before each), and GPM's "
                 "averaging over launch boundaries."),
    )
    return [cycles, util]


def peaks_table(rows: Sequence[dict]) -> ReportTable:
    """Medians over repeats per peak kernel: the achieved rate with its clock and power, and the same peak timed by
    its independent second method beside it, the two flagged where they differ by more than 3 %."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["kernel"], []).append(r)
    unit = {"FLOP": ("TFLOP/s", 1e-12), "byte": ("TB/s", 1e-12), "exp": ("Gexp/s", 1e-9)}

    def med(rs, key):
        vals = [r[key] for r in rs if r.get(key) is not None]
        return median(vals) if vals else None

    out, flagged = [], []
    for k, rs in by.items():
        name, scale = unit.get(rs[0]["unit"], (rs[0]["unit"] + "/s", 1.0))
        digits = ".2f" if rs[0]["unit"] == "byte" else ".1f"
        rate, check = med(rs, "rate_per_s"), med(rs, "check_rate_per_s")
        diff = check_disagreement(rate, check)
        flag = "-" if diff is None else ("DISAGREE" if abs(diff) > DISAGREE_FRAC else "agree")
        if flag == "DISAGREE":
            flagged.append(k.removeprefix("peak-"))
        out.append((k.removeprefix("peak-"), rs[0]["operands"], f"{fmt(rate, digits, scale=scale)} {name}",
                    fmt(med(rs, "time_ns"), ".4f", scale=1e-6), fmt(med(rs, "sm_clock_mhz"), ".0f"),
                    fmt(med(rs, "inband_clock_mhz"), ".0f"), fmt(med(rs, "power_w"), ".0f"),
                    fmt(med(rs, "power_limited_frac"), ".0f", scale=100, suffix=" %"), str(len(rs)),
                    f"{fmt(check, digits, scale=scale)} {name}" if check else "-", fmt(diff, "+.1%"), flag,
                    next((r["check_method"] for r in rs if r.get("check_method")), "-")))
    caption = ("each peak timed like a kernel under test: idle, warm-in until settled, a timed window (CUDA-graph "
               "replays where a graph captures); medians over repeats. second method: the same peak timed "
               "independently right after (the copy: the runtime's eager copy_; the others: the same kernel in an "
               f"eager loop, timed with device events); DISAGREE: the two differ by more than {DISAGREE_FRAC:.0%}, so "
               "one of them is not measuring what it says. Random vs zero operands show how much the data moves the "
               "clock; copy bytes count the read and the write.")
    if flagged:
        caption = f"DISAGREE: {', '.join(flagged)}. " + caption
    return ReportTable(
        title="Empirical peaks (sustained)", left=2,
        columns=("peak", "operands", "achieved", "ms/launch", "NVML MHz", "in-band MHz", "board W", "power-limited",
                 "repeats", "second method", "sustained / second - 1", "methods", "second method is"),
        rows=tuple(out), caption=caption, prose_columns=("second method is",),
    )


def roofline_points(measurements: Sequence[dict], traces: Sequence[dict] = ()) -> list:
    """The run's timed kernels: sustained TFLOP/s at the intensity of ncu's DRAM bytes, else the compulsory
    bytes (q, k, v read once, o written once, at the input dtype's size)."""
    dram = {(t["kernel"], t["input_label"]): t["dram_bytes"] for t in traces if t.get("dram_bytes")}
    shapes = {(m["kernel"], m["input_label"]): m for m in measurements}
    clocks: dict[tuple, list[float]] = {}
    for m in measurements:  # the kernel's own clock in its windows: in-band where probed, else NVML's
        c = m.get("inband_clock_mhz") or m.get("sm_clock_mhz")
        if c and m.get("time_ns"):
            clocks.setdefault((m["kernel"], m["input_label"]), []).append(c)
    out = []
    for key, g in gpm_medians(measurements).items():
        if not g.get("tflops") or not g.get("flops_per_launch"):
            continue
        m = shapes[key]
        if key in dram:
            nbytes, note = dram[key], "ncu DRAM bytes"
        elif m.get("bytes_per_launch"):  # schema v5: the workload's own least traffic (decode, paged, window)
            nbytes, note = m["bytes_per_launch"], "compulsory bytes"
        else:
            b, s, dq, dv = m["batch"], m["seq_len"], m["head_dim_qk"], m["head_dim_v"]
            elems = b * s * (m["heads_q"] * dq + m["heads_kv"] * (dq + dv) + m["heads_q"] * dv)
            nbytes, note = elems * _ELEM_BYTES.get(m["dtype"], 2), "compulsory bytes"
        out.append(RooflinePoint(label=f"{key[0]} / {key[1]}", intensity=g["flops_per_launch"] / nbytes,
                                 flops_per_s=g["tflops"] * 1e12, note=note,
                                 clock_mhz=median(clocks[key]) if clocks.get(key) else None))
    return out


def trace_sections(run, *, figures: bool = True) -> list[Section]:
    """Sections for a run (`harness.results.Run`) from its `traces/` and `peaks/` tables; [] when it has none."""
    path = Path(run.path)
    traces = read_trace_table(path, "traces")
    peaks = read_trace_table(path, "peaks")
    measurements = run.measurements.to_dicts() if hasattr(run.measurements, "to_dicts") else list(run.measurements)
    sections = []
    if traces:
        sections.append(Section(
            title="Pipe counters (ncu) and GPM",
            text=("Why the time is what it is: per kernel, the cycles its tensor (matrix) pipe and its vector pipes "
                  "were busy in one warm launch, against the cycles the launch took, and the tensor figure beside "
                  "GPM's, sampled during this run's sustained windows."),
            tables=tuple(pipe_tables(traces, gpm_medians(measurements)))))
    pngs = sorted((path / "traces").glob("timeline-*.png")) if figures else []
    if pngs:
        sections.append(Section(
            title="Proton intra-kernel timelines",
            text="One recorded warm launch per Triton kernel: each row a warp of a block on one SM, each colour a scope.",
            figures=tuple(Figure(key=p.stem, title=p.stem.removeprefix("timeline-"), png=p.read_bytes(),
                                 caption="scopes as recorded by Proton's instrumentation backend")
                          for p in pngs)))
    if peaks:
        points = roofline_points(measurements, traces)
        roofs = roofs_from_peaks(peaks)
        rows = roofline_rows(points, measurements, roofs)
        figs = ()
        if figures and (any(r.kind in ("compute", "memory") for r in roofs) or points):
            figs = (Figure(key="roofline", title="Roofline with the empirical roofs",
                           caption=("roofs (dark blue: bf16 GEMM, purple: fp8 GEMM, grey: FP32 FMA, brown dash-dot: "
                                    "MUFU exp2 at the kernels' head dim, black: the read stream's bandwidth, else the "
                                    "highest memory roof) measured under the sustained protocol, each labelled with "
                                    "the clock it ran at (solid: random operands, dashed: constant, dotted: zero); "
                                    "points: this run's kernels at their sustained TFLOP/s and own clock, labelled "
                                    "with their % of the roof that governs them (GEMM and exp2 roofs scaled to the "
                                    "kernel's clock) and their GB/s as a % of the read roof"),
                           png=roofline_figure_png(roofs=roofs, points=points, rows=rows)),)
        tables = (peaks_table(peaks),) + ((roofline_table(rows),) if rows else ())
        sections.append(Section(title="Empirical peaks and roofline", tables=tables, figures=figs))
    return sections
