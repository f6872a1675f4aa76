"""`bench sustained`: parse, build the run config through `harness.suite`, run it, render.

`sustained_config_from_args(ARGS)` parses `bench sustained ARGS` into the same RunConfig without running
it: `bench slurm -- ARGS` describes its suite that way, so no option is declared twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click
import typer

from harness.analysis import (
    Comparison,
    VerdictRule,
    aggregate_repeats,
    comparison_pilot,
    input_row_sentence,
    input_rows,
    inputs_design,
    rule_for,
    run_caveats,
)
from harness.cli.common_args import (
    CAPTURE,
    EXPORT,
    HISTORY,
    ISOLATE,
    PROTOCOL,
    RUN,
    SHAPE,
    SOURCES,
    command_line,
    console,
    export,
    export_console,
    fail,
    nothing_timed,
    protocol_of,
    stopped,
    suite_inputs,
    with_options,
)
from harness.cli.multigpu_output import run_multi_and_render
from harness.errors import ConfigError, HarnessError
from harness.history import append_runs
from harness.profiling import attach_peaks, peaks_read_roof
from harness.report import (
    comparison_figures,
    figures_document,
    provenance,
    run_observer,
    sustained_figures,
    sustained_tables,
)
from harness.runner import run_sustained
from harness.suite import kernel_specs, run_device, sustained_config, workload_kernels

__all__ = ["sustained", "sustained_config_from_args", "MULTI_GPU_OPTIONS"]

MULTI_GPU_OPTIONS = ("--gpus", "--replicate")


@with_options(sources=SOURCES, shape=SHAPE, capture=CAPTURE, protocol=PROTOCOL, run=RUN, isolate=ISOLATE,
              history=HISTORY, figures=EXPORT)
def sustained(
    sources: dict,
    shape: dict,
    capture: dict,
    protocol: dict,
    run: dict,
    isolate: dict,
    history: dict,
    figures: dict,
    gpus: Optional[str] = typer.Option(None, help="all, indices (0,2) or PCI bus ids: one worker process per GPU "
                                                  "(instead of --device)"),
    replicate: bool = typer.Option(False, help="with --gpus: the whole suite on every GPU, to measure the spread "
                                               "between GPUs"),
    peaks: Optional[Path] = typer.Option(None, help="a run of `bench peaks`: its roofs are stored with this run (the "
                                                    "report draws the roofline) and the tables set GB/s against its "
                                                    "read roof"),
) -> None:
    """Time kernels back to back until the clock settles, then over a window, with telemetry."""
    try:
        out = export_console(figures)
        config = _config(out, sources=sources, shape=shape, capture=capture, protocol=protocol, run=run,
                         isolate=isolate)
        if history["night"] is not None and history["history"] is None:
            raise ConfigError("--night labels the night in --history, which was not given. Add --history DIR or drop "
                              "--night.")
        if not sources["kernel"]:  # say which kernels the run chose, and why, before it starts
            chosen, why = workload_kernels(config.device, [i.shape for i in config.inputs])
            out.print(f"kernels: {', '.join(chosen)} ({why}; name others with -k)", highlight=False, soft_wrap=True)
        if peaks is not None:
            if gpus:
                raise ConfigError("--peaks stores one GPU's roofs with one run; with --gpus, store them into each "
                                  "worker's run afterwards: bench peaks --into RUN (repeatable).")
            peaks_read_roof(peaks)  # refused here, before anything runs
        if gpus:
            if history["history"] is not None:
                raise ConfigError("--history appends one run of one GPU as a night; with --gpus, `bench merge` the "
                                  "workers' runs first, or run the nightly suite per GPU.")
            run_multi_and_render(config, gpus=gpus, replicate=replicate, console=out)
        elif replicate:
            raise ConfigError("--replicate runs the suite on every GPU of --gpus; name them with --gpus.")
        else:
            _run_and_render(config, out, figures, peaks=peaks, history=history)
    except HarnessError as exc:
        fail(exc)


def _config(out, *, sources, shape, capture, protocol, run, isolate):
    device = run_device(sources["device"])
    proto = protocol_of(protocol)
    inputs = suite_inputs(out, sources=sources, shape=shape, capture=capture)
    kernels = kernel_specs(sources["kernel"], device=device, layout=sources["layout"], gqa=sources["gqa"],
                           shapes=[i.shape for i in inputs])
    return sustained_config(kernels=kernels, inputs=inputs, device=device, protocol=proto,
                            telemetry=run["telemetry"], results_dir=run["results"], run_name=run["name"],
                            launch=run["launch"], allow_busy=run["allow_busy"], gate=run["gate"],
                            isolation=isolate["isolation"])


def sustained_config_from_args(args: list[str]):
    """The RunConfig that `bench sustained ARGS` would run, parsed by that command's own options."""
    clash = sorted({a.split("=")[0] for a in args} & set(MULTI_GPU_OPTIONS))
    if clash:  # a task measures one GPU; how the suite spreads is `bench slurm`'s --per / --tasks / --replicate
        raise ConfigError(f"{', '.join(clash)} cannot be given to each task: use `bench slurm --per gpu --tasks N "
                          f"[--replicate]` to spread the suite over GPUs.")
    app = typer.Typer(add_completion=False)
    app.command("sustained")(_parse_only)
    try:
        ctx = typer.main.get_command(app).make_context("bench sustained", list(args))
    except click.exceptions.Exit as exc:  # --help
        raise typer.Exit(exc.exit_code) from None
    except click.ClickException as exc:
        raise ConfigError(f"bench sustained options after `--`: {exc.format_message()}") from None
    return ctx.invoke(ctx.command.callback, **ctx.params)


