"""`bench history` and `bench bisect`: parse, build the settings through `harness.suite`, call harness.history /
harness.commits, render.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Optional

import typer

from harness.cli.common_args import (
    EXPORT,
    PROTOCOL,
    RUN,
    SHAPE,
    command_line,
    export,
    export_console,
    fail,
    fail_on_slowdown_option,
    protocol_of,
    shape_args,
    with_options,
)
from harness.commits import bisect_commits, commit_line
from harness.errors import ExitCode, HarnessError
from harness.history import ANALYSIS_COLUMNS, MIN_NIGHTS, NIGHTS, analyze_history, read_history, require_ruptures
from harness.report import history_figures, history_markdown, history_page, history_tables, verdict_line
from harness.suite import (
    COMMITS_INPUT,
    DEVICE_HELP,
    HISTORY_RECENT,
    NIGHTLY_FAIL_ON_SLOWDOWN,
    attention_shape,
    commits_config,
    history_settings,
    run_device,
    until_ci as until_ci_of,
    verdict_rule,
)

__all__ = ["history", "bisect"]

_BISECT_PROTOCOL = {k: PROTOCOL[k] for k in ("quick", "repeats", "window_s", "idle_s", "warmin_cap_s", "chunk_s",
                                             "until_ci", "max_repeats")}


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - a missing ruptures is said by the analysis itself, where it is needed
        pass


def _html_target(path: Path) -> Path:
    """--html OUT/ writes OUT/index.html; a path ending in .html is the file itself."""
    return path if path.suffix.lower() in (".html", ".htm") else path / "index.html"


@with_options(figures=EXPORT)
def history(
    figures: dict,
    history_dir: Path = typer.Argument(..., metavar="DIR", help="the history folder (night-*.parquet files) that "
                                                                "`bench nightly --history DIR` appends to"),
    html: Optional[Path] = typer.Option(None, "--html", metavar="OUT", help="write the dashboard: OUT/index.html "
                                                                            "(or OUT itself when it ends in .html)"),
    md: Optional[Path] = typer.Option(None, "--md", help="write the PR comment / step summary Markdown here"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("the last night's kernel x input (against its nights)",
                                                              default=NIGHTLY_FAIL_ON_SLOWDOWN),
    nights: Optional[int] = typer.Option(None, "--history-nights", help="judge the last night against the last N "
                                                                        f"comparable nights (default {NIGHTS}; at least "
                                                                        f"{MIN_NIGHTS})"),
    recent: int = typer.Option(HISTORY_RECENT, "--recent", help="change points of the last N nights in the terminal "
                                                                "and Markdown (the dashboard shows all)"),
    dashboard_url: Optional[str] = typer.Option(None, "--dashboard-url", help="link the Markdown to the published "
                                                                              "dashboard"),
    gate: bool = typer.Option(False, "--gate/--no-gate", help="exit with the last night's verdict (1 slower, 2 not "
                                                              "comparable); default: exit 0 after a report"),
) -> None:
    """Every night of a history: trends, change points (cycles vs clock, events apart), the last night's verdict."""
    try:  # pyarrow, numpy and (from 4 nights a series on) ruptures: no polars, so a GPU image draws its own dashboard
        console = export_console(figures)
        settings = history_settings(fail_on_slowdown, nights=nights)
        # ruptures (and scipy) import in Python while pyarrow reads the nights in C++: the two overlap on two cores
        threading.Thread(target=lambda: _quietly(require_ruptures), daemon=True).start()
        history = read_history(history_dir, columns=ANALYSIS_COLUMNS)
        analysis = analyze_history(history, threshold=settings.threshold, level=settings.level, wanted=settings.nights)
        for table in history_tables(analysis, recent=recent):
            if table.rows:
                console.print(table.to_rich())
        written = []
        if html is not None:
            target = _html_target(html)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(history_page(analysis), encoding="utf-8")
            written.append(f"dashboard: {target}")
        if md is not None:
            md.parent.mkdir(parents=True, exist_ok=True)
            md.write_text(history_markdown(analysis, recent=recent, dashboard_url=dashboard_url), encoding="utf-8")
            written.append(f"markdown: {md}")
        export(console, figures, history_figures(analysis, threshold_source=settings.threshold_source))
    except HarnessError as exc:
        fail(exc)
    for line in written:
        console.print(line, highlight=False)
    v = analysis.verdict
    color = {"pass": "green", "fail": "bold red", "not comparable": "bold red"}.get(v.verdict, "yellow")
    console.print(f"[{color}]{verdict_line(analysis)}[/]", highlight=False, soft_wrap=True)
    if gate and v.exit_code:
        raise typer.Exit(v.exit_code)


