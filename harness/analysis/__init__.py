"""Analysis: statistics and the figures of a measurement, all pure functions of stored rows.

>>> from harness.analysis import median, bootstrap_ci
>>> median([3.0, 1.0, 2.0])
2.0
"""

from harness.analysis._aggregate import MEDIAN_FIELDS, aggregate_repeats
from harness.analysis._compare import (
    BURST_STATUS,
    SHAPE_COLUMNS,
    SUSTAINED_STATUSES,
    Comparison,
    ComparisonRow,
    RunSummary,
    aggregate_measurements,
    captured_control_pairs,
    compare_inputs,
    compare_measurements,
    compare_runs,
    parse_pairs,
    parse_threshold,
    shape_text,
    summarize_run,
)
from harness.analysis._decompose import VERDICTS, Decomposition, Ratio, VerdictRule, decompose, geomean, limiter_label
from harness.analysis._burst_gap import burst_gap_rows
from harness.analysis._chiplets import chiplet_spread
from harness.analysis._spread import GpuFigure, GpuSpread, gpu_spread, suite_spread
from harness.analysis._crosscheck import CROSSCHECK_TOLERANCE, clock_crosscheck, crosscheck_verdict
from harness.analysis._explain import (
    MIN_REPEATS_FOR_VERDICT,
    Explanation,
    comparison_warnings,
    explain_comparison,
    honest_interval,
    is_full_protocol,
    row_sentence,
    t_quantile,
)
from harness.analysis._sentences import comparison_sentence, input_row_sentence, input_sentences
from harness.analysis._model_error import P_TAIL, model_error_summary
from harness.analysis._stats import bootstrap_ci, cv, mean, median, value_range
from harness.analysis._window import POWER_REASONS, THERMAL_REASONS, chunk_clock, samples_in, summarize_window

__all__ = [
    "P_TAIL",
    "model_error_summary",
    "GpuFigure",
    "GpuSpread",
    "gpu_spread",
    "suite_spread",
    "chiplet_spread",
    "burst_gap_rows",
    "CROSSCHECK_TOLERANCE",
    "clock_crosscheck",
    "crosscheck_verdict",
    "MIN_REPEATS_FOR_VERDICT",
    "Explanation",
    "comparison_warnings",
    "explain_comparison",
    "honest_interval",
    "is_full_protocol",
    "row_sentence",
    "t_quantile",
    "BURST_STATUS",
    "MEDIAN_FIELDS",
    "SHAPE_COLUMNS",
    "SUSTAINED_STATUSES",
    "VERDICTS",
    "aggregate_measurements",
    "aggregate_repeats",
    "Comparison",
    "ComparisonRow",
    "Decomposition",
    "POWER_REASONS",
    "Ratio",
    "RunSummary",
    "THERMAL_REASONS",
    "VerdictRule",
    "bootstrap_ci",
    "captured_control_pairs",
    "chunk_clock",
    "compare_inputs",
    "comparison_sentence",
    "input_sentences",
    "input_row_sentence",
    "compare_measurements",
    "compare_runs",
    "cv",
    "decompose",
    "geomean",
    "limiter_label",
    "mean",
    "median",
    "parse_pairs",
    "parse_threshold",
    "samples_in",
    "shape_text",
    "summarize_run",
    "summarize_window",
    "value_range",
]
