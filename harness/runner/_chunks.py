"""Chunks: consecutive stretches of back-to-back launches, each timed on the device's own timeline."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Chunk", "ChunkSource", "PipelinedChunks"]


@dataclass(frozen=True, kw_only=True)
class Chunk:
    index: int
    phase: str  # "warmin" or "window"
    t_start_ns: int  # host monotonic clock; the device's start mapped back from its end and duration
    t_end_ns: int
    device_ns: int
    launches: int

    @property
    def time_ns(self) -> float:
        return self.device_ns / self.launches


class ChunkSource(Protocol):
    def next(self) -> tuple[int, int, int]:
        """Run (or finish) one chunk and return (host end time ns, device ns, launches)."""

    def finish(self) -> None: ...


class PipelinedChunks:
    """Keeps one chunk queued ahead of the one being waited for, so the GPU never waits for the host.

    Each chunk is bracketed by two marks (CUDA events) on the launch stream; the host blocks on the
    older chunk's end mark while the next chunk is already queued. On a synchronous device (CPU) there is
    nothing to queue ahead, and the chunk's host end time is taken right after it ran.
    """

    def __init__(self, device, launcher, *, calls_per_chunk: int, clock=time.monotonic_ns) -> None:
        self._device = device
        self._launcher = launcher
        self._calls = max(1, calls_per_chunk)
        self._clock = clock
        self._lookahead = 1 if device.kind in ("cuda", "rocm") else 0
        self._pending: deque = deque()

    @property
    def launches_per_chunk(self) -> int:
        return self._calls * self._launcher.launches_per_call

    def _enqueue(self) -> None:
        start = self._device.mark()
        for _ in range(self._calls):
            self._launcher.enqueue()
        end = self._device.mark()
        self._pending.append((start, end))

    def next(self) -> tuple[int, int, int]:
        while len(self._pending) <= self._lookahead:
            self._enqueue()
        start, end = self._pending.popleft()
        self._device.wait(end)
        t_end = self._clock()
        return t_end, self._device.elapsed_ns(start, end), self.launches_per_chunk

    def finish(self) -> None:
        # The queued-ahead chunk still runs; wait for it so the next phase starts from a quiet device.
        self._device.synchronize()
        self._pending.clear()
