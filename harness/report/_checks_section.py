"""Report sections that say what the figures mean: the clock cross-check (ncu cycles against time x each
clock) and the burst gap (what a burst timing would have reported against the sustained time).

Tables are `ReportTable`s over the plain rows of `harness.analysis.clock_crosscheck` / `burst_gap_rows`, so
the JSON export can carry the same figures.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis import burst_gap_rows, clock_crosscheck, crosscheck_verdict
from harness.profiling import read_trace_table
from harness.report._blocks import ReportTable, Section
from harness.report._tables import fmt

__all__ = ["burst_gap_section", "crosscheck_section"]


def crosscheck_section(run) -> Section | None:
    """The "Clock cross-check" section of a run with ncu traces; None without traces."""
    traces = read_trace_table(Path(run.path), "traces")
    if not traces:
        return None
    rows = clock_crosscheck(run.measurements.to_dicts(), traces)
    _, verdict = crosscheck_verdict(rows)
    mc = lambda v: fmt(v, ".3f", scale=1e-6)
    pct = lambda v: fmt(None if v is None else v - 1, "+.1f", scale=100, suffix=" %")
    table = ReportTable(
        title="Cycles per launch: ncu counted vs sustained time x clock", left=2,
        columns=("kernel", "input", "ncu Mcycles", "ncu MHz", "sustained ms", "in-band MHz", "x in-band Mcycles",
                 "in-band vs ncu", "NVML MHz", "x NVML Mcycles", "NVML vs ncu"),
        rows=tuple((r["kernel"], r["input_label"], mc(r["ncu_cycles"]), fmt(r["ncu_clock_mhz"], ".0f"),
                    fmt(r["time_ns"], ".4f", scale=1e-6), fmt(r["inband_clock_mhz"], ".0f"), mc(r["cycles_inband"]),
                    pct(r["inband_vs_ncu"]), fmt(r["nvml_clock_mhz"], ".0f"), mc(r["cycles_nvml"]),
                    pct(r["nvml_vs_ncu"])) for r in rows),
        caption=("ncu: sm__cycles_elapsed.max of one warm launch at the clock it ran at (ncu MHz); sustained: the "
                 "window's time per launch (geometric mean over repeats) times the window's in-band and NVML clocks. "
                 "Cycles per launch are a property of the kernel, so the clock that makes the products match ncu "
                 "across different clocks is the clock the SMs count."),
    )
    text = (verdict + " Why the gap: NVML reports the SM clock the driver set; under heavy tensor-core load the "
            "SMs count fewer cycles per ns than that (the probe measures clock64() against %globaltimer), and "
            "ncu's counters count the same cycles the probe does.")
    return Section(title="Clock cross-check", text=text, tables=(table,))


def burst_gap_section(summary) -> Section | None:
    """Per kernel x input: a burst timing against the sustained one, in words; None without burst rows."""
    rows = burst_gap_rows(summary)
    if not rows:
        return None
    table = ReportTable(
        title="What a burst timing would have reported", left=2,
        columns=("kernel", "input", "burst ms", "sustained ms", "burst reads", "burst MHz", "sustained MHz", "clock"),
        rows=tuple((r["kernel"], r["input_label"], fmt(r["burst_ms"], ".4f"), fmt(r["sustained_ms"], ".4f"),
                    f"{abs(r['burst_faster_frac']) * 100:.1f} % {'faster' if r['burst_faster_frac'] >= 0 else 'slower'}",
                    fmt(r["clock_burst_mhz"], ".0f"), fmt(r["clock_sustained_mhz"], ".0f"), r["clock_source"])
                   for r in rows),
        caption="burst reads = 1 - burst / sustained time per launch: how much a burst figure flatters the kernel",
    )
    return Section(title="Burst gap", text=" ".join(r["sentence"] for r in rows), tables=(table,))
