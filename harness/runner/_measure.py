"""One measurement under the sustained protocol: idle, warm-in until settled (or the cap), timed window.

The function takes its chunk source, clock, sleep and callbacks as arguments, so tests drive it with
scripted chunk times and a fake clock, and the real runner with CUDA events and time.monotonic_ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from harness.config import SustainedProtocol
from harness.runner._chunks import Chunk, ChunkSource
from harness.runner._settle import SettleCheck, check_settled

__all__ = ["PhaseTimes", "MeasureOutcome", "run_protocol"]


@dataclass(frozen=True, kw_only=True)
class PhaseTimes:
    idle: tuple[int, int]
    warmin: tuple[int, int]
    window: tuple[int, int]


@dataclass(kw_only=True)
class MeasureOutcome:
    chunks: list[Chunk] = field(default_factory=list)
    settled: bool = False
    settled_after_s: float | None = None
    settle: SettleCheck | None = None
    phases: PhaseTimes | None = None

    @property
    def window_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.phase == "window"]

    @property
    def warmin_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.phase == "warmin"]


def run_protocol(
    source_factory: Callable[[], ChunkSource],
    *,
    protocol: SustainedProtocol,
    idle_s: float,
    clock: Callable[[], int],
    sleep: Callable[[float], None],
    on_phase: Callable[[str], None] = lambda phase: None,
    on_chunk: Callable[[Chunk, SettleCheck | None], None] = lambda chunk, check: None,
    on_window_start: Callable[[], None] = lambda: None,
) -> MeasureOutcome:
    out = MeasureOutcome()
    on_phase("idle")
    idle_start = clock()
    sleep(idle_s)
    idle_end = clock()

    on_phase("warmin")
    source = source_factory()
    warm_start = clock()
    prev_end = warm_start
    points: list[tuple[float, float]] = []
    index = 0

    def take(phase: str) -> Chunk:
        nonlocal prev_end, index
        t_end, device_ns, launches = source.next()
        # The device start is the end minus its own duration; never earlier than the previous end, so
        # the queued-ahead chunk's queueing time is not counted twice.
        chunk = Chunk(index=index, phase=phase, t_start_ns=max(prev_end, t_end - device_ns), t_end_ns=t_end,
                      device_ns=device_ns, launches=launches)
        index += 1
        prev_end = t_end
        out.chunks.append(chunk)
        return chunk

    try:
        while True:
            chunk = take("warmin")
            elapsed = (chunk.t_end_ns - warm_start) * 1e-9
            points.append((elapsed, chunk.time_ns))
            check = check_settled(
                points, elapsed_s=elapsed, min_s=protocol.warmin_min_s, chunk_tol=protocol.settle_chunk_tol,
                trend_window_s=protocol.settle_trend_window_s, trend_tol=protocol.settle_trend_tol,
                block=protocol.settle_block_chunks,
            )
            out.settle = check
            on_chunk(chunk, check)
            if check.settled:
                out.settled, out.settled_after_s = True, elapsed
                break
            if elapsed >= protocol.warmin_cap_s:
                break
        warm_end = prev_end
        on_phase("window")
        on_window_start()
        window_start = prev_end
        while True:
            chunk = take("window")
            on_chunk(chunk, None)
            if (chunk.t_end_ns - window_start) * 1e-9 >= protocol.window_s:
                break
    finally:
        source.finish()
    out.phases = PhaseTimes(idle=(idle_start, idle_end), warmin=(warm_start, warm_end), window=(window_start, prev_end))
    return out
