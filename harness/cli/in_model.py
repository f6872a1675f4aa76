"""`bench in-model`: does a kernel's sustained speedup survive inside the model's forward pass?

Parse, build the `InModelJob` through `harness.suite.in_model_job` (every default there), run it
(`harness.runner.run_in_model_job`: the isolated run, the in-model run, the comparison), render. docs/in-model.md
says what is measured and how.
"""

from __future__ import annotations

from typing import Optional

import typer

from harness.analysis import aggregate_repeats
from harness.capture import capture_progress
from harness.cli.common_args import (
    CAPTURE,
    EXPORT,
    PROTOCOL,
    RUN,
    SHAPE,
    SOURCES,
    capture_args,
    command_line,
    export,
    export_console,
    fail,
    shape_args,
    stopped,
    with_options,
)
from harness.errors import ConfigError, ExitCode, HarnessError
from harness.report import (
    figures_document,
    in_model_comparison_figures,
    in_model_comparison_table,
    in_model_figures,
    in_model_table,
    provenance,
    run_observer,
    sustained_figures,
    sustained_tables,
)
from harness.runner import run_in_model_job
from harness.suite import IN_MODEL_PASS_S, in_model_job, run_device

__all__ = ["in_model"]

# The shared option groups, less what a model's forward does not take (synthetic inputs and shapes, controls): the
# help lists only what applies, and each option means what it means in `bench sustained`.
_SOURCES = {k: SOURCES[k] for k in ("kernel", "device", "layout", "gqa")}
_SHAPE = {k: SHAPE[k] for k in ("seq_len", "seq_len_q", "seq_len_kv", "seed")}
_CAPTURE = {k: v for k, v in CAPTURE.items() if k not in ("control", "capture_device", "allow_random_weights")}


@with_options(sources=_SOURCES, shape=_SHAPE, capture=_CAPTURE, protocol=PROTOCOL, run=RUN, figures=EXPORT)
def in_model(
    sources: dict,
    shape: dict,
    capture: dict,
    protocol: dict,
    run: dict,
    figures: dict,
    reference: Optional[str] = typer.Option(None, help="the kernel every ratio is against (default: the first kernel "
                                                       "named, else the device's first SDPA kernel: sdpa-cudnn on "
                                                       "CUDA); timed in the model too"),
    isolated: Optional[str] = typer.Option(None, help="the isolated ratios' run: a run directory, id or --name under "
                                                      "--results (a `bench sustained --model` run of the same model and "
                                                      "windows); none for none (default: time the captured layer "
                                                      "first, the same kernels, no controls)"),
    isolated_input: Optional[str] = typer.Option(None, help="the isolated run's input to compare on (default: its one "
                                                            "captured input)"),
    attention_pass_s: Optional[float] = typer.Option(None, help="the attention pass after each window, seconds: "
                                                                "forwards in pairs, plain and with marks around every "
                                                                f"attention call (default {IN_MODEL_PASS_S[False]:g}; "
                                                                f"--quick {IN_MODEL_PASS_S[True]:g})"),
) -> None:
    """Time a model's forward pass with each kernel in every attention layer, and set each kernel's speedup there
    against its speedup on the captured layer alone."""
    try:
        out = export_console(figures)
        if not capture["model"]:
            raise ConfigError("`bench in-model` needs --model (see `bench list models`; e.g. --model smollm2-135m, or "
                              "--model qwen3-8b --random-weights).")
        with capture_progress(out) as progress:
            job = in_model_job(
                model=capture["model"], kernels=sources["kernel"], reference=reference, device=run_device(sources["device"]),
                shape=shape_args({k: shape[k] for k in ("seq_len", "seq_len_q", "seq_len_kv")}),
                capture=capture_args({"control": None, "capture_device": None, "allow_random_weights": False, **capture}),
                protocol_options=protocol,
                attention_pass_s=attention_pass_s, isolated=isolated, isolated_input=isolated_input,
                results=run["results"], name=run["name"], telemetry=run["telemetry"], launch=run["launch"],
                allow_busy=run["allow_busy"], gate=run["gate"], layout=sources["layout"], gqa=sources["gqa"],
                seed=shape["seed"], progress=progress, on_estimate=lambda e: out.print(e.describe(), highlight=False))
        _run_and_render(job, out, figures)
    except HarnessError as exc:
        fail(exc)


def _run_and_render(job, out, figures: dict) -> None:
    try:
        result = run_in_model_job(job, command=command_line(), observer=run_observer(out),
                                  isolated_observer=run_observer(out),
                                  progress=lambda text: out.print(text, highlight=False, soft_wrap=True))
    except KeyboardInterrupt as exc:
        raise typer.Exit(stopped(out, exc)) from None
    runs, tables = [], {}
    if result.isolated is not None:
        iso = result.isolated
        for table in sustained_tables(aggregate_repeats(iso.measurements), title=f"isolated: {iso.run_id} ({iso.status})"):
            out.print(table)
        runs.append(provenance({**iso.info, "run_id": iso.run_id, "status": iso.status}, path=iso.path))
        tables["sustained"] = sustained_figures(aggregate_repeats(iso.measurements))
    im = result.in_model.run
    title = f"in the model: {result.in_model.workload}, {im.run_id} ({im.status})"
    for table in sustained_tables(aggregate_repeats(im.measurements), title=f"{title}: one forward per launch"):
        if len(table.shown().columns) > 2:  # a forward has no attention FLOPs or bytes: on a CPU nothing else is left
            out.print(table)
    out.print(in_model_table(im.measurements, result.in_model.rows, title=f"{title}: where a forward's time went")
              .to_rich())
    runs.append(provenance({**im.info, "run_id": im.run_id, "status": im.status}, path=im.path))
    tables["in_model"] = in_model_figures(im.measurements, result.in_model.rows)
    if result.rows:
        out.print(in_model_comparison_table(result.rows, title=f"against {result.in_model.reference}: alone and in the "
                                                                f"model").to_rich())
        for row in result.rows:
            out.print(row.sentence, highlight=False, soft_wrap=True, markup=False)
        tables["in_model_comparison"] = in_model_comparison_figures(result.rows)
    else:
        out.print(f"[yellow]no comparison:[/] {result.no_rows}", highlight=False)
    if result.isolated_path is not None:
        out.print(f"isolated run: {result.isolated_path}", highlight=False)
    out.print(f"in-model run: {im.path}", highlight=False)
    export(out, figures, figures_document(command="in-model", runs=runs, tables=tables))
    if im.nothing_timed:
        out.print(f"[bold red]nothing was timed in the model[/] ({im.untimed_summary()}); the reasons are above and in "
                  f"the results.", highlight=False)
        raise typer.Exit(ExitCode.RUN_FAILED)
    if not result.rows:
        raise typer.Exit(ExitCode.UNRESOLVED)
