"""The `bench` command: one module per command family, each command parsing its options, building a
frozen config through `harness.suite`, calling one library function and rendering what it returns.

| module | commands |
|---|---|
| `sustained` | `bench sustained` (and `--gpus` through `multigpu`) |
| `capture` | `bench capture`, `bench inputs synth` |
| `kernels` | `bench error`, `bench repro` |
| `in_model` | `bench in-model` |
| `analysis` | `bench compare`, `bench report`, `bench burst` |
| `commits` | `bench commits`, `bench nightly` |
| `history` | `bench history`, `bench bisect` |
| `profiling` | `bench trace`, `bench peaks` |
| `multigpu` | `bench slurm`, `bench merge` |
| `listing` | `bench doctor`, `bench list ...` |

Options shared by several commands are declared once in `common_args`. Exit codes are
`harness.errors.ExitCode` (README: Exit codes); `main` turns an unexpected exception into exit 3 with the
traceback in a file.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import typer

from harness import __version__
from harness.cli import analysis, capture, commits, history, in_model, kernels, listing, multigpu, profiling, sustained
from harness.cli.paths import absolute_paths
from harness.cli.streams import guard_streams
from harness.errors import ExitCode, ResultsWarning
from harness.results import git_state

__all__ = ["app", "main", "version_text"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Sustained-clock benchmarks of GPU attention kernels.")
_list = typer.Typer(no_args_is_help=True, help="List kernels, models, telemetry backends, input sources and runs.")
_inputs = typer.Typer(no_args_is_help=True, help="Make inputs: controls shaped like a capture.")
app.add_typer(_list, name="list")
app.add_typer(_inputs, name="inputs")

for _name, _fn in (
    ("sustained", sustained.sustained),
    ("capture", capture.capture_cmd),
    ("doctor", listing.doctor),
    ("compare", analysis.compare),
    ("report", analysis.report),
    ("burst", analysis.burst),
    ("commits", commits.commits),
    ("nightly", commits.nightly),
    ("history", history.history),
    ("bisect", history.bisect),
    ("trace", profiling.trace),
    ("peaks", profiling.peaks),
    ("slurm", multigpu.slurm),
    ("merge", multigpu.merge),
    ("error", kernels.error),
    ("repro", kernels.repro),
    ("in-model", in_model.in_model),
):
    app.command(_name)(absolute_paths(_fn))  # every path a command is given is absolute from its start
_inputs.command("synth")(absolute_paths(capture.inputs_synth))
for _name, _fn in (("models", listing.list_models), ("kernels", listing.list_kernels),
                   ("inputs", listing.list_inputs), ("telemetry", listing.list_telemetry),
                   ("runs", absolute_paths(listing.list_runs))):
    _list.command(_name)(_fn)


def version_text() -> str:
    """`bench 0.1.0 (git 147d680..., clean)`: the package version and the commit of its source tree."""
    commit, dirty = git_state(Path(__file__).resolve().parent)
    git = f"git {commit}{' (dirty)' if dirty else ''}" if commit else "git commit unknown (not a git checkout)"
    return f"bench {__version__} ({git})"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit(0)


# Off a terminal typer draws --help at rich's fallback of 80 columns and cuts option names to fit
# (`--no-random-weig…`); a pipe or a log has no width, so help is drawn this wide there (or wider COLUMNS).
HELP_LOG_WIDTH = 200


def _help_width() -> None:
    """Set typer's help width for this process when stdout is not a terminal; a terminal keeps its own."""
    from typer import rich_utils

    if os.environ.get("TERMINAL_WIDTH") or sys.stdout is None or sys.stdout.isatty():
        return
    try:
        columns = int(os.environ.get("COLUMNS") or 0)
    except ValueError:
        columns = 0
    rich_utils.MAX_WIDTH = max(columns, HELP_LOG_WIDTH)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True,
                                       help="print the package version and git commit, then exit")) -> None:
    """Sustained-clock benchmarks of GPU attention kernels."""
    _help_width()  # before a command parses its options, which is when its --help is drawn
    _plain_warnings()


def _plain_warnings() -> None:
    """The harness's own warnings (a damaged or stray part file) as one line on stderr, `warning: ...`, not
    Python's two-line format with the harness's source line in it."""
    default = warnings.showwarning
    if getattr(default, "harness_plain", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ResultsWarning):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    show.harness_plain = True
    warnings.showwarning = show


def _traceback_file(argv: list[str]):
    """Where an internal error's traceback goes: the --results folder when one was named and exists, else
    the temp folder."""
    folder = Path(tempfile.gettempdir())
    for flag in ("--results", "--out"):
        if flag in argv[:-1] and Path(argv[argv.index(flag) + 1]).is_dir():
            folder = Path(argv[argv.index(flag) + 1])
            break
    return folder / f"bench-internal-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"


def main(argv: list[str] | None = None) -> None:
    # amdsmi caches GPU metrics for a while unless told not to, and PyTorch's ROCm build loads amdsmi
    # when torch is imported: set it before anything imports torch. No effect on other machines.
    os.environ.setdefault("AMDSMI_GPU_METRICS_CACHE_MS", "0")
    guard_streams()
    _help_width()  # `bench --help` is drawn before any callback runs
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="bench")
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug, not bad input (that is a HarnessError, exit 2): keep the trace, print one line
        path = _traceback_file(args)
        try:
            path.write_text(f"bench {' '.join(args)}\n{version_text()}\n\n{traceback.format_exc()}", encoding="utf-8")
            where = f"traceback in {path}"
        except OSError:
            traceback.print_exc()
            where = "traceback above"
        print(f"bench: internal error {type(exc).__name__}: {exc} ({where}; please report it)", file=sys.stderr)
        sys.exit(int(ExitCode.INTERNAL))
