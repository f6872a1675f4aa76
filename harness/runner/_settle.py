"""The stopping rule of the warm-in, as pure functions of the chunks seen so far."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["SettleCheck", "check_settled", "trend_change"]


@dataclass(frozen=True, kw_only=True)
class SettleCheck:
    settled: bool
    chunk_change: float | None  # |last - previous| / previous, time per launch
    trend_change: float | None  # fitted change over the trailing window / mean
    reason: str


def trend_change(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (t_s, value) times the span, over the mean: the fitted relative change."""
    n = len(points)
    if n < 3:
        return None
    ts = [p[0] for p in points]
    ys = [p[1] for p in points]
    mt, my = sum(ts) / n, sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx == 0 or my == 0:
        return None
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / sxx
    return slope * (ts[-1] - ts[0]) / my


def check_settled(
    chunks: Sequence[tuple[float, float]],
    *,
    elapsed_s: float,
    min_s: float,
    chunk_tol: float,
    trend_window_s: float,
    trend_tol: float,
    block: int = 1,
) -> SettleCheck:
    """`chunks` are (end time in s since warm-in start, time per launch). Settled when, after `min_s`,
    the last two chunks agree within `chunk_tol` AND the trend over the trailing `trend_window_s` moves
    time per launch by less than `trend_tol` (the paper's two-chunk rule alone passed while cuDNN still
    drifted for 4-8 s on the H200 here).

    `block` > 1 applies the two-chunk rule to the means of the last `block` chunks and the `block` before
    them: at the 700 W cap the H200's power controller cycles with a ~1 s period, so single 0.5 s chunks
    alternate by ~1 % and never agree within 0.3 % even when the mean has long stopped moving."""
    if len(chunks) < 2 * block:
        return SettleCheck(settled=False, chunk_change=None, trend_change=None, reason=f"fewer than {2 * block} chunks")
    prev = sum(c[1] for c in chunks[-2 * block : -block]) / block
    last = sum(c[1] for c in chunks[-block:]) / block
    change = abs(last - prev) / prev if prev else float("inf")
    t_end = chunks[-1][0]
    trailing = [c for c in chunks if c[0] >= t_end - trend_window_s - 1e-9]
    trend = trend_change(trailing)
    covered = trailing[-1][0] - trailing[0][0] if trailing else 0.0
    if elapsed_s < min_s:
        return SettleCheck(settled=False, chunk_change=change, trend_change=trend, reason="minimum warm-in not reached")
    if not change <= chunk_tol:
        return SettleCheck(settled=False, chunk_change=change, trend_change=trend,
                           reason="last two chunks disagree" if block == 1 else f"last two {block}-chunk blocks disagree")
    # Chunks are stamped at their ends, so a trailing window of W seconds of chunks spans W minus one chunk.
    chunk_len = chunks[-1][0] - chunks[-2][0]
    if trend is None or covered + chunk_len < trend_window_s - 1e-9:
        return SettleCheck(settled=False, chunk_change=change, trend_change=trend, reason="trend window not yet full")
    if not abs(trend) <= trend_tol:
        return SettleCheck(settled=False, chunk_change=change, trend_change=trend, reason="still drifting")
    return SettleCheck(settled=True, chunk_change=change, trend_change=trend, reason="settled")
