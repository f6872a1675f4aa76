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

from harness.analysis import MIN_GATE_PILOT
from harness.cli.common_args import (
    CAPTURE,
    EXPORT,
    HISTORY,
    PROTOCOL,
    RUN,
    SHAPE,
    SOURCES,
    between_runs_option,
    capture_args,
    command_line as _command,
    console as _console,
    export,
    export_console,
    fail as _fail,
    fail_on_slowdown_option,
    protocol_of,
    reading_runs,
    renamed_option,
    shape_args,
    split_list,
    suite_inputs,
    unresolved_option,
    with_options,
)
from harness.commits import (
    HistoryRequest,
    commits_gate_line,
    commits_lines,
    commits_markdown,
    commits_table,
    compare_commits,
    run_nightly,
)
from harness.errors import ConfigError, ExitCode, HarnessError
from harness.history import MIN_NIGHTS, NIGHTS, append_runs
from harness.report import (
    commits_figures,
    figures_document,
    gate_figures,
    history_figures,
    nightly_figures,
    run_observer,
)
from harness.suite import (
    ADAPTIVE_PILOT,
    COMMITS_IDLE_S,
    COMMITS_INPUT,
    DEFAULT_INPUTS,
    DEVICE_HELP,
    HISTORY_CONTROL,
    HISTORY_CONTROL_GEMM,
    MAX_REPEATS,
    NIGHTLY_BASELINE,
    NIGHTLY_FAIL_ON_SLOWDOWN,
    NIGHTLY_HEADS,
    NIGHTLY_RESULTS,
    PROTOCOL_DEFAULTS,
    QUICK_DEFAULTS,
    attention_shape,
    attention_shapes,
    commits_config,
    commits_protocol,
    device_kind,
    history_settings,
    kernel_specs,
    nightly_shape_args,
    nightly_until_ci,
    run_device,
    sustained_config,
    synthetic_specs,
    unresolved_policy,
    until_ci as until_ci_of,
    verdict_rule,
)

_COMMITS_PROTOCOL = {**{k: PROTOCOL[k] for k in ("quick", "window_s", "warmin_cap_s")}, "idle_s": (Optional[float], typer.Option(
    None, help=f"idle before each revision's window, seconds (default {COMMITS_IDLE_S:g}: the revisions run back to "
               f"back, so each window starts from the same hot card)"))}

__all__ = ["commits", "nightly"]


