"""`bench trace` and `bench peaks`: parse, build a frozen config, call the library, render. No logic of their own.

The functions are registered on the `bench` app in `harness.cli`; tests wrap them in a Typer app of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.common_args import PROTOCOL, RECORD, command_line as _command, console as _console, fail as _fail
from harness.cli.common_args import protocol_of, split_list, with_options
from harness.suite import DEVICE_HELP, RESULTS_ROOT

_PEAKS_PROTOCOL = {k: PROTOCOL[k] for k in ("quick", "repeats", "window_s", "warmin_cap_s", "idle_s")}

__all__ = ["peaks", "trace"]


def trace(
    run: Path = typer.Argument(..., help="a run directory of `bench sustained`: its kernels x inputs are profiled"),
    kernel: List[str] = typer.Option([], "--kernel", "-k", callback=split_list,
                                     help="only these kernels of the run (repeatable or comma-separated; default: all)"),
    kernel_regex: Optional[str] = typer.Option(None, help="keep only profiled CUDA kernels whose name matches"),
    warm_s: float = typer.Option(8.0, help="back-to-back warm-in before the profiled launch, seconds"),
    metrics: Optional[str] = typer.Option(None, help="comma-separated ncu metrics, replacing the default list"),
    ncu: Optional[str] = typer.Option(None, help="the ncu executable (default: ncu on PATH)"),
    device: Optional[str] = typer.Option(None, help="device to profile on (default: the run's)"),
    timeline: bool = typer.Option(False, "--timeline/--no-timeline", help="also a Proton timeline of Triton kernels"),
    timeout_s: float = typer.Option(900.0, help="limit per profiled kernel, seconds"),
) -> None:
    """Pipe counters of one warm launch per kernel under ncu (clocks as found), stored beside the run."""
    from harness.errors import HarnessError
    from harness.profiling import NCU_METRICS, TraceConfig, trace_run
    from harness.report import pipe_tables

    console = _console()
    try:
        config = TraceConfig(
            run_dir=run, kernels=tuple(kernel), kernel_regex=kernel_regex, warm_s=warm_s, ncu=ncu, device=device,
            metrics=tuple(m.strip() for m in metrics.split(",") if m.strip()) if metrics else NCU_METRICS,
            timeline=timeline, timeout_s=timeout_s)
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
    telemetry: str = typer.Option("auto", help="auto (the device's own), nvml, none"),
    results: Path = typer.Option(RESULTS_ROOT, help="results root directory (the peaks run goes here)"),
    name: str = typer.Option("peaks", help="a name for the run id"),
    into: List[Path] = typer.Option([], help="also store the peaks in this run (repeatable), so its report draws the "
                                             "roofline and sets its GB/s against the read roof"),
    gemm_size: int = typer.Option(8192, help="M = N = K of the GEMM peaks"),
    copy_mib: int = typer.Option(1024, help="bytes copied per launch of the copy peak, MiB"),
    read_mib: int = typer.Option(2048, help="bytes read per launch of the read-stream peak, MiB"),
    write_mib: int = typer.Option(1024, help="bytes written per launch of the write-stream peak, MiB"),
    fp8_fast_accum: bool = typer.Option(False, "--fp8-fast-accum/--no-fp8-fast-accum",
                                        help="cuBLASLt fast accumulation for the fp8 GEMMs"),
    allow_busy: bool = RECORD["allow_busy"][1],
) -> None:
    """Empirical peaks under the sustained protocol: GEMMs by operand, FMA, exp2 (MUFU), read/write/copy streams, each
    also timed by a second method; the roofs."""
    from harness.errors import HarnessError
    from harness.profiling import peak_registry, run_peaks
    from harness.report import peaks_table, run_observer
    from harness.suite import run_device

    console = _console()
    try:
        registry = peak_registry(gemm_size=gemm_size, copy_bytes=copy_mib << 20, read_bytes=read_mib << 20,
                                 write_bytes=write_mib << 20, fp8_fast_accum=fp8_fast_accum)
        if list_:
            for k in registry:
                console.print(f"{k.name:24} {k.extra['unit']:5} {k.description}", highlight=False)
            return
        command = _command()
        result = run_peaks(kernels=tuple(kernel), device=run_device(device), telemetry=telemetry, protocol=protocol_of(protocol),
                           results_dir=results, run_name=name, registry=registry, into=list(into), allow_busy=allow_busy,
                           observer=run_observer(console), command=command)
    except HarnessError as exc:
        _fail(exc)
    for k, why in result.skipped.items():
        console.print(f"skipped {k}: {why}", highlight=False)
    console.print(peaks_table(result.rows).to_rich())
    for path in result.written:
        console.print(f"peaks: {path}")
    console.print(f"run: {result.run.path} (`bench report {result.run.path} --html peaks.html` draws the roofline)")
