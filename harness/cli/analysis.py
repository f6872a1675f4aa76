"""`bench compare`, `bench report` and `bench burst`: parse, call the library, render. No logic of their own.

The functions are registered on the `bench` app in `harness.cli`; tests wrap them in a Typer app of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.analysis import (
    BURST_STATUS,
    aggregate_measurements,
    compare_kernels,
    compare_runs,
    explain_comparison,
    parse_kernel_pairs,
    parse_pairs,
    summarize_run,
)
from harness.cli.common_args import (
    EXPORT,
    ISOLATE,
    PROTOCOL,
    RECORD,
    SHAPE,
    SOURCES,
    between_runs_option,
    command_line as _command,
    console as _console,
    export,
    fail as _fail,
    fail_on_slowdown_option,
    nothing_timed,
    reading_runs,
    shape_args,
    split_list,
    stopped,
    unresolved_option,
    with_options,
)
from harness.errors import ConfigError, ExitCode, HarnessError
from harness.report import (
    build_report,
    burst_tables,
    comparison_figures,
    comparison_markdown,
    comparison_tables,
    figures_document,
    gate_figures,
    gate_line,
    provenance,
    run_figures,
    run_observer,
    write_report,
)
from harness.results import read_run, resolve_run
from harness.runner import run_burst
from harness.suite import (
    BURST_DEFAULTS as _BURST,
    RESULTS_ROOT,
    attention_shape,
    burst_config,
    burst_protocol,
    run_device,
    unresolved_policy,
    verdict_rule,
)

__all__ = ["burst", "compare", "report"]

SLOWDOWN_EXIT = int(ExitCode.REGRESSION)  # a slowdown beyond --fail-on-slowdown; bad input exits 2 (common_output.fail)


@with_options(figures=EXPORT)
def compare(
    runs: List[str] = typer.Argument(..., help="run A (baseline) and run B (to judge): run directories, or run ids / "
                                               "--name's under --results; one run with --pair-kernels"),
    figures: dict = None,
    results: Path = typer.Option(RESULTS_ROOT, help="where run names and ids are looked up"),
    pair_inputs: List[str] = typer.Option([], "--pair-inputs", callback=split_list,
                                          help="A_LABEL=B_LABEL (repeatable or comma-separated); default: same labels"),
    pair_kernels: List[str] = typer.Option([], "--pair-kernels", callback=split_list,
                                           help="A_KERNEL=B_KERNEL: kernel B against kernel A within one run, paired by "
                                                "repeat (repeatable or comma-separated)"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("B"),
    unresolved: Optional[str] = unresolved_option(),
    between_runs_cv: Optional[str] = between_runs_option(),
    md: Optional[Path] = typer.Option(None, "--md", help="also write the comparison as Markdown (CI summaries)"),
    allow_incomplete: bool = typer.Option(False, help="compare runs that stopped early"),
) -> None:
    """Same kernels in two runs (or two kernels of one run): time B/A = cycles B/A x clock A/B, limiters, a verdict."""
    with reading_runs("compare", figures) as console:
        pairs, kernel_pairs = parse_pairs(pair_inputs), parse_kernel_pairs(pair_kernels)
        rule, threshold = verdict_rule(fail_on_slowdown, between_runs_cv=between_runs_cv)
        policy = unresolved_policy(unresolved)
        if kernel_pairs:
            if len(runs) != 1 or pairs:
                raise ConfigError("--pair-kernels compares two kernels of ONE run: give one run (and no "
                                  "--pair-inputs); to compare runs, give two runs without it.")
            if between_runs_cv is not None:
                raise ConfigError("--between-runs-cv widens comparisons of two separate runs; --pair-kernels compares "
                                  "two kernels interleaved in one run, which it does not apply to. Leave it out.")
        elif len(runs) != 2:
            raise ConfigError(f"`bench compare` takes two runs, A then B (got {len(runs)}); or one run with "
                              f"--pair-kernels A_KERNEL=B_KERNEL.")
        paths = [resolve_run(r, results=results) for r in runs]
        for text, path in zip(runs, paths):
            if str(path) != text:
                console.print(f"{text}: {path}", highlight=False)
        loaded = [read_run(p) for p in paths]
        if kernel_pairs:
            cmp = compare_kernels(loaded[0], kernel_pairs, rule=rule)
            title = f"kernel B vs kernel A in {loaded[0].info.get('run_id')}"
        else:
            cmp = compare_runs(loaded[0], loaded[1], pairs=pairs, rule=rule, allow_incomplete=allow_incomplete)
            title = f"{cmp.name_b} vs {cmp.name_a}"
        if not cmp.rows:  # a gate that passes on nothing is no gate
            raise ConfigError(
                f"Nothing to compare: no kernel x input was timed on both sides of {' and '.join(runs)} ("
                + ("; ".join(cmp.unmatched) or "nothing was timed") + "). Compare runs of the same "
                "suite, or pair differently labelled inputs with --pair-inputs A_LABEL=B_LABEL.")
        for table in comparison_tables(cmp, title=title):
            console.print(table.to_rich())
        # Two kernels of one run: no run-against-run warnings (it is one run by design, not "the same run twice").
        for line in explain_comparison(cmp, *(() if kernel_pairs else loaded)).lines():  # rows in words, warnings first
            console.print(line, highlight=False, soft_wrap=True)
        if cmp.unmatched:
            console.print("not compared (one side only): " + "; ".join(cmp.unmatched), highlight=False)
        if md is not None:
            md.write_text(comparison_markdown(cmp, threshold=threshold, unresolved=policy), encoding="utf-8")
            console.print(f"markdown: {md}", highlight=False)
        verdict = gate_figures([cmp], threshold=threshold, exit_code_slower=SLOWDOWN_EXIT, unresolved=policy)
        export(console, figures, figures_document(
            command="compare", runs=[provenance(r.info, path=p) for r, p in zip(loaded, paths)],
            tables={"kernels" if kernel_pairs else "comparison": comparison_figures(cmp)}, verdict=verdict))
    line = gate_line(cmp, threshold=threshold, unresolved=policy)
    color = "bold red" if line.startswith("FAIL") else "yellow" if "NOT RESOLVED" in line else "green"
    console.print(f"[{color}]{line}[/]", highlight=False, soft_wrap=True)
    if verdict is not None and verdict["exit_code"]:
        raise typer.Exit(verdict["exit_code"])


@with_options(figures=EXPORT)
def report(
    run: str = typer.Argument(..., help="run directory, or a run id / --name under --results"),
    figures: dict = None,
    results: Path = typer.Option(RESULTS_ROOT, help="where run names and ids are looked up"),
    html: Optional[Path] = typer.Option(None, "--html", help="write one self-contained HTML file here"),
    md: Optional[Path] = typer.Option(None, "--md", help="write the Markdown twin here (figures as PNG beside it)"),
    pair_kernels: List[str] = typer.Option([], "--pair-kernels", callback=split_list,
                                           help="A_KERNEL=B_KERNEL: a section comparing kernel B with kernel A, paired "
                                                "by repeat (repeatable or comma-separated)"),
) -> None:
    """The figures of one run as terminal tables, and optionally an HTML page and its Markdown twin."""
    with reading_runs("report", figures) as console:
        kernel_pairs = parse_kernel_pairs(pair_kernels)
        run = resolve_run(run, results=results)
        loaded = read_run(run)
        rep = build_report(loaded, figures=html is not None or md is not None, kernel_pairs=kernel_pairs)
        console.print(f"[bold]{rep.title}[/]: {rep.header}", highlight=False)
        for section in rep.sections:
            for table in section.tables:
                console.print(table.to_rich())
            if section.text and not section.tables and not section.figures:
                console.print(section.text, highlight=False)
            for point in section.points:  # the rows in words (verdicts, in-model sentences), whole lines
                console.print(point, highlight=False, soft_wrap=True, markup=False)
        for path in write_report(rep, html=html, md=md):
            console.print(f"wrote {path}", highlight=False)
        export(console, figures, run_figures(rep.summary, path=run, read_roof=rep.read_roof))


@with_options(sources=SOURCES, shape=SHAPE, record=RECORD, isolate=ISOLATE)
def burst(
    sources: dict,
    shape: dict,
    record: dict,
    isolate: dict,
    into: Optional[Path] = typer.Option(None, help="append to this run directory (burst next to its sustained rows)"),
    warmup: Optional[int] = typer.Option(None, help=f"warm-up launches (default {_BURST.warmup_launches})"),
    timed: Optional[int] = typer.Option(None, help=f"timed launches (default {_BURST.timed_launches})"),
    repeats: Optional[int] = typer.Option(None, help=f"repeats per kernel x input (default {_BURST.repeats})"),
    idle_s: Optional[float] = typer.Option(None, help=f"idle before each measurement, seconds (default "
                                                      f"{_BURST.idle_s:g})"),
    threads: Optional[int] = PROTOCOL["threads"][1],
) -> None:
    """Kernel-only timing: device time of every kernel a launch dispatches (profiler trace), after a warm-up."""
    console = _console()
    try:
        device = run_device(sources["device"])
        config = burst_config(
            kernels=sources["kernel"], sources=sources["input_"], layout=sources["layout"], gqa=sources["gqa"],
            shape=attention_shape(shape_args(shape), device=device), dtype=shape["dtype"], seed=shape["seed"],
            device=device, telemetry=record["telemetry"], results_dir=record["results"], run_name=record["name"],
            into=into, allow_busy=record["allow_busy"], gate=record["gate"], isolation=isolate["isolation"],
            protocol=burst_protocol(warmup=warmup, timed=timed, repeats=repeats, idle_s=idle_s, threads=threads),
        )
        command = _command()
        result = run_burst(config, observer=run_observer(console), command=command)
    except HarnessError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        raise typer.Exit(stopped(console, exc)) from None
    rows = [r for r in result.measurements if r.get("status") == BURST_STATUS]
    bvs = None
    if into is not None:
        bvs = _burst_vs_sustained(result.path, console)
    for table in burst_tables(aggregate_measurements(rows), bvs=bvs):
        console.print(table.to_rich())
    console.print(f"results: {result.path}")
    nothing_timed(console, result)


def _burst_vs_sustained(path: Path, console):
    """The run's burst vs sustained comparison, or None where polars is missing (GPU images record without it)."""
    try:
        return summarize_run(read_run(path)).burst_vs_sustained
    except ImportError as exc:
        console.print(f"burst vs sustained not shown ({exc}); run `bench report {path}` where polars is installed.")
        return None
