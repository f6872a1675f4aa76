"""What a run shows while it runs: a rich live view on a terminal, one plain log line per finished
measurement anywhere else (a pipe, a file, a CI log), both with an ETA. `run_observer(console)` picks.

>>> import io
>>> from rich.console import Console
>>> type(run_observer(Console(file=io.StringIO()))).__name__
'LineObserver'
"""

from __future__ import annotations

import time

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.analysis import limiter_label
from harness.report._tables import fmt
from harness.runner import NullObserver

__all__ = ["LineObserver", "LiveView", "measurement_line", "run_observer"]


def run_observer(console, *, get_time=time.monotonic):
    """The live view on a terminal; elsewhere plain lines, since a redrawn bar is invisible in a log."""
    return LiveView(console, get_time=get_time) if console.is_terminal else LineObserver(console, get_time=get_time)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class _Eta:
    """Done / total and the time left at the mean pace so far (measurements are alike within a run)."""

    def __init__(self, get_time) -> None:
        self._get_time = get_time
        self.t0 = get_time()
        self.total = 0
        self.done = 0

    def start(self, total: int) -> None:
        self.t0, self.total, self.done = self._get_time(), total, 0

    def advance(self) -> None:
        self.done += 1

    @property
    def elapsed_s(self) -> float:
        return self._get_time() - self.t0

    @property
    def remaining_s(self) -> float | None:
        if not self.done:
            return None
        return self.elapsed_s / self.done * max(self.total - self.done, 0)

    def text(self) -> str:
        return f"{self.done}/{self.total}, {_clock(self.elapsed_s)} elapsed, ETA {_clock(self.remaining_s)}"


class LiveView:
    """A `RunObserver` drawing a progress bar and a one-line status; `get_time` is injectable for tests."""

    def __init__(self, console, *, get_time=time.monotonic) -> None:
        self._console = console
        self._get_time = get_time
        self._eta = _Eta(get_time)
        self._progress = Progress(
            TextColumn("[bold]{task.fields[what]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"), TextColumn("{task.fields[status]}"), console=console,
            get_time=get_time, transient=False,
        )
        self._task = None
        self._phase = ""
        self._phase_t0 = 0.0

    def on_run_start(self, result, *, total: int) -> None:
        self._console.print(f"run [bold]{result.run_id}[/] -> {result.path}")
        self._eta.start(total)
        self._task = self._progress.add_task("run", total=total, what="", status="", eta=_clock(None))
        self._progress.start()

    def on_measurement_start(self, *, kernel: str, input_label: str, repeat: int) -> None:
        self._progress.update(self._task, what=f"{kernel} on {input_label} (repeat {repeat + 1})")

    def on_phase(self, phase: str) -> None:
        self._phase, self._phase_t0 = phase, self._get_time()
        self._progress.update(self._task, status=phase)

    def on_chunk(self, chunk, check, last_sample) -> None:
        s = last_sample
        state = ""
        if s is not None and s.error is None:
            state = (f"{fmt(s.sm_clock_mhz, '.0f')} MHz {fmt(s.power_w, '.0f')} W "
                     f"{(s.reason_names or '-').replace('|', ',')}")
        drift = f" Δ{check.chunk_change * 100:.2f}%" if check is not None and check.chunk_change is not None else ""
        self._progress.update(
            self._task,
            status=f"{self._phase} {self._get_time() - self._phase_t0:4.1f}s {chunk.time_ns / 1e6:.4f} ms{drift} {state}",
        )

    def on_measurement_end(self, row: dict) -> None:
        self._eta.advance()
        self._progress.update(self._task, eta=_clock(self._eta.remaining_s))
        self._progress.advance(self._task)

    def on_message(self, text: str) -> None:
        self._console.print(f"[yellow]{escape(text)}[/]")

    def on_run_end(self, result) -> None:
        self._progress.stop()


def measurement_line(row: dict) -> str:
    """One finished measurement in one line: kernel, input, repeat, ms, both clocks, W, limiter, settled after."""
    what = f"{row.get('kernel')} on {row.get('input_label')} repeat {int(row.get('repeat') or 0) + 1}"
    status = row.get("status") or "?"
    if not row.get("time_ns"):
        return f"{what}: not timed ({status}): {row.get('error') or 'no measurement'}"
    settled = ("UNSETTLED (warm-in cap reached)" if status == "unsettled"
               else f"settled after {fmt(row.get('settled_after_s'), '.1f', suffix=' s')}")
    return (f"{what}: {fmt(row['time_ns'], '.4f', scale=1e-6)} ms/launch, NVML {fmt(row.get('sm_clock_mhz'), '.0f')} MHz, "
            f"in-band {fmt(row.get('inband_clock_mhz'), '.0f')} MHz, {fmt(row.get('power_w'), '.0f')} W, "
            f"limiter {limiter_label([row])}, {settled} ({status})")


class LineObserver(NullObserver):
    """A `RunObserver` for logs: one line per finished measurement with its figures and the ETA, and the
    runner's messages; nothing is redrawn, so a CI log reads top to bottom."""

    def __init__(self, console, *, get_time=time.monotonic) -> None:
        self._console = console
        self._eta = _Eta(get_time)

    def _print(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False, soft_wrap=True)

    def on_run_start(self, result, *, total: int) -> None:
        self._eta.start(total)
        self._print(f"run {result.run_id} -> {result.path}: {total} measurement(s)")

    def on_measurement_end(self, row: dict) -> None:
        self._eta.advance()
        self._print(f"[{self._eta.text()}] {measurement_line(row)}")

    def on_message(self, text: str) -> None:
        self._print(text)

    def on_run_end(self, result) -> None:
        detail = getattr(result, "status_detail", "")
        self._print(f"run {result.run_id} ended {result.status} after {_clock(self._eta.elapsed_s)}"
                    + (f": {detail}" if detail else ""))
