"""Busy-device exceptions: the processes of one comparison do not make its device busy for each other."""

from __future__ import annotations

from collections.abc import Callable

from harness.workers._processes import parent_of

__all__ = ["tolerate_children_of", "tolerate_pid"]


class _Tolerating:
    """The device, except that the processes `tolerated(pid)` accepts do not make it busy."""

    def __init__(self, device, tolerated: Callable[[int], bool]) -> None:
        self._device, self._tolerated = device, tolerated

    def __getattr__(self, name):
        return getattr(self._device, name)

    def other_processes(self):
        return [p for p in self._device.other_processes() if not self._tolerated(p.pid)]


def tolerate_pid(device, pid: int):
    """`device`, except that process `pid` (the orchestrator of a multi-GPU run) does not count as busy: it
    may hold a CUDA context from reading the GPUs' properties, but only reads pipes while workers measure."""
    return _Tolerating(device, lambda p: p == pid)


def tolerate_children_of(device, pid: int):
    """`device`, except that the children of `pid` (the other workers of one `bench commits`) do not count as
    busy: they hold a context on it but sit blocked on their pipe while this worker measures."""
    return _Tolerating(device, lambda p: parent_of(p) == pid)
