"""`bench compare`, `bench report` and `bench burst`: parse, call the library, render. No logic of their own.

The functions are registered on the `bench` app in `harness.cli`; tests wrap them in a Typer app of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.common_args import EXPORT, ISOLATE, RECORD, SHAPE, SOURCES, export, reading_runs, split_list
from harness.cli.common_args import command_line as _command, console as _console, fail as _fail, with_options
from harness.cli.common_args import nothing_timed, stopped
from harness.errors import ExitCode

__all__ = ["burst", "compare", "report"]

SLOWDOWN_EXIT = int(ExitCode.REGRESSION)  # a slowdown beyond --fail-on-slowdown; bad input exits 2 (common_args.fail)


@with_options(figures=EXPORT)
def compare(
    run_a: Path = typer.Argument(..., help="baseline run directory (A)"),
    run_b: Path = typer.Argument(..., help="run directory to judge (B)"),
    figures: dict = None,
    pair_inputs: List[str] = typer.Option([], "--pair-inputs", callback=split_list,
                                          help="A_LABEL=B_LABEL (repeatable or comma-separated); default: same labels"),
    fail_on_slowdown: Optional[str] = typer.Option(None, help="exit 1 when B is slower by more than this, e.g. 2% "
                                                              "(default: no check, exit 0)"),
    md: Optional[Path] = typer.Option(None, "--md", help="also write the comparison as Markdown (CI summaries)"),
    allow_incomplete: bool = typer.Option(False, help="compare runs that stopped early"),
    seed: int = typer.Option(0, help="bootstrap seed"),
) -> None:
    """Same kernels in two runs: time B/A = cycles B/A x clock A/B, limiters, and a verdict per kernel x input."""
    with reading_runs("compare", figures) as console:
        from harness.analysis import VerdictRule, compare_runs, explain_comparison, parse_pairs, parse_threshold
        from harness.report import comparison_figures, comparison_markdown, comparison_tables, figures_document
        from harness.report import provenance
        from harness.results import read_run

        pairs = parse_pairs(pair_inputs)
        threshold = parse_threshold(fail_on_slowdown) if fail_on_slowdown is not None else None
        a, b = read_run(run_a), read_run(run_b)
        cmp = compare_runs(a, b, pairs=pairs, rule=VerdictRule(seed=seed), allow_incomplete=allow_incomplete)
        if not cmp.rows:  # a gate that passes on nothing is no gate
            from harness.errors import ConfigError

            raise ConfigError(
                f"Nothing to compare: no kernel x input was timed in both {run_a} and {run_b} ("
                + ("; ".join(cmp.unmatched) or "neither run timed anything") + "). Compare runs of the same "
                "suite, or pair differently labelled inputs with --pair-inputs A_LABEL=B_LABEL.")
        for table in comparison_tables(cmp, title=f"{cmp.name_b} vs {cmp.name_a}"):
            console.print(table.to_rich())
        for line in explain_comparison(cmp, a, b).lines():  # the rows in words, warnings first
            console.print(line, highlight=False, soft_wrap=True)
        if cmp.unmatched:
            console.print("not compared (one side only): " + "; ".join(cmp.unmatched), highlight=False)
        if md is not None:
            md.write_text(comparison_markdown(cmp, threshold=threshold), encoding="utf-8")
            console.print(f"markdown: {md}", highlight=False)
        slow = cmp.slowdowns(threshold) if threshold is not None else ()
        verdict = None if threshold is None else {
            "verdict": "fail" if slow else "pass", "exit_code": SLOWDOWN_EXIT if slow else 0, "threshold_frac": threshold,
            "slower": [f"{r.kernel} @ {r.input_b}" for r in slow]}
        export(console, figures, figures_document(
            command="compare", runs=[provenance(a.info, path=run_a), provenance(b.info, path=run_b)],
            tables={"comparison": comparison_figures(cmp)}, verdict=verdict))
    if slow:
        console.print(f"[bold red]slower beyond {threshold:.1%}:[/] " + "; ".join(
            f"{r.kernel} on {r.input_b} {r.time.change:+.2%}" for r in slow), highlight=False)
        raise typer.Exit(SLOWDOWN_EXIT)


@with_options(figures=EXPORT)
def report(
    run: Path = typer.Argument(..., help="run directory"),
    figures: dict = None,
    html: Optional[Path] = typer.Option(None, "--html", help="write one self-contained HTML file here"),
    md: Optional[Path] = typer.Option(None, "--md", help="write the Markdown twin here (figures as PNG beside it)"),
    seed: int = typer.Option(0, help="bootstrap seed"),
) -> None:
    """The figures of one run as terminal tables, and optionally an HTML page and its Markdown twin."""
    with reading_runs("report", figures) as console:
        from harness.analysis import VerdictRule
        from harness.report import build_report, run_figures, write_report
        from harness.results import read_run

        loaded = read_run(run)
        rep = build_report(loaded, rule=VerdictRule(seed=seed), figures=html is not None or md is not None)
        console.print(f"[bold]{rep.title}[/]: {rep.header}", highlight=False)
        for section in rep.sections:
            for table in section.tables:
                console.print(table.to_rich())
            if section.text and not section.tables and not section.figures:
                console.print(section.text, highlight=False)
        for path in write_report(rep, html=html, md=md):
            console.print(f"wrote {path}", highlight=False)
        export(console, figures, run_figures(rep.summary, path=run))


@with_options(sources=SOURCES, shape=SHAPE, record=RECORD, isolate=ISOLATE)
def burst(
    sources: dict,
    shape: dict,
    record: dict,
    isolate: dict,
    into: Optional[Path] = typer.Option(None, help="append to this run directory (burst next to its sustained rows)"),
    warmup: int = typer.Option(500, help="warm-up launches"),
    timed: int = typer.Option(100, help="timed launches"),
    repeats: int = typer.Option(3, help="repeats per kernel x input"),
    idle_s: float = typer.Option(2.0, help="idle before each measurement, seconds"),
) -> None:
    """Kernel-only timing: device time of every kernel a launch dispatches (profiler trace), after a warm-up."""
    from harness.analysis import BURST_STATUS, aggregate_measurements
    from harness.cli.common_args import shape_args
    from harness.errors import HarnessError
    from harness.report import burst_tables, run_observer
    from harness.runner import BurstConfig, BurstProtocol, run_burst
    from harness.suite import BURST_INPUTS, attention_shape, kernel_specs, synthetic_specs

    console = _console()
    try:
        device = sources["device"]
        dims = attention_shape(shape_args(shape), device=device)
        config = BurstConfig(
            kernels=kernel_specs(sources["kernel"], device=device, layout=sources["layout"], gqa=sources["gqa"]),
            inputs=synthetic_specs(sources["input_"] or BURST_INPUTS, shape=dims, dtype=shape["dtype"],
                                   seed=shape["seed"]),
            device=device, telemetry=record["telemetry"], results_dir=record["results"], run_name=record["name"],
            into=into, allow_busy=record["allow_busy"], gate=record["gate"], isolation=isolate["isolation"],
            protocol=BurstProtocol(warmup_launches=warmup, timed_launches=timed, repeats=repeats, idle_s=idle_s),
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
        from harness.analysis import summarize_run
        from harness.results import read_run

        return summarize_run(read_run(path)).burst_vs_sustained
    except ImportError as exc:
        console.print(f"burst vs sustained not shown ({exc}); run `bench report {path}` where polars is installed.")
        return None
