"""`bench commits` and `bench nightly`: parse, build a frozen config, call harness.commits, render.

Registered on the main app in harness/cli; `python -m harness.cli nightly ...` runs the same commands
without the console script (ci/nightly.sh calls it that way, so it works with any PATH).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from harness.cli.common_args import CAPTURE, EXPORT, PROTOCOL, RUN, SHAPE, SOURCES, capture_args, export, export_console
from harness.cli.common_args import command_line as _command, fail as _fail, protocol_of, shape_args, split_list
from harness.cli.common_args import split_sizes
from harness.cli.common_args import fail_on_slowdown_option, reading_runs, renamed_option, with_options
from harness.errors import ExitCode
from harness.suite import NIGHTLY_FAIL_ON_SLOWDOWN, NIGHTLY_RESULTS

_COMMITS_PROTOCOL = {k: PROTOCOL[k] for k in ("quick", "window_s", "idle_s")}

__all__ = ["commits", "nightly"]


@with_options(shape=SHAPE, protocol=_COMMITS_PROTOCOL, run=RUN, figures=EXPORT)
def commits(
    revisions: List[str] = typer.Argument(..., help="two or more revisions (branch, tag, sha, HEAD~1); the first is the base"),
    shape: dict = None,
    protocol: dict = None,
    run: dict = None,
    figures: dict = None,
    repo: Path = typer.Option(Path("."), "--repo", help="the git repository whose kernels are compared"),
    kernel: str = typer.Option(..., "--kernel", "-k", help="kernel name (registered by the repo's harness.kernels "
                                                           "entry point), module:function or file.py:function"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("a revision"),
    device: str = typer.Option("cuda:0", help="cpu, cuda:N or cuda:<PCI bus id>: one device for every revision"),
    allow_dirty: bool = typer.Option(False, help="go ahead with uncommitted changes in --repo (recorded; they are not measured)"),
    input_: Optional[List[str]] = typer.Option(None, "--input", "-i", callback=split_list,
                                               help="input source, identical for every revision (default gaussian:0.1; "
                                                    "one per run: the same flag as `bench sustained`'s list, refused "
                                                    "with more than one)"),
    layout: Optional[str] = SOURCES["layout"][1],
    gqa: Optional[str] = SOURCES["gqa"][1],
    repeats: Optional[int] = typer.Option(None, help="interleaved repeats per revision (default 3; --quick 2); with "
                                                     "--until-ci the pilot (default 5)"),
    until_ci: Optional[str] = typer.Option(None, "--until-ci", help="add interleaved repeats (Stein's two-stage rule) "
                                                                   "until the interval's half-width is at most this, "
                                                                   "e.g. 0.25%, or off (default: the verdict's "
                                                                   "threshold; off with --quick)"),
    max_repeats: Optional[int] = typer.Option(None, help="cap on interleaved repeats per revision under --until-ci "
                                                         "(default 10)"),
    max_time_s: Optional[float] = typer.Option(None, help="under --until-ci, begin no pair after the pilot that would "
                                                           "end past this many seconds of timing (imports, compiles "
                                                           "and gates not counted; default: no limit)"),
    md: Optional[Path] = typer.Option(None, "--md", help="also write the comparison as Markdown here (CI summaries)"),
    summary: Optional[Path] = typer.Option(None, "--summary", hidden=True, help="the old name of --md"),
) -> None:
    """Compare a kernel across revisions: a worktree and a process per revision, repeats interleaved A B A B."""
    from harness.commits import CommitsConfig, commits_gate_line, commits_lines, commits_markdown, commits_table
    from harness.commits import compare_commits
    from harness.errors import ConfigError, HarnessError
    from harness.report import commits_figures, figures_document, gate_figures
    from harness.config import check_launch
    from harness.suite import COMMITS_INPUT, attention_shape, kernel_specs, synthetic_specs
    from harness.suite import until_ci as until_ci_of, verdict_rule

    try:
        console = export_console(figures)
        md = renamed_option("--summary", "--md", summary, md, warn=_warn)
        rule, threshold = verdict_rule(fail_on_slowdown)
        target = until_ci_of(until_ci, default=None if protocol["quick"] else rule.threshold)
        if input_ and len(input_) > 1:
            raise ConfigError(f"--input: `bench commits` times every revision on one input, and got {len(input_)} "
                              f"({', '.join(input_)}). Give one -i per `bench commits` run.")
        (kernel,) = kernel_specs([kernel], device=device, layout=layout, gqa=gqa)
        check_launch(run["launch"], device)
        dims = attention_shape(shape_args(shape), device=device)
        (spec,) = synthetic_specs(input_ or [COMMITS_INPUT], shape=dims, dtype=shape["dtype"], seed=shape["seed"])
        if run["name"] is not None:
            raise ConfigError("--name: `bench commits` names each revision's run after the revision; leave --name out.")
        config = CommitsConfig(
            repo=repo, kernel=kernel, revisions=tuple(revisions), input=spec, device=device,
            telemetry=run["telemetry"], protocol=protocol_of({**protocol, "repeats": repeats, "until_ci": target,
                                                              "max_repeats": max_repeats}),
            results_dir=run["results"], launch=run["launch"], gate=run["gate"], allow_dirty=allow_dirty,
            allow_busy=run["allow_busy"], rule=rule, max_time_s=max_time_s,
        )
        result = compare_commits(config, on_message=lambda text: console.print(f"[dim]{escape(text)}[/]", highlight=False),
                                 command=_command())
        runs, rows = commits_figures(result)
        verdict = gate_figures([c.comparison for c in result.comparisons], threshold=threshold,
                               exit_code_slower=int(ExitCode.REGRESSION))
        export(console, figures, figures_document(command="commits", runs=runs, tables={"revisions": rows},
                                                  verdict=verdict))
    except HarnessError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP as harness.commits.Terminated
        console.print(f"[yellow]bench commits {exc or 'interrupted'}[/]", highlight=False)
        raise typer.Exit(128 + (signal.Signals[exc.signal] if hasattr(exc, "signal") else signal.SIGINT)) from None
    console.print(commits_table(result).to_rich())
    for line in commits_lines(result):
        console.print(line, highlight=False, soft_wrap=True)
    if result.dirty_files:
        console.print(f"[yellow]--allow-dirty: uncommitted changes to {', '.join(result.dirty_files)} were not measured.[/]")
    for run in result.runs:
        console.print(f"results {run.revision.describe()}: {run.run_dir}", highlight=False)
    if md is not None:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(commits_markdown(result, threshold=threshold), encoding="utf-8")
        console.print(f"markdown: {md}", highlight=False)
    line = commits_gate_line(result, threshold=threshold)
    color = "bold red" if line.startswith("FAIL") else "yellow" if "NOT RESOLVED" in line else "green"
    console.print(f"[{color}]{line}[/]", highlight=False, soft_wrap=True)
    if verdict is not None and verdict["exit_code"]:
        raise typer.Exit(verdict["exit_code"])


def _warn(text: str) -> None:
    from harness.cli.common_args import console as _console

    _console(stderr=True).print(f"[yellow]warning:[/] {text}", highlight=False)


@with_options(capture=CAPTURE, figures=EXPORT)
def nightly(
    capture: dict,
    figures: dict,
    device: str = typer.Option("cuda:0", help="cpu (a dry run), cuda:N or cuda:<PCI bus id>"),
    results: Optional[Path] = typer.Option(None, "--results", help="summary.md, report.html, verdict.json and runs/ "
                                                                   f"go here (default {NIGHTLY_RESULTS})"),
    out: Optional[Path] = typer.Option(None, "--out", hidden=True, help="the old name of --results"),
    baseline: Path = typer.Option(Path("baseline"), help="where the baseline run is stored (a folder that persists between nights)"),
    update_baseline: bool = typer.Option(False, help="store tonight's run as the baseline (only when asked for)"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("a kernel x input", default=NIGHTLY_FAIL_ON_SLOWDOWN),
    kernel: List[str] = SOURCES["kernel"][1],
    layout: Optional[str] = SOURCES["layout"][1],
    gqa: Optional[str] = SOURCES["gqa"][1],
    heads: Optional[List[str]] = typer.Option(None, callback=split_sizes, help="Hq of the synthetic inputs (default 32)"),
    heads_kv: Optional[List[str]] = typer.Option(None, callback=split_sizes,
                                                 help="Hkv of the synthetic inputs (default 8; with --heads alone: Hq)"),
    repeats: Optional[int] = PROTOCOL["repeats"][1],
    capture_file: List[Path] = typer.Option([], "--capture", help="a capture layer file (repeatable), timed with its controls"),
    input_: Optional[List[str]] = typer.Option(None, "--input", "-i", callback=split_list,
                                               help="synthetic inputs when no capture is given (repeatable or "
                                                    "comma-separated; default gaussian:0.1 and gaussian:1, 32/8 heads)"),
    seq_len: Optional[int] = typer.Option(None, help="S (default 16384 on a GPU; 1024 on the CPU)"),
    dtype: str = SHAPE["dtype"][1],
    quick: bool = typer.Option(False, help="short protocol (the CPU dry run)"),
    until_ci: Optional[str] = typer.Option(None, "--until-ci", help="adaptive repeats (pilot 5) until each kernel x "
                                                                   "input's own interval is this narrow, or off "
                                                                   "(default: the gate / sqrt 2; off with --quick)"),
    max_repeats: Optional[int] = PROTOCOL["max_repeats"][1],
    telemetry: str = RUN["telemetry"][1],
    draw: bool = typer.Option(True, "--figures/--no-figures", help="figures in report.html"),
) -> None:
    """The nightly job: the suite, compared with the stored baseline; summary, report and verdict."""
    from harness.commits import run_nightly
    from harness.errors import ConfigError
    from harness.report import nightly_figures, run_observer
    from harness.suite import captured_specs, nightly_shape, sustained_config, synthetic_specs

    with reading_runs("nightly", figures) as console:
        from harness.suite import kernel_specs, nightly_until_ci, until_ci as until_ci_of, verdict_rule

        out = renamed_option("--out", "--results", out, results, warn=_warn) or NIGHTLY_RESULTS
        rule, threshold = verdict_rule(fail_on_slowdown, default=NIGHTLY_FAIL_ON_SLOWDOWN)
        target = until_ci_of(until_ci, default=None if quick else nightly_until_ci(threshold))
        selection = capture_args(capture, files=capture_file)
        selection.check()
        if selection.wanted and (heads or heads_kv):
            raise ConfigError("--heads/--heads-kv shape the synthetic inputs; captured ones have their model's heads. "
                              "Drop them, or give --input instead of --model/--capture.")
        if selection.wanted:
            if input_:
                raise ConfigError("--input names synthetic inputs, but --model/--capture select captured ones; "
                                  "give one or the other.")
            inputs = captured_specs(selection, device=device, seq_len=seq_len, dtype=dtype)
        else:
            inputs = synthetic_specs(input_, dtype=dtype, shape=nightly_shape(
                device, seq_len=seq_len, heads=heads[0] if heads and len(heads) == 1 else heads,
                heads_kv=heads_kv[0] if heads_kv and len(heads_kv) == 1 else heads_kv))
        config = sustained_config(kernels=kernel_specs(kernel, device=device, layout=layout, gqa=gqa), inputs=inputs,
                                  device=device, telemetry=telemetry,
                                  protocol=protocol_of({"quick": quick, "until_ci": target, "max_repeats": max_repeats,
                                                        "repeats": repeats}),
                                  results_dir=out / "runs", run_name="nightly")
        result = run_nightly(config, out_dir=out, baseline_dir=baseline, threshold=threshold, rule=rule,
                             update_baseline=update_baseline, figures=draw, observer=run_observer(console),
                             command=_command())
        export(console, figures, nightly_figures(result, threshold=threshold))
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    color = {"pass": "green", "fail": "red", "not comparable": "red"}.get(result.verdict, "yellow")
    console.print(f"[bold {color}]{result.verdict.upper()}[/]  summary {result.summary_md}  report {result.report_html}  "
                  f"verdict {result.verdict_json}  run {result.run_dir}", highlight=False)
    raise typer.Exit(result.exit_code)

