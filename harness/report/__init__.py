"""Report: terminal tables, the live view (or plain log lines off a terminal), the HTML report with its
Markdown twin, and the figures as JSON/CSV (`figures.schema.json`).

>>> from harness.report import fmt
>>> fmt(0.00321, ".2f", scale=1e3, suffix=" ms")
'3.21 ms'
"""

from harness.report._blocks import Figure, ReportTable, Section
from harness.report._export import (
    FIGURES_SCHEMA,
    FIGURES_SCHEMA_VERSION,
    commits_figures,
    comparison_figures,
    csv_text,
    figures_document,
    gate_figures,
    nightly_figures,
    provenance,
    run_figures,
    sustained_figures,
    write_figures,
)
from harness.report._gpu_section import gpu_spread_tables
from harness.report._history import HISTORY_MARKER, history_figures, history_markdown, history_tables, verdict_line
from harness.report._history_page import history_page
from harness.report._html import Report, build_report, render_html, report_header, write_report
from harness.report._in_model import (
    IN_MODEL_COMPARISON_NOTE,
    IN_MODEL_NOTE,
    in_model_comparison_figures,
    in_model_comparison_table,
    in_model_figures,
    in_model_sections,
    in_model_table,
)
from harness.report._live import LineObserver, LiveView, measurement_line, run_observer
from harness.report._machine import MACHINE_SCHEMA, MACHINE_SCHEMA_VERSION, machine_document
from harness.report._markdown import (
    burst_tables,
    comparison_markdown,
    comparison_tables,
    gate_line,
    render_markdown,
    run_sections,
    run_tables,
)
from harness.report._model_error_section import (
    MODEL_ERROR_NOTE,
    model_error_figure,
    model_error_sections,
    model_error_table,
)
from harness.report._saved import REPEAT_FIELDS, fixture_extra_info, saved_commit_text, saved_comparison, summary_line
from harness.report._tables import HEADERS, fmt, sustained_tables, tflops
from harness.report._terminal import FORMATS as TABLE_FORMATS
from harness.report._trace_section import peaks_table, pipe_tables

__all__ = [
    "IN_MODEL_NOTE",
    "IN_MODEL_COMPARISON_NOTE",
    "in_model_table",
    "in_model_comparison_table",
    "in_model_figures",
    "in_model_comparison_figures",
    "in_model_sections",
    "MACHINE_SCHEMA",
    "MACHINE_SCHEMA_VERSION",
    "machine_document",
    "HISTORY_MARKER",
    "history_figures",
    "history_markdown",
    "history_page",
    "history_tables",
    "verdict_line",
    "MODEL_ERROR_NOTE",
    "model_error_figure",
    "model_error_sections",
    "model_error_table",
    "gpu_spread_tables",
    "peaks_table",
    "pipe_tables",
    "FIGURES_SCHEMA",
    "FIGURES_SCHEMA_VERSION",
    "HEADERS",
    "TABLE_FORMATS",
    "Figure",
    "LineObserver",
    "LiveView",
    "Report",
    "ReportTable",
    "Section",
    "build_report",
    "burst_tables",
    "comparison_markdown",
    "commits_figures",
    "comparison_figures",
    "comparison_tables",
    "csv_text",
    "figures_document",
    "fmt",
    "gate_figures",
    "gate_line",
    "measurement_line",
    "nightly_figures",
    "provenance",
    "render_html",
    "render_markdown",
    "report_header",
    "run_sections",
    "run_figures",
    "run_observer",
    "run_tables",
    "REPEAT_FIELDS",
    "fixture_extra_info",
    "saved_commit_text",
    "saved_comparison",
    "summary_line",
    "sustained_figures",
    "sustained_tables",
    "tflops",
    "write_figures",
    "write_report",
]