@with_options(shape=SHAPE, protocol=_BISECT_PROTOCOL, run=RUN)
def bisect(
    good: str = typer.Argument(..., help="a commit without the slowdown"),
    bad: str = typer.Argument(..., help="a later commit with it (GOOD must be an ancestor)"),
    shape: dict = None,
    protocol: dict = None,
    run: dict = None,
    repo: Path = typer.Option(Path("."), "--repo", help="the git repository whose commits are searched"),
    kernel: str = typer.Option(..., "--kernel", "-k", help="kernel name (registered by the repo's harness.kernels "
                                                           "entry point), module:function or file.py:function"),
    fail_on_slowdown: str = typer.Option(..., "--fail-on-slowdown", help="the slowdown to find: every step calls a "
                                                                         "candidate slower beyond this (e.g. 1%)"),
    device: Optional[str] = typer.Option(None, help=DEVICE_HELP),
    input_: Optional[str] = typer.Option(None, "--input", "-i", help=f"the input every step times (default "
                                                                     f"{COMMITS_INPUT})"),
    allow_dirty: bool = typer.Option(False, help="go ahead with uncommitted changes in --repo (not measured)"),
    confirm: bool = typer.Option(True, "--confirm/--no-confirm", help="compare the last good and the first bad commit "
                                                                      "directly at the end"),
    check_ends: bool = typer.Option(True, "--check-ends/--no-check-ends", help="first compare GOOD with BAD (no "
                                                                               "slowdown there: nothing to find)"),
) -> None:
    """The first commit where a slowdown appeared: binary search, each step an interleaved `bench commits` pair run."""
    out = export_console({})
    try:
        rule, _ = verdict_rule(fail_on_slowdown)
        device = run_device(device)
        target = until_ci_of(protocol["until_ci"], default=None)
        config = commits_config(
            repo=repo, kernel=kernel, revisions=(good, bad), source=input_,
            shape=attention_shape(shape_args(shape), device=device), dtype=shape["dtype"], seed=shape["seed"],
            device=device, telemetry=run["telemetry"], protocol=protocol_of({**protocol, "until_ci": target}),
            results_dir=run["results"], launch=run["launch"], gate=run["gate"], allow_dirty=allow_dirty,
            allow_busy=run["allow_busy"], rule=rule)
        result = bisect_commits(config, good=good, bad=bad, confirm=confirm, check_ends=check_ends,
                                on_message=lambda text: out.print(f"[dim]{text}[/]", highlight=False),
                                command=command_line())
    except HarnessError as exc:
        fail(exc)
    except KeyboardInterrupt as exc:
        out.print(f"[yellow]bench bisect {exc or 'interrupted'}[/]", highlight=False)
        raise typer.Exit(128 + (signal.Signals[exc.signal] if hasattr(exc, "signal") else signal.SIGINT)) from None
    # The range as given (GOOD..BAD), not the pair the search ended on: that is the sentence's.
    out.print(f"bisect {good}..{bad} in {repo}: {len(result.commits)} commit(s) after GOOD, {len(result.steps)} pair "
              f"run(s)", highlight=False)
    for s in result.steps:
        out.print(commit_line(s), highlight=False, soft_wrap=True)
    color = {"found": "bold green", "no change": "yellow", "unresolved": "yellow"}[result.status]
    out.print(f"[{color}]{result.status.upper()}[/]: {result.sentence}", highlight=False, soft_wrap=True)
    if result.status == "unresolved":
        raise typer.Exit(int(ExitCode.UNRESOLVED))  # not resolved at the threshold
