"""Busy-device exceptions: the processes of one comparison do not make its device busy for each other."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from harness.workers._processes import parent_of

__all__ = ["tolerate_children_of", "tolerate_pids"]


class _Tolerating:
    """The device, except that the processes `tolerated(pid)` accepts do not make it busy."""

    def __init__(self, device, tolerated: Callable[[int], bool]) -> None:
        self._device, self._tolerated = device, tolerated

    def __getattr__(self, name):
        return getattr(self._device, name)

    def other_processes(self):
        return [p for p in self._device.other_processes() if not self._tolerated(p.pid)]


def tolerate_pids(device, pids: Iterable[int]):
    """`device`, except that the processes `pids` do not count as busy: the orchestrator of a multi-GPU run (it
    may hold a CUDA context from reading the GPUs' properties, but only reads pipes while workers measure), or
    a run's own kernel processes (a module that touches CUDA when imported leaves its child a context there,
    and that child runs nothing while the run checks)."""
    pids = frozenset(pids)
    return _Tolerating(device, lambda p: p in pids)


def tolerate_children_of(device, pid: int):
    """`device`, except that the children of `pid` (the other workers of one `bench commits`) do not count as
    busy: they hold a context on it but sit blocked on their pipe while this worker measures."""
    return _Tolerating(device, lambda p: parent_of(p) == pid)
