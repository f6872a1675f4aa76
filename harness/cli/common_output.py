"""What every `bench` command prints and how it ends: its console (rich on a terminal, natural width in a log), the
figures it exports (--json / --csv), the one-paragraph error exit, the command line for the run row, and the
sentence and exit code of a run that was stopped or timed nothing."""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from harness.cli.paths import check_writable
from harness.cli.streams import figures_fd, restore_fd1, terminal_console
from harness.errors import ConfigError, ExitCode, HarnessError, ResultsError, RunStopped
from harness.report import TABLE_FORMATS, write_figures

__all__ = ["console", "export_console", "export", "need_polars", "reading_runs", "fail", "command_line", "stopped",
           "nothing_timed"]

# Off a terminal rich would fold every table to 80 columns (COLUMNS unset), cutting numbers and names; a log
# has no width, so tables are drawn at their natural width and lines are never wrapped (docs/output.md).
_LOG_WIDTH = 10_000


def console(*, stderr: bool = False):
    """The console of a command: rich on a terminal, where prose wraps at spaces at the terminal's width; off one
    (pipe, file, CI log, GITHUB_ACTIONS) tables at their natural width and no line wrapped, so no number or name
    is cut."""
    c = Console(stderr=stderr)
    if c.is_terminal:
        return terminal_console(stderr=stderr)
    return Console(stderr=stderr, width=_LOG_WIDTH, soft_wrap=True)


def export_console(export_group: dict):
    """stdout's console, or stderr's when --json - / --csv - take stdout (refusing both on stdout, and one
    file for both). With the figures on stdout, everything else printed in this process (a kernel's own
    prints included) goes to stderr until the figures are written (`export`)."""
    json_out, csv_out = export_group.get("json_out"), export_group.get("csv_out")
    to_stdout = [flag for flag, value in (("--json", json_out), ("--csv", csv_out)) if value == "-"]
    if len(to_stdout) > 1:
        raise ConfigError("--json - and --csv - both ask for stdout; write one of them to a file.")
    if json_out and csv_out and json_out != "-" and Path(json_out).absolute() == Path(csv_out).absolute():
        raise ConfigError(f"--json and --csv both name {json_out}: the second would overwrite the first. Give each "
                          f"its own file.")
    for flag, value in (("--json", json_out), ("--csv", csv_out)):
        if value and value != "-":
            check_writable(flag, Path(value))
    table_format = export_group.get("table_format", "table")
    if table_format not in TABLE_FORMATS:
        raise ConfigError(f"--format {table_format!r}: one of {', '.join(TABLE_FORMATS)} (compact: the same cells "
                          f"without box lines or captions).")
    out = console(stderr=bool(to_stdout))
    out.table_format = table_format  # read by the tables when they are drawn (harness.report, TerminalTable)
    if to_stdout:
        # The stream stays referenced here while it is not sys.stdout: a text stream dropped by its last
        # reference closes the file under it (under typer's CliRunner, its captured stdout).
        _RESERVED_STDOUT.append(sys.stdout)
        out._stdout = sys.stdout
        out._figures_stdout = figures_fd(out) or sys.stdout
        sys.stdout = sys.stderr
    return out


_RESERVED_STDOUT: list = []


def export(out, export_group: dict, doc: dict) -> None:
    """Write --json / --csv (if asked) and name the files written."""
    figures_stdout = getattr(out, "_figures_stdout", None)
    try:
        written = write_figures(doc, json_path=export_group.get("json_out"), csv_path=export_group.get("csv_out"),
                                stdout=figures_stdout)
    except OSError as exc:
        raise ResultsError(f"Cannot write the figures: {exc}. Give --json/--csv a path in a writable folder, "
                           f"or - for stdout.") from None
    finally:
        restore_fd1(out, figures_stdout)
        if figures_stdout is not None and sys.stdout is sys.stderr:
            sys.stdout = getattr(out, "_stdout", figures_stdout)  # the figures are out: stdout is stdout again
    for path in written:
        out.print(f"figures: {path}", highlight=False)


def need_polars(command: str) -> None:
    """Analysis commands read runs as polars frames; GPU images may lack it (recording needs only pyarrow)."""
    if importlib.util.find_spec("polars") is None:
        raise ConfigError(f"`bench {command}` reads runs with polars, which is not installed in this Python "
                          f"({sys.executable}). Install it with `{sys.executable} -m pip install 'polars>=1.0'` "
                          f"(it is a dependency of this package: `pip install -e .` installs it too); recording "
                          f"runs (`bench sustained`) needs only pyarrow.")


@contextlib.contextmanager
def reading_runs(command: str, export_group: dict):
    """The console of a command that reads runs (`export_console`), once polars is known to be there
    (`need_polars`); a HarnessError in the block prints its paragraph and exits 2 (`fail`)."""
    try:
        out = export_console(export_group)
        need_polars(command)
        yield out
    except HarnessError as exc:
        fail(exc)


def fail(exc) -> None:
    """Print a HarnessError's paragraph and exit 2: bad input, never a traceback."""
    # The paragraph is text, not markup: `[project.entry-points."harness.kernels"]` must print as it is.
    console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    raise typer.Exit(2)


def command_line() -> str:
    """The command as typed, for the run row's provenance."""
    return " ".join(shlex.quote(a) for a in ["bench", *sys.argv[1:]])


def stopped(out, exc: KeyboardInterrupt) -> int:
    """Say how a run was stopped (Ctrl-C, SIGTERM, SIGHUP) and return its exit code, 128 + the signal."""
    name, code = (exc.signal_name, 128 + exc.signum) if isinstance(exc, RunStopped) else ("Ctrl-C", 130)
    out.print(f"[yellow]stopped by {name}: finished measurements are kept; the run is marked incomplete.[/]")
    return code


def nothing_timed(out, result) -> None:
    """A run in which no kernel x input was timed passes nothing: say so and exit RUN_FAILED (4), never 0,
    and never 1, which CI reads as "slower"."""
    if result.nothing_timed:
        out.print(f"[bold red]nothing was timed[/] ({result.untimed_summary()}): every kernel x input failed the "
                  f"gate, errored or timed out; the reasons are above and in the results.", highlight=False)
        raise typer.Exit(ExitCode.RUN_FAILED)
