"""time = cycles / clock between two sets of repeats, each factor with the one interval procedure's interval.

Ratios are B over A for time and cycles, and A over B for the clock, so that for every pair

    time_B / time_A  ==  (cycles_B / cycles_A)  x  (clock_A / clock_B)

holds exactly: each factor is a ratio of geometric means over repeats, and log(time) = log(cycles) -
log(clock) for every repeat, so the means of the logs add up (medians would not). A clock factor above
1 means B ran at a lower clock, which made it slower by that factor. Intervals and the verdict are those of
`_interval` (a t interval on log values per repeat, paired where A and B were interleaved).

>>> from harness.analysis import VerdictRule, decompose
>>> d = decompose(time_a=[4.0, 4.01, 3.99], clock_a=[1500.0] * 3, time_b=[4.4, 4.41, 4.39], clock_b=[1500.0] * 3)
>>> round(d.time.value, 4), round(d.cycles.value, 4), round(d.clock.value, 4), d.verdict
(1.1, 1.1, 1.0, 'slower')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from harness.analysis._interval import VERDICTS, Ratio, VerdictRule, judge, ratio_interval
from harness.analysis._window import POWER_REASONS as _POWER, THERMAL_REASONS as _THERMAL

__all__ = ["VerdictRule", "Ratio", "Decomposition", "decompose", "geomean", "limiter_label", "VERDICTS"]


@dataclass(frozen=True, kw_only=True)
class Decomposition:
    time: Ratio  # time_B / time_A
    cycles: Ratio | None  # cycles_B / cycles_A (None without a clock on both sides)
    clock: Ratio | None  # clock_A / clock_B: the clock's factor in the time ratio
    verdict: str


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def decompose(
    *,
    time_a: Sequence[float],
    time_b: Sequence[float],
    clock_a: Sequence[float] | None = None,
    clock_b: Sequence[float] | None = None,
    rule: VerdictRule = VerdictRule(),
    paired: bool = False,
    pilot_a: int | None = None,
    pilot_b: int | None = None,
) -> Decomposition:
    """Decompose time B/A over repeats into cycles B/A x clock A/B (clocks per repeat, same order as times).

    `paired`: time_a[i] and time_b[i] come from the same repeat (A and B interleaved); `pilot_a`/`pilot_b`: the
    repeats a two-stage run fixed in advance (`ratio_interval`). Each factor gets its interval the same way.
    """
    if not time_a or not time_b:
        raise ValueError("decompose needs at least one repeat on each side")
    if any(t is None or not t > 0 for t in (*time_a, *time_b)):
        raise ValueError("times must be positive numbers")
    kw = dict(paired=paired, level=rule.level, pilot_a=pilot_a, pilot_b=pilot_b)
    lta, ltb = [math.log(t) for t in time_a], [math.log(t) for t in time_b]
    time = ratio_interval(lta, ltb, **kw)
    cycles = clock = None
    have_clock = clock_a is not None and clock_b is not None and all(
        c is not None and c > 0 for c in (*clock_a, *clock_b))
    if have_clock:
        if len(clock_a) != len(time_a) or len(clock_b) != len(time_b):
            raise ValueError("one clock per repeat is needed on each side")
        lca, lcb = [math.log(c) for c in clock_a], [math.log(c) for c in clock_b]
        cycles = ratio_interval([t + c for t, c in zip(lta, lca)], [t + c for t, c in zip(ltb, lcb)], **kw)
        clock = ratio_interval(lcb, lca, **{**kw, "pilot_a": pilot_b, "pilot_b": pilot_a})  # A over B: swapped
    verdict = judge(time, rule, n_a=len(time_a), n_b=len(time_b))
    return Decomposition(time=time, cycles=cycles, clock=clock, verdict=verdict)


def limiter_label(rows: Sequence[dict], *, max_clock_mhz: float | None = None) -> str:
    """What held the clock during the windows of these repeats, in words a reader can act on.

    "power cap 99%" (share of window time the driver reported a power limit), "thermal 40%", other
    reasons active in most samples by name, else "none (at max clock)" or "none".
    """
    from harness.analysis._stats import median

    parts = []
    pl_frac = median([r.get("power_limited_frac") for r in rows])
    th_frac = median([r.get("thermal_limited_frac") for r in rows])
    if pl_frac is not None and pl_frac >= 0.05:
        parts.append(f"power cap {pl_frac:.0%}")
    if th_frac is not None and th_frac >= 0.05:
        parts.append(f"thermal {th_frac:.0%}")
    shares: dict[str, float] = {}
    for r in rows:
        for part in (r.get("reason_names") or "").split("|"):
            name, _, share = part.partition(":")
            if name:
                shares[name] = max(shares.get(name, 0.0), float(share or 1))
    skip = {"gpu_idle"} | (_POWER if pl_frac is not None else set()) | (_THERMAL if th_frac is not None else set())
    parts += [n.replace("_", " ") for n, s in sorted(shares.items(), key=lambda kv: -kv[1])
              if s >= 0.5 and n not in skip]
    if parts:
        return ", ".join(parts)
    clock = median([r.get("sm_clock_mhz") for r in rows])
    if clock is not None and max_clock_mhz and clock >= max_clock_mhz - 1:
        return "none (NVML at max clock)"
    return "none"
