"""What every `bench` command module shares: the console, the one-paragraph error exit, the command line."""

from __future__ import annotations

import shlex
import sys

import typer

__all__ = ["console", "fail", "command_line"]


def console():
    from rich.console import Console

    return Console()


def fail(exc) -> None:
    """Print a HarnessError's paragraph and exit 2: bad input, never a traceback."""
    console().print(f"[bold red]error:[/] {exc}", highlight=False)
    raise typer.Exit(2)


def command_line() -> str:
    """The command as typed, for the run row's provenance."""
    return " ".join(shlex.quote(a) for a in ["bench", *sys.argv[1:]])
