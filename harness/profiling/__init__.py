"""Profiling: pipe counters (ncu), AMD kernel and thread traces (rocprofv3), Proton intra-kernel timelines,
and empirical peaks with their roofline.

Nothing here imports torch, triton, pyarrow or matplotlib until a function needs it. Profiling tables are
stored beside a run (`<run>/traces/`, `<run>/peaks/`) with a schema of their own (`_store`), so the
results schema is unchanged.

>>> from harness.profiling import ncu_command
>>> ncu_command(target=["python", "-c", "pass"])[:5]
['ncu', '--clock-control', 'none', '--profile-from-start', 'off']
"""

from harness.profiling._errors import (
    CountersUnavailable,
    NothingProfiled,
    ProfilerError,
    ProfilerMissing,
    TraceFormatError,
)
from harness.profiling._ncu import (
    NCU_METRICS,
    NcuKernel,
    PipeCycles,
    check_ncu_output,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
    pipe_cycles,
)
from harness.profiling._peaks import (
    OPERANDS,
    PeakShape,
    PeaksResult,
    peak_input_spec,
    peak_registry,
    peak_rows,
    run_peaks,
    stream_bytes,
    stream_kernel,
)
from harness.profiling._proton import (
    ScopeEvent,
    parse_proton_trace,
    record_proton_trace,
    scope_summary,
    timeline_png,
)
from harness.profiling._rocprof import (
    ATT_CATEGORIES,
    ATT_WAVE_STATES,
    AttCycles,
    AttDispatch,
    KernelDispatch,
    att_command,
    att_stats_cycles,
    att_wave_cycles,
    instruction_class,
    kernel_trace_command,
    parse_kernel_trace_csv,
    read_att_dir,
)
from harness.profiling._roofs import (
    DISAGREE_FRAC,
    Roof,
    RooflinePoint,
    attach_peaks,
    check_disagreement,
    peaks_read_roof,
    read_roof,
    roofs_from_peaks,
    run_read_roof,
)
from harness.profiling._store import (
    TRACE_TABLES,
    read_trace_table,
    write_trace_table,
)
from harness.profiling._trace import (
    TraceConfig,
    TraceResult,
    TraceTarget,
    gpm_medians,
    run_targets,
    trace_run,
)

__all__ = [
    "ATT_CATEGORIES",
    "ATT_WAVE_STATES",
    "NCU_METRICS",
    "OPERANDS",
    "TRACE_TABLES",
    "AttCycles",
    "AttDispatch",
    "CountersUnavailable",
    "KernelDispatch",
    "NcuKernel",
    "NothingProfiled",
    "PeakShape",
    "PeaksResult",
    "PipeCycles",
    "ProfilerError",
    "ProfilerMissing",
    "Roof",
    "RooflinePoint",
    "ScopeEvent",
    "TraceConfig",
    "TraceFormatError",
    "TraceResult",
    "TraceTarget",
    "att_command",
    "att_stats_cycles",
    "att_wave_cycles",
    "check_ncu_output",
    "find_ncu",
    "gpm_medians",
    "instruction_class",
    "kernel_trace_command",
    "ncu_command",
    "parse_kernel_trace_csv",
    "parse_ncu_csv",
    "parse_proton_trace",
    "peak_input_spec",
    "peak_registry",
    "peak_rows",
    "pipe_cycles",
    "read_att_dir",
    "read_trace_table",
    "record_proton_trace",
    "roofs_from_peaks",
    "read_roof",
    "run_read_roof",
    "attach_peaks",
    "peaks_read_roof",
    "check_disagreement",
    "DISAGREE_FRAC",
    "stream_bytes",
    "stream_kernel",
    "run_peaks",
    "run_targets",
    "scope_summary",
    "timeline_png",
    "trace_run",
    "write_trace_table",
]
