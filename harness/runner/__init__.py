"""The sustained protocol: idle, warm-in until the clock settles, a timed window, repeats in rotated order.

>>> from harness.runner import check_settled
>>> check_settled([(0.5, 1.0), (1.0, 1.0), (1.5, 1.0), (2.0, 1.0), (2.5, 1.0)], elapsed_s=2.5, min_s=1.0,
...               chunk_tol=0.003, trend_window_s=2.0, trend_tol=0.003).settled
True
"""

from harness.config import BurstConfig, BurstProtocol
from harness.runner._burst import KernelTimes, ProfEvent, device_time_from_events, run_burst
from harness.runner._chunks import Chunk, ChunkSource, PipelinedChunks
from harness.runner._endings import StopSignals, Watchdog, stop_signals
from harness.runner._in_model import MIN_PAIRS, InModelConfig, InModelResult, run_in_model
from harness.runner._in_model_job import InModelJob, InModelJobResult, run_in_model_job
from harness.runner._launch import Launcher, build_launcher, estimate_launch_ns
from harness.runner._loop import ISOLATION_NONE_NOTE, TIMED_STATUSES, RunHooks, RunResult
from harness.runner._measure import MeasureOutcome, PhaseTimes, run_protocol
from harness.runner._observer import NullObserver, RunObserver
from harness.runner._overhead import LaunchOverhead, measure_launch_overhead
from harness.runner._probe import InbandProbe, ProbeReading, probe_unavailable_reason, summarize_probe_blocks
from harness.runner._ready import check_kernel
from harness.runner._run import run_sustained
from harness.runner._settle import SettleCheck, check_settled, trend_change
from harness.runner._sizes import estimate_bytes
from harness.runner._watch import OutputWatch

__all__ = [
    "MIN_PAIRS",
    "InModelConfig",
    "InModelResult",
    "run_in_model",
    "InModelJob",
    "InModelJobResult",
    "run_in_model_job",
    "ISOLATION_NONE_NOTE",
    "BurstConfig",
    "BurstProtocol",
    "Chunk",
    "ChunkSource",
    "InbandProbe",
    "KernelTimes",
    "LaunchOverhead",
    "Launcher",
    "MeasureOutcome",
    "NullObserver",
    "OutputWatch",
    "PhaseTimes",
    "PipelinedChunks",
    "ProfEvent",
    "ProbeReading",
    "RunObserver",
    "RunHooks",
    "RunResult",
    "SettleCheck",
    "StopSignals",
    "TIMED_STATUSES",
    "Watchdog",
    "build_launcher",
    "check_kernel",
    "check_settled",
    "device_time_from_events",
    "estimate_bytes",
    "estimate_launch_ns",
    "measure_launch_overhead",
    "probe_unavailable_reason",
    "run_burst",
    "run_protocol",
    "run_sustained",
    "stop_signals",
    "summarize_probe_blocks",
    "trend_change",
]