@with_options(shape=SHAPE, protocol=_COMMITS_PROTOCOL, run=RUN, history=HISTORY, figures=EXPORT)
def commits(
    revisions: List[str] = typer.Argument(..., help="two or more revisions (branch, tag, sha, HEAD~1); the first is the base"),
    shape: dict = None,
    protocol: dict = None,
    run: dict = None,
    history: dict = None,
    figures: dict = None,
    repo: Path = typer.Option(Path("."), "--repo", help="the git repository whose kernels are compared"),
    kernel: str = typer.Option(..., "--kernel", "-k", help="kernel name (registered by the repo's harness.kernels "
                                                           "entry point), module:function or file.py:function"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("a revision"),
    unresolved: Optional[str] = unresolved_option(),
    device: Optional[str] = typer.Option(None, help=f"{DEVICE_HELP}: one device for every revision"),
    allow_dirty: bool = typer.Option(False, help="go ahead with uncommitted changes in --repo (recorded; they are not measured)"),
    input_: Optional[List[str]] = typer.Option(None, "--input", "-i", callback=split_list,
                                               help=f"input source, identical for every revision (default "
                                                    f"{COMMITS_INPUT}; one per run: the same flag as `bench "
                                                    f"sustained`'s list, refused with more than one)"),
    layout: Optional[str] = SOURCES["layout"][1],
    gqa: Optional[str] = SOURCES["gqa"][1],
    repeats: Optional[int] = typer.Option(None, help=f"the pilot: interleaved pairs before look 1 (default "
                                                     f"{ADAPTIVE_PILOT}; with --until-ci off {PROTOCOL_DEFAULTS.repeats}, "
                                                     f"--quick {QUICK_DEFAULTS.repeats}; at least {MIN_GATE_PILOT} "
                                                     f"under a gate)"),
    until_ci: Optional[str] = typer.Option(None, "--until-ci", help="the sequential design: look 1 after the pilot and, "
                                                                   "only if a revision is unresolved there, look 2 at "
                                                                   "--max-repeats pairs; a value (e.g. 0.25%) also "
                                                                   "asks every half-width to be at most it before "
                                                                   "stopping; off: one look (default: on; off with "
                                                                   "--quick)"),
    max_repeats: Optional[int] = typer.Option(None, help=f"the pairs of look 2 under the sequential design "
                                                         f"(default {MAX_REPEATS})"),
    max_time_s: Optional[float] = typer.Option(None, help="under --until-ci, begin no pair after the pilot that would "
                                                           "end past this many seconds of timing (imports, compiles "
                                                           "and gates not counted; default: no limit)"),
    md: Optional[Path] = typer.Option(None, "--md", help="also write the comparison as Markdown here (CI summaries)"),
    summary: Optional[Path] = typer.Option(None, "--summary", hidden=True, help="the old name of --md"),
) -> None:
    """Compare a kernel across revisions: a worktree and a process per revision, repeats interleaved A B A B."""
    try:
        console = export_console(figures)
        md = renamed_option("--summary", "--md", summary, md, warn=_warn)
        rule, threshold = verdict_rule(fail_on_slowdown)
        policy = unresolved_policy(unresolved)
        target = until_ci_of(until_ci, default=None if protocol["quick"] else rule.threshold)
        if input_ and len(input_) > 1:
            raise ConfigError(f"--input: `bench commits` times every revision on one input, and got {len(input_)} "
                              f"({', '.join(input_)}). Give one -i per `bench commits` run.")
        device = run_device(device)
        if run["name"] is not None:
            raise ConfigError("--name: `bench commits` names each revision's run after the revision; leave --name out.")
        config = commits_config(
            repo=repo, kernel=kernel, revisions=revisions, source=input_[0] if input_ else None, layout=layout, gqa=gqa,
            shape=attention_shape(shape_args(shape), device=device), dtype=shape["dtype"], seed=shape["seed"],
            device=device, telemetry=run["telemetry"], protocol=commits_protocol(
                quick=protocol["quick"], gated=threshold is not None, repeats=repeats, until_ci=target,
                max_repeats=max_repeats, window_s=protocol["window_s"], warmin_cap_s=protocol["warmin_cap_s"],
                idle_s=protocol["idle_s"]),
            results_dir=run["results"], launch=run["launch"], gate=run["gate"], allow_dirty=allow_dirty,
            allow_busy=run["allow_busy"], rule=rule, max_time_s=max_time_s,
            width_target=target if until_ci is not None else None,
        )
        result = compare_commits(config, on_message=lambda text: console.print(f"[dim]{escape(text)}[/]", highlight=False),
                                 command=_command())
        runs, rows = commits_figures(result)
        verdict = gate_figures([c.comparison for c in result.comparisons], threshold=threshold,
                               exit_code_slower=int(ExitCode.REGRESSION), unresolved=policy)
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
    if history["history"] is not None:  # each revision's run a night of its own, in revision order
        for run in result.runs:
            label = f"{history['night']}-{run.revision.short[:10]}" if history["night"] else None
            append_runs(history["history"], [(run.run_dir, "kernel")], night=label)
        console.print(f"history: {len(result.runs)} revision run(s) appended to {history['history']}", highlight=False)
    if md is not None:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(commits_markdown(result, threshold=threshold, unresolved=policy), encoding="utf-8")
        console.print(f"markdown: {md}", highlight=False)
    line = commits_gate_line(result, threshold=threshold, unresolved=policy)
    color = "bold red" if line.startswith("FAIL") else "yellow" if "NOT RESOLVED" in line else "green"
    console.print(f"[{color}]{line}[/]", highlight=False, soft_wrap=True)
    if verdict is not None and verdict["exit_code"]:
        raise typer.Exit(verdict["exit_code"])


def _warn(text: str) -> None:
    _console(stderr=True).print(f"[yellow]warning:[/] {text}", highlight=False)


# bench nightly takes every shape, workload and protocol option of bench sustained (docs/output.md: the options every
# command spells alike); its --until-ci is its own, for its default is the gate's, not off.
_NIGHTLY_PROTOCOL = {k: v for k, v in PROTOCOL.items() if k != "until_ci"}


@with_options(shape=SHAPE, capture=CAPTURE, protocol=_NIGHTLY_PROTOCOL, history=HISTORY, figures=EXPORT)
def nightly(
    shape: dict,
    capture: dict,
    protocol: dict,
    history: dict,
    figures: dict,
    device: Optional[str] = typer.Option(None, help=f"{DEVICE_HELP}; cpu is a dry run"),
    results: Optional[Path] = typer.Option(None, "--results", help="summary.md, report.html, verdict.json and runs/ "
                                                                   f"go here (default {NIGHTLY_RESULTS})"),
    out: Optional[Path] = typer.Option(None, "--out", hidden=True, help="the old name of --results"),
    baseline: Optional[Path] = typer.Option(None, help="where the baseline run is stored (a folder that persists between "
                                                       f"nights; default {NIGHTLY_BASELINE}/, none with --history)"),
    update_baseline: bool = typer.Option(False, help="store tonight's run as the baseline (only when asked for)"),
    fail_on_slowdown: Optional[str] = fail_on_slowdown_option("a kernel x input", default=NIGHTLY_FAIL_ON_SLOWDOWN),
    unresolved: Optional[str] = unresolved_option(),
    between_runs_cv: Optional[str] = between_runs_option(),
    kernel: List[str] = SOURCES["kernel"][1],
    layout: Optional[str] = SOURCES["layout"][1],
    gqa: Optional[str] = SOURCES["gqa"][1],
    capture_file: List[Path] = typer.Option([], "--capture", help="a capture layer file (repeatable), timed with its controls"),
    input_: Optional[List[str]] = typer.Option(None, "--input", "-i", callback=split_list,
                                               help=f"synthetic inputs when no capture is given (repeatable or "
                                                    f"comma-separated; default {' and '.join(DEFAULT_INPUTS)}, "
                                                    f"{NIGHTLY_HEADS[0]}/{NIGHTLY_HEADS[1]} heads)"),
    until_ci: Optional[str] = typer.Option(None, "--until-ci", help=f"adaptive repeats (pilot {ADAPTIVE_PILOT}) until each kernel x "
                                                                   "input's own interval is this narrow, or off "
                                                                   "(default: the gate / sqrt 2; off with --quick)"),
    telemetry: str = RUN["telemetry"][1],
    draw: bool = typer.Option(True, "--figures/--no-figures", help="figures in report.html"),
    history_nights: Optional[int] = typer.Option(None, "--history-nights", help="with --history: judge tonight against "
                                                                                f"the last N comparable nights (default "
                                                                                f"{NIGHTS}; at least {MIN_NIGHTS})"),
    history_control: Optional[str] = typer.Option(None, "--history-control", help="with --history: the control timed "
                                                                                  f"every night beside the suite (default "
                                                                                  f"{HISTORY_CONTROL['cuda']}; on the CPU "
                                                                                  f"at {HISTORY_CONTROL_GEMM['cpu']}^3), "
                                                                                  f"or none"),
    append: bool = typer.Option(True, "--append/--no-append", help="with --history: append tonight as a night (--no-append: "
                                                                   "judge it against the history, e.g. a pull request "
                                                                   "against main's nights, and leave the history as it is)"),
) -> None:
    """The nightly job: the suite, judged against its history or the stored baseline; summary, report and verdict."""
    with reading_runs("nightly", figures) as console:
        out = renamed_option("--out", "--results", out, results, warn=_warn) or NIGHTLY_RESULTS
        device = run_device(device)
        rule, threshold = verdict_rule(fail_on_slowdown, default=NIGHTLY_FAIL_ON_SLOWDOWN,
                                       between_runs_cv=between_runs_cv)
        policy = unresolved_policy(unresolved)
        target = until_ci_of(until_ci, default=None if protocol["quick"] else nightly_until_ci(threshold))
        selection = capture_args(capture, files=capture_file)
        selection.check()
        if selection.wanted:
            if input_:
                raise ConfigError("--input names synthetic inputs, but --model/--capture select captured ones; "
                                  "give one or the other.")
            inputs = suite_inputs(console, sources={"input_": None, "device": device}, shape=shape, capture=capture,
                                  files=capture_file)
        else:
            dims = nightly_shape_args(shape_args(shape))
            inputs = synthetic_specs(input_, shape=attention_shapes(dims, device=device, seed=shape["seed"]),
                                     dtype=shape["dtype"], seed=shape["seed"])
        request = None
        if history["history"] is not None:
            settings = history_settings(fail_on_slowdown, nights=history_nights)
            control = history_control or HISTORY_CONTROL[device_kind(device)]
            request = HistoryRequest(path=history["history"], night=history["night"], nights=settings.nights,
                                     level=settings.level, control=None if control in (None, "none") else control,
                                     control_gemm_size=HISTORY_CONTROL_GEMM.get(device_kind(device)), append=append)
        else:
            given = [f for f, v in (("--night", history["night"]), ("--history-nights", history_nights),
                                    ("--history-control", history_control), ("--no-append", not append)) if v]
            if given:
                raise ConfigError(f"{', '.join(given)} belong(s) to --history, which was not given. Add --history DIR "
                                  f"(the folder of nights) or drop {', '.join(given)}.")
        baseline = baseline if baseline is not None or request is not None else NIGHTLY_BASELINE
        if update_baseline and baseline is None:
            raise ConfigError("--update-baseline stores tonight's run as the baseline: name the folder with --baseline "
                              "DIR (with --history no baseline is kept unless one is named).")
        config = sustained_config(kernels=kernel_specs(kernel, device=device, layout=layout, gqa=gqa), inputs=inputs,
                                  device=device, telemetry=telemetry,
                                  protocol=protocol_of({**protocol, "until_ci": target}),
                                  results_dir=out / "runs", run_name="nightly")
        result = run_nightly(config, out_dir=out, baseline_dir=baseline, threshold=threshold, rule=rule,
                             update_baseline=update_baseline, figures=draw, observer=run_observer(console),
                             command=_command(), unresolved=policy, history=request)
        doc = nightly_figures(result, threshold=threshold)
        if result.history is not None:  # tonight's verdicts against its nights, beside the baseline's comparison
            doc["tables"]["history_verdicts"] = history_figures(result.history.analysis)["tables"]["history_verdicts"]
        export(console, figures, doc)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    color = {"pass": "green", "fail": "red", "not comparable": "red"}.get(result.verdict, "yellow")
    extra = f"  history {result.history.dashboard}" if result.history is not None else ""
    console.print(f"[bold {color}]{result.verdict.upper()}[/]  summary {result.summary_md}  report {result.report_html}  "
                  f"verdict {result.verdict_json}  run {result.run_dir}{extra}", highlight=False)
    raise typer.Exit(result.exit_code)
