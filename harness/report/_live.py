"""A rich live view of a sustained run: what is running, which phase, and the card's state right now."""

from __future__ import annotations

import time

from harness.report._tables import fmt

__all__ = ["LiveView"]


class LiveView:
    """A `RunObserver` drawing a progress bar and a one-line status; `get_time` is injectable for tests."""

    def __init__(self, console, *, get_time=time.monotonic) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._console = console
        self._get_time = get_time
        self._progress = Progress(
            TextColumn("[bold]{task.fields[what]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=console, get_time=get_time, transient=False,
        )
        self._task = None
        self._phase = ""
        self._phase_t0 = 0.0

    def on_run_start(self, result, *, total: int) -> None:
        self._console.print(f"run [bold]{result.run_id}[/] -> {result.path}")
        self._task = self._progress.add_task("run", total=total, what="", status="")
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
        self._progress.advance(self._task)

    def on_message(self, text: str) -> None:
        self._console.print(f"[yellow]{text}[/]")

    def on_run_end(self, result) -> None:
        self._progress.stop()