@with_options(sources=SOURCES, shape=SHAPE, capture=CAPTURE, protocol=PROTOCOL, run=RUN, isolate=ISOLATE)
def _parse_only(sources: dict, shape: dict, capture: dict, protocol: dict, run: dict, isolate: dict):
    return _config(console(), sources=sources, shape=shape, capture=capture, protocol=protocol, run=run,
                   isolate=isolate)


def _run_and_render(config, out, figures: dict, *, peaks=None, history: dict | None = None) -> None:
    view = run_observer(out)
    try:
        result = run_sustained(config, observer=view, command=command_line())
    except KeyboardInterrupt as exc:
        raise typer.Exit(stopped(out, exc)) from None
    aggregates = aggregate_repeats(result.measurements)
    read_roof = None
    if peaks is not None:
        read_roof = attach_peaks(result.path, peaks)
    for table in sustained_tables(aggregates, title=f"{result.run_id} ({result.status})", read_roof=read_roof):
        out.print(table)
    rows = input_rows(result.measurements, max_clock_mhz=result.info.get("max_sm_clock_mhz"),
                      caveats=run_caveats(result.info), design=inputs_design(result.info),
                      pilot=comparison_pilot(result.info, inputs_design(result.info)))
    rule = rule_for(VerdictRule(), run_caveats(result.info))
    for row in rows:
        out.print(input_row_sentence(row, threshold_source=rule.threshold_source), highlight=False, soft_wrap=True)
    tables = {"sustained": sustained_figures(aggregates, read_roof=read_roof)}
    if rows:  # the sentences' rows, verdicts included, for --json / --csv
        tables["inputs"] = comparison_figures(Comparison(name_a="A", name_b="B", rule=rule, rows=tuple(rows)))
    out.print(f"results: {result.path}", highlight=False)
    if history and history["history"] is not None:
        night = append_runs(history["history"], [(result.path, "kernel")], night=history["night"])
        out.print(f"history: {night or 'this run was already in ' + str(history['history'])}", highlight=False)
    export(out, figures, figures_document(command="sustained", runs=[provenance(
        {**result.info, "run_id": result.run_id, "status": result.status}, path=result.path)],
                                          tables=tables))
    nothing_timed(out, result)
