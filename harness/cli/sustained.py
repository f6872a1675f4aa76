"""`bench sustained`: parse, build the run config through `harness.suite`, run it, render.

`sustained_config_from_args(ARGS)` parses `bench sustained ARGS` into the same RunConfig without running
it: `bench slurm -- ARGS` describes its suite that way, so no option is declared twice.
"""

from __future__ import annotations

from typing import Optional

import typer

from harness.cli.common_args import CAPTURE, EXPORT, HISTORY, ISOLATE, PROTOCOL, RUN, SHAPE, SOURCES, command_line
from harness.cli.common_args import console, fail
from harness.cli.common_args import export, export_console, nothing_timed, protocol_of, stopped, suite_inputs
from harness.cli.common_args import with_options

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
) -> None:
    """Time kernels back to back until the clock settles, then over a window, with telemetry."""
    from harness.errors import ConfigError, HarnessError

    try:
        out = export_console(figures)
        config = _config(out, sources=sources, shape=shape, capture=capture, protocol=protocol, run=run,
                         isolate=isolate)
        if history["night"] is not None and history["history"] is None:
            raise ConfigError("--night labels the night in --history, which was not given. Add --history DIR or drop "
                              "--night.")
        if gpus:
            if history["history"] is not None:
                raise ConfigError("--history appends one run of one GPU as a night; with --gpus, `bench merge` the "
                                  "workers' runs first, or run the nightly suite per GPU.")
            from harness.cli.multigpu import run_multi_and_render

            run_multi_and_render(config, gpus=gpus, replicate=replicate, console=out)
        elif replicate:
            raise ConfigError("--replicate runs the suite on every GPU of --gpus; name them with --gpus.")
        else:
            _run_and_render(config, out, figures, history=history)
    except HarnessError as exc:
        fail(exc)


def _config(out, *, sources, shape, capture, protocol, run, isolate):
    from harness.suite import device_kind, sustained_config

    device = sources["device"]
    device_kind(device)
    proto = protocol_of(protocol)
    inputs = suite_inputs(out, sources=sources, shape=shape, capture=capture)
    from harness.suite import kernel_specs

    kernels = kernel_specs(sources["kernel"], device=device, layout=sources["layout"], gqa=sources["gqa"])
    return sustained_config(kernels=kernels, inputs=inputs, device=device, protocol=proto,
                            telemetry=run["telemetry"], results_dir=run["results"], run_name=run["name"],
                            launch=run["launch"], allow_busy=run["allow_busy"], gate=run["gate"],
                            isolation=isolate["isolation"])


def sustained_config_from_args(args: list[str]):
    """The RunConfig that `bench sustained ARGS` would run, parsed by that command's own options."""
    import click

    from harness.errors import ConfigError

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


def _run_and_render(config, out, figures: dict, history: dict | None = None) -> None:
    from harness.analysis import aggregate_repeats
    from harness.report import figures_document, provenance, run_observer, sustained_figures, sustained_tables
    from harness.runner import run_sustained

    view = run_observer(out)
    try:
        result = run_sustained(config, observer=view, command=command_line())
    except KeyboardInterrupt as exc:
        raise typer.Exit(stopped(out, exc)) from None
    from harness.analysis import Comparison, VerdictRule, input_row_sentence, input_rows, inputs_design, run_caveats
    from harness.analysis import rule_for, two_stage_pilot
    from harness.report import comparison_figures

    aggregates = aggregate_repeats(result.measurements)
    for table in sustained_tables(aggregates, title=f"{result.run_id} ({result.status})"):
        out.print(table)
    rows = input_rows(result.measurements, max_clock_mhz=result.info.get("max_sm_clock_mhz"),
                      caveats=run_caveats(result.info), design=inputs_design(result.info),
                      pilot=two_stage_pilot(result.info))
    rule = rule_for(VerdictRule(), run_caveats(result.info))
    for row in rows:
        out.print(input_row_sentence(row, threshold_source=rule.threshold_source), highlight=False, soft_wrap=True)
    tables = {"sustained": sustained_figures(aggregates)}
    if rows:  # the sentences' rows, verdicts included, for --json / --csv
        tables["inputs"] = comparison_figures(Comparison(name_a="A", name_b="B", rule=rule, rows=tuple(rows)))
    out.print(f"results: {result.path}", highlight=False)
    if history and history["history"] is not None:
        from harness.history import append_runs

        night = append_runs(history["history"], [(result.path, "kernel")], night=history["night"])
        out.print(f"history: {night or 'this run was already in ' + str(history['history'])}", highlight=False)
    export(out, figures, figures_document(command="sustained", runs=[provenance(
        {**result.info, "run_id": result.run_id, "status": result.status}, path=result.path)],
                                          tables=tables))
    nothing_timed(out, result)
