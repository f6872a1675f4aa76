"""Analysis: statistics and the figures of a measurement, all pure functions of stored rows.

>>> from harness.analysis import median, bootstrap_ci
>>> median([3.0, 1.0, 2.0])
2.0
"""

from harness.analysis._aggregate import MEDIAN_FIELDS, aggregate_repeats
from harness.analysis._caveats import (
    CPU_CAVEAT,
    QUICK_CAVEAT,
    inputs_design,
    is_full_protocol,
    rule_for,
    run_caveats,
)
from harness.analysis._compare import (
    BURST_STATUS,
    SHAPE_COLUMNS,
    SUSTAINED_STATUSES,
    Comparison,
    ComparisonRow,
    captured_control_pairs,
    compare_measurements,
    compare_runs,
    comparison_row,
    same_run,
    shape_text,
)
from harness.analysis._design import comparison_pilot, run_pilots, sequential_plan, two_stage_pilot
from harness.analysis._parse import parse_kernel_pairs, parse_pairs, parse_threshold, parse_until_ci
from harness.analysis._summary import RunSummary, aggregate_measurements, compare_inputs, compare_kernels, summarize_run
from harness.analysis._decompose import Decomposition, decompose, geomean, limiter_label
from harness.analysis._interval import (
    BETWEEN_RUNS_CV,
    DEFAULT_THRESHOLD,
    FAILING,
    INTERVAL_METHODS,
    OPEN,
    VERDICT_MEANING,
    VERDICTS,
    Ratio,
    VerdictRule,
    classify,
    judge,
    paired_decision,
    percent,
    ratio_interval,
    stein_total,
    t_quantile,
)
from harness.analysis._outcome import (
    UNRESOLVED_POLICIES,
    GateOutcome,
    estimators_text,
    gate_outcome,
    no_interval_text,
    ratio_text,
    resolution_text,
)
from harness.analysis._sequential import MIN_GATE_PILOT, Plan, critical_values, paired_look, skipped_mean
from harness.analysis._burst_gap import burst_gap_rows
from harness.analysis._chiplets import chiplet_spread
from harness.analysis._spread import GpuFigure, GpuSpread, gpu_spread, suite_spread
from harness.analysis._crosscheck import CROSSCHECK_TOLERANCE, clock_crosscheck, crosscheck_verdict
from harness.analysis._explain import Explanation, comparison_warnings, explain_comparison, interval_text, row_sentence
from harness.analysis._sentences import input_row_sentence, input_rows, input_sentences
from harness.analysis._in_model import InModelRow, attention_figures, compare_in_model, isolated_label, survival_sentence
from harness.analysis._model_error import BAND_VERDICTS, P_TAIL, band_verdict, model_error_summary
from harness.analysis._stats import bootstrap_ci, cv, mean, median, value_range
from harness.analysis._window import POWER_REASONS, THERMAL_REASONS, chunk_clock, samples_in, summarize_window

__all__ = [
    "InModelRow",
    "attention_figures",
    "compare_in_model",
    "isolated_label",
    "survival_sentence",
    "BETWEEN_RUNS_CV",
    "FAILING",
    "GateOutcome",
    "MIN_GATE_PILOT",
    "OPEN",
    "Plan",
    "UNRESOLVED_POLICIES",
    "VERDICT_MEANING",
    "classify",
    "critical_values",
    "gate_outcome",
    "no_interval_text",
    "estimators_text",
    "ratio_text",
    "resolution_text",
    "paired_decision",
    "paired_look",
    "skipped_mean",
    "P_TAIL",
    "BAND_VERDICTS",
    "band_verdict",
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
    "CPU_CAVEAT",
    "QUICK_CAVEAT",
    "DEFAULT_THRESHOLD",
    "INTERVAL_METHODS",
    "Explanation",
    "comparison_warnings",
    "explain_comparison",
    "inputs_design",
    "interval_text",
    "is_full_protocol",
    "row_sentence",
    "rule_for",
    "run_caveats",
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
    "compare_kernels",
    "comparison_row",
    "input_sentences",
    "input_row_sentence",
    "input_rows",
    "compare_measurements",
    "comparison_pilot",
    "run_pilots",
    "sequential_plan",
    "compare_runs",
    "cv",
    "decompose",
    "geomean",
    "judge",
    "limiter_label",
    "mean",
    "median",
    "parse_kernel_pairs",
    "percent",
    "parse_pairs",
    "parse_threshold",
    "parse_until_ci",
    "ratio_interval",
    "same_run",
    "samples_in",
    "shape_text",
    "stein_total",
    "summarize_run",
    "summarize_window",
    "two_stage_pilot",
    "value_range",
]
