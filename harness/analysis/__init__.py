"""Analysis: statistics and the figures of a measurement, all pure functions of stored rows.

>>> from harness.analysis import median, bootstrap_ci
>>> median([3.0, 1.0, 2.0])
2.0
"""

from harness.analysis._aggregate import MEDIAN_FIELDS, aggregate_repeats
from harness.analysis._stats import bootstrap_ci, cv, mean, median, value_range
from harness.analysis._window import POWER_REASONS, THERMAL_REASONS, chunk_clock, samples_in, summarize_window

__all__ = [
    "MEDIAN_FIELDS",
    "aggregate_repeats",
    "POWER_REASONS",
    "THERMAL_REASONS",
    "bootstrap_ci",
    "chunk_clock",
    "cv",
    "mean",
    "median",
    "samples_in",
    "summarize_window",
    "value_range",
]
