"""The per-GPU spread of a merged run, as report tables (terminal, Markdown, HTML from the same strings).

Add it to the HTML report in `build_report` (harness/report/_html.py), after `run_sections(...)`:

    from harness.report._gpu_section import gpu_spread_section
    section = gpu_spread_section(run)
    if section is not None:
        sections.insert(1, section)  # right after "Sustained results"

>>> from harness.report._gpu_section import gpu_spread_tables
>>> gpu_spread_tables([])[0].rows
()
"""

from __future__ import annotations

from harness.analysis import gpu_spread, suite_spread
from harness.report._blocks import ReportTable, Section
from harness.report._tables import fmt
from harness.results import with_gpu

__all__ = ["gpu_spread_section", "gpu_spread_tables"]

_CAPTION = ("per GPU: median over its timed repeats; across GPUs: median, min, max and spread = (max - min) / "
            "median; NVML MHz = the vendor's SM clock of record (NVML; amdsmi: slowest XCD) in the window")


def gpu_spread_tables(spreads) -> list[ReportTable]:
    """Two tables: the spread across GPUs per kernel x input, then every GPU's own figures."""
    summary = ReportTable(
        title="Spread between GPUs",
        columns=("input", "kernel", "GPUs", "ms/launch", "min", "max", "time spread", "NVML MHz", "min", "max",
                 "NVML MHz spread", "slowest GPU"),
        rows=tuple(
            (s.input_label, s.kernel, str(len(s.gpus)), fmt(s.time_median_ns, ".4f", scale=1e-6),
             fmt(s.time_min_ns, ".4f", scale=1e-6), fmt(s.time_max_ns, ".4f", scale=1e-6),
             fmt(s.time_spread, ".2f", scale=100, suffix="%"), fmt(s.clock_median_mhz, ".0f"),
             fmt(s.clock_min_mhz, ".0f"), fmt(s.clock_max_mhz, ".0f"),
             fmt(s.clock_spread, ".2f", scale=100, suffix="%"), s.slowest or "-")
            for s in spreads),
        caption=_CAPTION, left=2, text_tail=1,
    )
    per_gpu = ReportTable(
        title="Per GPU",
        columns=("input", "kernel", "GPU", "ms/launch", "vs median", "NVML MHz", "in-band MHz", "repeats"),
        rows=tuple(
            (s.input_label, s.kernel, f.gpu, fmt(f.time_ns, ".4f", scale=1e-6),
             fmt(f.time_ns / s.time_median_ns - 1 if s.time_median_ns else None, "+.2f", scale=100, suffix="%"),
             fmt(f.sm_clock_mhz, ".0f"), fmt(f.inband_clock_mhz, ".0f"),
             f"{f.repeats}" + (f" ({f.unsettled} unsettled)" if f.unsettled else ""))
            for s in spreads for f in s.gpus),
        left=3,
    )
    return [summary, per_gpu]


def gpu_spread_section(run) -> Section | None:
    """The report section of a run measured on two or more GPUs; None for a run of one GPU."""
    rows = with_gpu(run.measurements, run.info).to_dicts()
    spreads = gpu_spread(rows)
    if not any(len(s.gpus) > 1 for s in spreads):
        return None
    overall = suite_spread(spreads)
    text = (f"The same kernel on the same input, timed on each GPU. Median time spread between GPUs over "
            f"{sum(1 for s in spreads if s.time_spread is not None)} kernel x input: "
            f"{fmt(overall, '.2f', scale=100, suffix='%')}. Compare kernels on one GPU, not across GPUs: a "
            f"difference smaller than this spread can come from the GPU, not the kernel.")
    return Section(title="Spread between GPUs", text=text, tables=tuple(gpu_spread_tables(spreads)))
