"""Progress through a capture's stages, shown with rich when the caller passes a Progress."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = ["Stages", "capture_progress"]


def capture_progress(console: Any = None):
    """A rich Progress with the columns a capture uses; pass it to `capture(..., progress=p)`."""
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )


class Stages:
    """One task that advances through load, forward (per layer), check and save; a no-op without rich."""

    def __init__(self, progress: Any, *, total: int, title: str):
        self._progress = progress
        self._title = title
        self._total = total
        self._task = progress.add_task(title, total=total) if progress is not None else None

    def stage(self, what: str) -> None:
        if self._task is not None:
            self._progress.update(self._task, description=f"{self._title}: {what}")

    def advance(self, steps: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, steps)

    def finish(self) -> None:
        if self._task is not None:
            self._progress.update(self._task, description=f"{self._title}: done", completed=self._total)
