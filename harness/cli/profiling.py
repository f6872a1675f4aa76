"""`bench trace` and `bench peaks`: parse, build a frozen config, call the library, render. No logic of their own.

The functions are registered on the `bench` app in `harness.cli`; tests wrap them in a Typer app of their own.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.common_args import (
    PROTOCOL,
    RECORD,
    command_line as _command,
    console as _console,
    fail as _fail,
    protocol_of,
    split_list,
    with_options,
)
from harness.errors import HarnessError
from harness.profiling import NCU_METRICS, TraceConfig, peak_registry, run_peaks, trace_run
from harness.report import peaks_table, pipe_tables, run_observer
from harness.suite import DEVICE_HELP, RESULTS_ROOT, given_settings, run_device

# The defaults of `bench peaks`' options: peak_registry's and run_peaks' own, quoted by the help texts.
_PEAKS = {k: p.default for k, p in inspect.signature(peak_registry).parameters.items()}
_RUN_PEAKS = {k: p.default for k, p in inspect.signature(run_peaks).parameters.items()}

_PEAKS_PROTOCOL = {k: PROTOCOL[k] for k in ("quick", "repeats", "window_s", "warmin_cap_s", "idle_s")}

__all__ = ["peaks", "trace"]


def trace(
    run: Path = typer.Argument(..., help="a run directory of `bench sustained`: its kernels x inputs are profiled"),
    kernel: List[str] = typer.Option([], "--kernel", "-k", callback=split_list,
                                     help="only these kernels of the run (repeatable or comma-separated; default: all)"),
    kernel_regex: Optional[str] = typer.Option(None, help="keep only profiled CUDA kernels whose name matches"),
    warm_s: Optional[float] = typer.Option(None, help=f"back-to-back warm-in before the profiled launch, seconds "
                                                      f"(default {TraceConfig.warm_s:g})"),
    metrics: Optional[str] = typer.Option(None, help="comma-separated ncu metrics, replacing the default list"),
    ncu: Optional[str] = typer.Option(None, help="the ncu executable (default: ncu on PATH)"),
    device: Optional[str] = typer.Option(None, help="device to profile on (default: the run's)"),
    timeline: bool = typer.Option(False, "--timeline/--no-timeline", help="also a Proton timeline of Triton kernels"),
    timeout_s: Optional[float] = typer.Option(None, help=f"limit per profiled kernel, seconds (default "
                                                         f"{TraceConfig.timeout_s:g})"),
) -> None:
    """Pipe counters of one warm launch per kernel under ncu (clocks as found), stored beside the run."""
    console = _console()
    try:
        config = TraceConfig(
            run_dir=run, kernels=tuple(kernel), kernel_regex=kernel_regex, ncu=ncu, device=device,
            metrics=tuple(m.strip() for m in metrics.split(",") if m.strip()) if metrics else NCU_METRICS,
            timeline=timeline, **given_settings(warm_s=warm_s, timeout_s=timeout_s))
        result = trace_run(config, on_message=lambda text: console.print(text, highlight=False))
    except HarnessError as exc:
        _fail(exc)
    for table in pipe_tables(result.rows, result.gpm):
        console.print(table.to_rich())
    for t in result.timelines:
        if "error" in t:
            console.print(f"[red]timeline {t['kernel']} / {t['input_label']}: {t['error']}[/]", highlight=False)
            continue
        shares = ", ".join(f"{k} {v['share']:.0%}" for k, v in t.get("scopes", {}).items())
        console.print(f"timeline {t['kernel']} / {t['input_label']}: {t.get('png')} ({shares or 'no scopes'})",
                      highlight=False)
    console.print(f"traces: {run / 'traces'} ({len(result.paths)} part file(s) added)")


@with_options(protocol=_PEAKS_PROTOCOL)
def peaks(
    protocol: dict,
    kernel: List[str] = typer.Option([], "--kernel", "-k", callback=split_list,
                                     help="peak kernels (repeatable or comma-separated; default: all; see --list)"),
    list_: bool = typer.Option(False, "--list", help="list the peak kernels and exit"),
    device: Optional[str] = typer.Option(None, help=DEVICE_HELP),
    telemetry: Optional[str] = RECORD["telemetry"][1],
    results: Optional[Path] = typer.Option(None, help=f"results root directory (the peaks run goes here; default "
                                                      f"{RESULTS_ROOT})"),
    name: Optional[str] = typer.Option(None, help=f"a name for the run id (default {_RUN_PEAKS['run_name']})"),
    into: List[Path] = typer.Option([], help="also store the peaks in this run (repeatable), so its report draws the "
                                             "roofline and sets its GB/s against the read roof"),
    gemm_size: Optional[int] = typer.Option(None, help=f"M = N = K of the GEMM peaks (default {_PEAKS['gemm_size']})"),
    copy_mib: Optional[int] = typer.Option(None, help=f"bytes copied per launch of the copy peak, MiB (default "
                                                      f"{_PEAKS['copy_bytes'] >> 20})"),
    read_mib: Optional[int] = typer.Option(None, help=f"bytes read per launch of the read-stream peak, MiB (default "
                                                      f"{_PEAKS['read_bytes'] >> 20})"),
    write_mib: Optional[int] = typer.Option(None, help=f"bytes written per launch of the write-stream peak, MiB "
                                                       f"(default {_PEAKS['write_bytes'] >> 20})"),
    fp8_fast_accum: bool = typer.Option(False, "--fp8-fast-accum/--no-fp8-fast-accum",
                                        help="cuBLASLt fast accumulation for the fp8 GEMMs"),
    allow_busy: bool = RECORD["allow_busy"][1],
) -> None:
    """Empirical peaks under the sustained protocol: GEMMs by operand, FMA, exp2 (MUFU), read/write/copy streams, each
    also timed by a second method; the roofs."""
    console = _console()
    try:
        mib = {k: None if v is None else v << 20 for k, v in (("copy_bytes", copy_mib), ("read_bytes", read_mib),
                                                               ("write_bytes", write_mib))}
        registry = peak_registry(fp8_fast_accum=fp8_fast_accum, **given_settings(gemm_size=gemm_size, **mib))
        if list_:
            for k in registry:
                console.print(f"{k.name:24} {k.extra['unit']:5} {k.description}", highlight=False)
            return
        command = _command()
        result = run_peaks(kernels=tuple(kernel), device=run_device(device), protocol=protocol_of(protocol),
                           registry=registry, into=list(into), allow_busy=allow_busy, observer=run_observer(console),
                           command=command, **given_settings(telemetry=telemetry, results_dir=results, run_name=name))
    except HarnessError as exc:
        _fail(exc)
    for k, why in result.skipped.items():
        console.print(f"skipped {k}: {why}", highlight=False)
    console.print(peaks_table(result.rows).to_rich())
    for path in result.written:
        console.print(f"peaks: {path}")
    console.print(f"run: {result.run.path} (`bench report {result.run.path} --html peaks.html` draws the roofline)")
