"""Report: terminal tables, the live view, and the HTML report with its Markdown twin.

>>> from harness.report import fmt
>>> fmt(0.00321, ".2f", scale=1e3, suffix=" ms")
'3.21 ms'
"""

from harness.report._html import Report, build_report, render_html, report_header, write_report
from harness.report._live import LiveView
from harness.report._markdown import (
    Figure,
    ReportTable,
    Section,
    burst_tables,
    comparison_markdown,
    comparison_tables,
    render_markdown,
    run_sections,
    run_tables,
)
from harness.report._gpu_section import gpu_spread_tables
from harness.report._tables import fmt, sustained_tables
from harness.report._trace_section import peaks_table, pipe_tables

__all__ = [
    "gpu_spread_tables",
    "peaks_table",
    "pipe_tables",
    "Figure",
    "LiveView",
    "Report",
    "ReportTable",
    "Section",
    "build_report",
    "burst_tables",
    "comparison_markdown",
    "comparison_tables",
    "fmt",
    "render_html",
    "render_markdown",
    "report_header",
    "run_sections",
    "run_tables",
    "sustained_tables",
    "write_report",
]
