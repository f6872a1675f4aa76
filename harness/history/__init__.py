"""History: every nightly run kept, per series (kernel x input x shape x dtype), with what it ran on.

The store (`append_runs`, `read_history`) is a folder of Parquet files, one per night, written through the results
schema's `history` table. `analyze_history` gives each series' figures over the nights with their bands, its
change points in time, cycles and clock (attributed, told apart from machine and software events, each with
its commit range) and the verdict of the last night against the nights before it (`judge_series`: a prediction
interval from the last N comparable nights). `simulate_history` draws nights from recorded repeats, to calibrate
both on A/A histories. `bench bisect`, which runs revisions, is harness.commits' (`bisect_commits`): this package
reads and judges what was measured and runs nothing.

>>> from harness.history import predict
>>> predict([1.0, 1.01, 0.99], 1.0).nights
3
"""

from harness.history._analyze import (
    ANALYSIS_COLUMNS,
    METRICS,
    NIGHT_EXIT,
    ChangePoint,
    Event,
    HistoryAnalysis,
    Night,
    NightVerdict,
    SeriesHistory,
    analyze_history,
)
from harness.history._changepoints import MIN_SIZE, PENALTY, Step, find_steps, noise_sigma, require_ruptures
from harness.history._series import comparability_key, night_rows, series_key, shape_label
from harness.history._simulate import (
    NoisePool,
    SimEvent,
    detection_delay,
    noise_pool,
    read_noise_pools,
    simulate_history,
)
from harness.history._store import History, append_runs, night_files, night_label, read_history
from harness.history._verdict import (
    LEVEL,
    MIN_NIGHTS,
    NIGHTS,
    Prediction,
    SeriesVerdict,
    judge_series,
    predict,
    simulate_verdicts,
)

__all__ = [
    "ANALYSIS_COLUMNS",
    "METRICS",
    "NIGHT_EXIT",
    "ChangePoint",
    "Event",
    "History",
    "HistoryAnalysis",
    "Night",
    "NightVerdict",
    "SeriesHistory",
    "analyze_history",
    "MIN_SIZE",
    "PENALTY",
    "Step",
    "find_steps",
    "noise_sigma",
    "require_ruptures",
    "comparability_key",
    "night_rows",
    "series_key",
    "shape_label",
    "NoisePool",
    "SimEvent",
    "noise_pool",
    "read_noise_pools",
    "detection_delay",
    "simulate_history",
    "append_runs",
    "night_files",
    "night_label",
    "read_history",
    "LEVEL",
    "MIN_NIGHTS",
    "NIGHTS",
    "Prediction",
    "SeriesVerdict",
    "judge_series",
    "predict",
    "simulate_verdicts",
]
