"""`bench commits` and `bench nightly`: parse, build a frozen config, call harness.commits, render.

Registered on the main app in harness/cli.py; `python -m harness._cli_commits nightly ...` runs the same
commands without it (ci/nightly.sh calls it that way, so it works with any PATH).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import List, Optional

import typer

from harness._cli_common import command_line as _command, console as _console, fail as _fail

__all__ = ["commits", "nightly", "app"]


def _protocol(quick: bool, repeats: Optional[int], window_s: Optional[float]):
    from harness.config import SustainedProtocol

    overrides = {k: v for k, v in dict(repeats=repeats, window_s=window_s).items() if v is not None}
    return SustainedProtocol.quick(**overrides) if quick else SustainedProtocol(**overrides)


def commits(
    revisions: List[str] = typer.Argument(..., help="two or more revisions (branch, tag, sha, HEAD~1); the first is the base"),
    repo: Path = typer.Option(Path("."), "--repo", help="the git repository whose kernels are compared"),
    kernel: str = typer.Option(..., "--kernel", "-k", help="kernel name (registered by the repo's harness.kernels entry point) or module:function"),
    fail_on_slowdown: Optional[str] = typer.Option(None, help="exit 1 when a revision is slower by more than this (e.g. 2%)"),
    device: str = typer.Option("cuda:0", help="cpu, cuda:N or cuda:<PCI bus id>: one device for every revision"),
    quick: bool = typer.Option(False, help="short protocol for dry runs (not sustained figures)"),
    allow_dirty: bool = typer.Option(False, help="go ahead with uncommitted changes in --repo (recorded; they are not measured)"),
    input_: str = typer.Option("gaussian:0.1", "--input", "-i", help="input source, identical for every revision"),
    batch: int = typer.Option(1),
    heads: int = typer.Option(32),
    heads_kv: Optional[int] = typer.Option(None),
    seq_len: Optional[int] = typer.Option(None, help="S (default 16384 on a GPU, 1024 on the CPU)"),
    head_dim: int = typer.Option(128),
    head_dim_v: Optional[int] = typer.Option(None),
    dtype: str = typer.Option("bf16"),
    causal: bool = typer.Option(True, "--causal/--no-causal"),
    seed: int = typer.Option(0),
    telemetry: str = typer.Option("auto"),
    results: Path = typer.Option(Path("results"), help="results root: one run per revision is written here"),
    launch: str = typer.Option("auto"),
    gate: bool = typer.Option(True, "--gate/--no-gate"),
    allow_busy: bool = typer.Option(False),
    repeats: Optional[int] = typer.Option(None, help="interleaved repeats per revision"),
    window_s: Optional[float] = typer.Option(None),
    summary: Optional[Path] = typer.Option(None, help="also write the comparison as Markdown here"),
) -> None:
    """Compare a kernel across revisions: a worktree and a process per revision, repeats interleaved A B A B."""
    from harness.analysis import parse_threshold
    from harness.commits import CommitsConfig, commits_markdown, commits_table, compare_commits
    from harness.errors import HarnessError
    from harness.inputs import AttentionShape, InputSpec

    console = _console()
    try:
        threshold = parse_threshold(fail_on_slowdown) if fail_on_slowdown else None
        shape = AttentionShape(batch=batch, heads_q=heads, heads_kv=heads_kv or heads,
                               seq_len=seq_len or (1024 if device == "cpu" else 16384), head_dim_qk=head_dim,
                               head_dim_v=head_dim_v, causal=causal)
        config = CommitsConfig(
            repo=repo, kernel=kernel, revisions=tuple(revisions), input=InputSpec(shape=shape, dtype=dtype, source=input_, seed=seed),
            device=device, telemetry=telemetry, protocol=_protocol(quick, repeats, window_s), results_dir=results,
            launch=launch, gate=gate, allow_dirty=allow_dirty, allow_busy=allow_busy,
        )
        result = compare_commits(config, on_message=lambda text: console.print(f"[dim]{text}[/]", highlight=False),
                                 command=_command())
    except HarnessError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP as harness.commits.Terminated
        console.print(f"[yellow]bench commits {exc or 'interrupted'}[/]", highlight=False)
        raise typer.Exit(128 + (signal.Signals[exc.signal] if hasattr(exc, "signal") else signal.SIGINT)) from None
    console.print(commits_table(result).to_rich())
    for c in result.comparisons:
        f = c.factors
        clock = f"clock A/B x{f.clock.value:.4f}" if f.clock_known else "clock A/B unknown (taken as 1)"
        console.print(f"{c.head.revision.describe()} vs {c.base.revision.describe()}: time x{f.time.value:.4f} = "
                      f"cycles x{f.cycles.value:.4f} x {clock}: {c.verdict}", highlight=False)
    if result.dirty_files:
        console.print(f"[yellow]--allow-dirty: uncommitted changes to {', '.join(result.dirty_files)} were not measured.[/]")
    for run in result.runs:
        console.print(f"results {run.revision.describe()}: {run.run_dir}", highlight=False)
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(commits_markdown(result, threshold=threshold), encoding="utf-8")
    if threshold is not None:
        slow = result.slowdowns(threshold)
        if slow:
            console.print(f"[bold red]FAIL:[/] slower by more than {threshold:.1%}: "
                          + ", ".join(c.head.revision.describe() for c in slow), highlight=False)
            raise typer.Exit(1)
        console.print(f"[green]PASS:[/] no revision slower by more than {threshold:.1%}", highlight=False)


def nightly(
    device: str = typer.Option("cuda:0", help="cpu (a dry run), cuda:N or cuda:<PCI bus id>"),
    out: Path = typer.Option(Path("out/nightly"), help="summary.md, report.html, verdict.json and runs/ go here"),
    baseline: Path = typer.Option(Path("baseline"), help="where the baseline run is stored (a folder that persists between nights)"),
    update_baseline: bool = typer.Option(False, help="store tonight's run as the baseline (only when asked for)"),
    fail_on_slowdown: str = typer.Option("2%", help="fail when a kernel x input is slower by more than this, beyond the noise rule"),
    kernel: List[str] = typer.Option([], "--kernel", "-k", help="kernel (repeatable; default: the device's SDPA kernels)"),
    model: Optional[str] = typer.Option(None, help="capture this model's attention inputs (captured + controls)"),
    capture: List[Path] = typer.Option([], "--capture", help="a capture layer file (repeatable), timed with its controls"),
    layer: List[int] = typer.Option([], "--layer", help="captured layer for --model (repeatable)"),
    control: List[str] = typer.Option(["gaussian:0.1"], "--control", help="control input of each capture's shape (repeatable)"),
    input_: List[str] = typer.Option(["gaussian:0.1", "gaussian:1"], "--input", "-i", help="synthetic inputs when no capture is given"),
    seq_len: Optional[int] = typer.Option(None, help="S (default 8192 with --model on a GPU, 1024 on the CPU)"),
    dtype: str = typer.Option("bf16"),
    text: str = typer.Option("pydoc"),
    weights: Optional[Path] = typer.Option(None),
    captures: Path = typer.Option(Path("captures"), help="captures root directory"),
    quick: bool = typer.Option(False, help="short protocol (the CPU dry run)"),
    telemetry: str = typer.Option("auto"),
    figures: bool = typer.Option(True, "--figures/--no-figures"),
) -> None:
    """The nightly job: the suite, compared with the stored baseline; summary, report and verdict."""
    from harness.analysis import parse_threshold
    from harness.commits import capture_suite, run_nightly
    from harness.config import RunConfig
    from harness.errors import HarnessError
    from harness.inputs import AttentionShape, InputSpec

    console = _console()
    try:
        threshold = parse_threshold(fail_on_slowdown)
        if capture:
            inputs = capture_suite(capture, controls=tuple(control), dtype=dtype)
        elif model:
            from harness.capture import model_input_specs

            inputs = model_input_specs(model, layers=tuple(layer), seq_len=seq_len or (1024 if device == "cpu" else 8192),
                                       text=text, weights=weights, root=captures, controls=tuple(control), dtype=dtype)
        else:
            shape = AttentionShape(batch=1, heads_q=32, heads_kv=8, seq_len=seq_len or (1024 if device == "cpu" else 16384),
                                   head_dim_qk=128)
            inputs = tuple(InputSpec(shape=shape, dtype=dtype, source=s) for s in input_)
        kernels = tuple(kernel) or (("sdpa-cpu",) if device == "cpu" else ("sdpa-cudnn", "sdpa-flash"))
        config = RunConfig(kernels=kernels, inputs=inputs, device=device, telemetry=telemetry,
                           protocol=_protocol(quick, None, None), results_dir=out / "runs", run_name="nightly")
        result = run_nightly(config, out_dir=out, baseline_dir=baseline, threshold=threshold,
                             update_baseline=update_baseline, figures=figures, command=_command())
    except HarnessError as exc:
        _fail(exc)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    color = {"pass": "green", "fail": "red", "not comparable": "red"}.get(result.verdict, "yellow")
    console.print(f"[bold {color}]{result.verdict.upper()}[/]  summary {result.summary_md}  report {result.report_html}  "
                  f"verdict {result.verdict_json}  run {result.run_dir}", highlight=False)
    raise typer.Exit(result.exit_code)


app = typer.Typer(add_completion=False, no_args_is_help=True, help="bench commits / bench nightly")
app.command("commits")(commits)
app.command("nightly")(nightly)

if __name__ == "__main__":
    app()
