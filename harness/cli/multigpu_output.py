"""What `bench sustained --gpus` and `bench merge` print: one line per worker event, then the GPUs' tables.

Its own module, below both commands: `bench sustained` runs through `run_multi_and_render`, and `bench slurm`
(in cli/multigpu.py) parses `bench sustained`'s options, so neither command module imports the other's.
"""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from harness.analysis import aggregate_repeats, gpu_spread
from harness.cli.common_args import command_line as _command, console as _console
from harness.multigpu import run_multi
from harness.report import gpu_spread_tables, sustained_tables

__all__ = ["render_multi", "run_multi_and_render"]


class _Printer:
    """One line per worker event: `run_multi`'s `on_event`."""

    def __init__(self, console) -> None:
        self.console = console

    def __call__(self, gpu: str, event: dict) -> None:
        kind, c = event.get("event"), self.console
        if kind == "measured":
            r = event["row"]
            ms = f"{r['time_ns'] / 1e6:.4f} ms/launch" if r.get("time_ns") else (r.get("error") or "not timed")
            mhz = f", {r['sm_clock_mhz']:.0f} MHz" if r.get("sm_clock_mhz") else ""
            c.print(f"[cyan]{gpu}[/] c{r['config_index']} {r['input_label']} {r['kernel']} r{r['repeat']}: "
                    f"{ms}{mhz} ({r['status']})", highlight=False)
        elif kind == "ready":
            c.print(f"[cyan]{gpu}[/] ready: {event.get('device_name')}", highlight=False)
        elif kind == "busy":
            c.print(f"[yellow]{gpu} skipped:[/] {event.get('message')}", highlight=False)
        elif kind == "error":
            c.print(f"[red]{gpu} failed:[/] {escape(str(event.get('message')))}", highlight=False)
        elif kind == "message":
            c.print(f"[dim]{gpu}: {event.get('text')}[/]", highlight=False)


def render_multi(result, console) -> None:
    """The GPUs' outcomes, then the sustained tables (sharded) or the spread between GPUs (replicated)."""
    t = Table(title=f"{result.run_id} ({result.status}): GPUs", title_justify="left", header_style="bold")
    for col in ("GPU", "status", "configurations", "measurements", "detail"):
        t.add_column(col, overflow="fold")
    for o in result.gpus:
        t.add_row(o.gpu, o.status, ",".join(map(str, o.config_indices)) or "-", str(o.measurements), o.detail or "")
    console.print(t)
    spreads = gpu_spread(result.measurements)
    if any(len(s.gpus) > 1 for s in spreads):
        for table in gpu_spread_tables(spreads):
            console.print(table.to_rich())
    else:
        for table in sustained_tables(aggregate_repeats(result.measurements), title=result.run_id):
            console.print(table)
    if result.status_detail:
        console.print(f"[yellow]{result.status_detail}[/]", highlight=False)
    console.print(f"results: {result.path}", highlight=False)


def run_multi_and_render(config, *, gpus: str, replicate: bool, console=None, command: str | None = None) -> None:
    """What `bench sustained --gpus ... [--replicate]` does once it has built its config."""
    console = console or _console()
    try:
        result = run_multi(config, gpus=gpus, replicate=replicate, on_event=_Printer(console),
                           command=command if command is not None else _command())
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: finished measurements are kept; the run is marked incomplete.[/]")
        raise typer.Exit(130)
    render_multi(result, console)
