"""Every wait on a child has a deadline: `Deadline` on an injected clock, `WaitExpired` when it passes."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["Deadline", "WaitExpired", "finite"]


class WaitExpired(TimeoutError):
    """A wait on a child reached its deadline (the child is left as it is: the caller decides)."""


def finite(timeout: float | None) -> float:
    if timeout is None or not math.isfinite(timeout) or timeout < 0:
        raise ValueError(f"every wait on a child process needs a deadline: timeout={timeout!r}")
    return float(timeout)


class Deadline:
    """`seconds` from now on `clock`; `restart` moves it (a child announced a longer stretch)."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.restart(seconds)

    def restart(self, seconds: float) -> None:
        self.seconds = finite(seconds)
        self._at = self._clock() + self.seconds

    def left(self) -> float:
        return max(0.0, self._at - self._clock())

    def expired(self) -> bool:
        return self._clock() >= self._at
