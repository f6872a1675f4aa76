"""Reading amdsmi's values: numbers that may be "N/A", per-XCD lists, and cumulative counters that wrap.

Every unsupported value comes back from the amdsmi wrapper as the string "N/A" (its max-integer
sentinel), so `as_number` is the only way values are read: it returns None for anything that is not a
number. Shared by the amdsmi sampler and the amdsmi plumbing (`_amdsmi_device`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["as_number", "as_float", "as_list", "CounterBaseline", "U32_WRAP"]

def as_number(value: Any) -> int | float | None:
    """`value` when it is a finite number, else None: "N/A", None, lists, and bools (a bool is a flag, not a reading).

    >>> as_number(1755), as_number("N/A"), as_number(True)
    (1755, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def as_float(value: Any) -> float | None:
    """`as_number` as a float: every reading in a Sample is a float or None."""
    number = as_number(value)
    return None if number is None else float(number)


def as_list(value: Any) -> list:
    """A per-XCD list as a list; anything else (missing key, "N/A") as []."""
    return list(value) if isinstance(value, (list, tuple)) else []


U32_WRAP = 1 << 32  # the residency and accumulation counters are uint32 in gpu_metrics v1.6+ (kgd_pp_interface.h)


class CounterBaseline:
    """The last accepted reading of a set of cumulative counters, and what to do when one goes backwards.

    `wrap`: the counters are unsigned integers of that modulus in the firmware (amdsmi widens them to
    uint64 but cannot undo a wrap). A fall from below `wrap` that is less than half the range short of
    a full turn is a wrap, not a misread: the increase is counted modulo `wrap`.

    A fall is first taken as a misread (seen on the energy counter under concurrent reads): the reading
    is dropped and the old baseline kept, since the next reading is then consistent with it. A second
    fall in a row is taken as a restart (driver reload, GPU reset): the new reading becomes the baseline
    and the change in between is lost. Either way the caller flags the sample with the problem text.
    """

    def __init__(self, label: str, keys: tuple[str, ...], *, wrap: int | None = None) -> None:
        self.label, self.keys, self.wrap = label, keys, wrap
        self.base: tuple[int, ...] | None = None
        self.t: int | None = None
        self._doubt = False

    def accept(self, values: tuple[int, ...], t: int) -> None:
        self.base, self.t, self._doubt = values, t, False

    def step(self, values: tuple[int, ...], t: int) -> tuple[tuple[int, ...] | None, str | None]:
        """(increase over the baseline, problem). The first reading becomes the baseline; a rise is returned
        without moving the baseline (the caller `accept`s it when it has used it)."""
        if self.base is None:
            self.accept(values, t)
            return None, None
        deltas = tuple(self._delta(v, b) for v, b in zip(values, self.base))
        if min(deltas) >= 0:
            self._doubt = False
            return deltas, None
        i = min(range(len(deltas)), key=lambda j: deltas[j])
        what = f"{self.label} went backwards ({self.keys[i]} {self.base[i]} -> {values[i]})"
        if not self._doubt:
            self._doubt = True
            return None, f"{what}: reading dropped, the previous one stays the baseline"
        self.accept(values, t)
        return None, f"{what} twice in a row, taken as a restart: the change since the last good reading is lost"

    def _delta(self, value: int, base: int) -> int:
        if value >= base or self.wrap is None or not 0 <= value < self.wrap or base >= self.wrap:
            return value - base
        turned = value + self.wrap - base
        return turned if turned < self.wrap // 2 else value - base

