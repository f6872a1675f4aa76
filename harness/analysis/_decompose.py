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
from dataclasses import dataclass, replace
from typing import Sequence

from harness.analysis._interval import (
    VERDICTS,
    Ratio,
    VerdictRule,
    judge,
    paired_decision,
    ratio_from_look,
    ratio_interval,
)
from harness.analysis._sequential import Plan
from harness.analysis._stats import median
from harness.analysis._window import POWER_REASONS as _POWER, THERMAL_REASONS as _THERMAL

__all__ = ["VerdictRule", "Ratio", "Decomposition", "Plan", "decompose", "geomean", "limiter_label", "VERDICTS"]


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
    plan: Plan | None = None,
    between_cv: float = 0.0,
) -> Decomposition:
    """Decompose time B/A over repeats into cycles B/A x clock A/B (clocks per repeat, same order as times).

    `paired`: time_a[i] and time_b[i] come from the same repeat (A and B interleaved); `plan` its looks (None: one
    look on every pair; see `_sequential`). Independent sides: `pilot_a`/`pilot_b` the repeats a two-stage run of
    each side fixed in advance, `between_cv` the between-run variance of separate runs (`ratio_interval`). Cycles
    and clock get their intervals the same way, over the pairs the deciding look kept, so the identity holds for
    the estimates whichever look decided.
    """
    if not time_a or not time_b:
        raise ValueError("decompose needs at least one repeat on each side")
    if any(t is None or not t > 0 for t in (*time_a, *time_b)):
        raise ValueError("times must be positive numbers")
    lta, ltb = [math.log(t) for t in time_a], [math.log(t) for t in time_b]
    have_clock = clock_a is not None and clock_b is not None and all(
        c is not None and c > 0 for c in (*clock_a, *clock_b))
    if have_clock and (len(clock_a) != len(time_a) or len(clock_b) != len(time_b)):
        raise ValueError("one clock per repeat is needed on each side")
    lca = [math.log(c) for c in clock_a] if have_clock else None
    lcb = [math.log(c) for c in clock_b] if have_clock else None
    if paired and len(lta) == len(ltb) and len(lta) >= 2:
        return _decompose_paired(lta, ltb, lca, lcb, rule, plan or Plan(pilot=len(lta)))
    kw = dict(paired=paired, level=rule.level, pilot_a=pilot_a, pilot_b=pilot_b, between_cv=between_cv)
    time = ratio_interval(lta, ltb, **kw)
    cycles = clock = None
    if have_clock:
        cycles = ratio_interval([t + c for t, c in zip(lta, lca)], [t + c for t, c in zip(ltb, lcb)], **kw)
        clock = ratio_interval(lcb, lca, **{**kw, "pilot_a": pilot_b, "pilot_b": pilot_a})  # A over B: swapped
    verdict = judge(time, rule, n_a=len(time_a), n_b=len(time_b))
    return Decomposition(time=time, cycles=cycles, clock=clock, verdict=verdict)


def _decompose_paired(lta, ltb, lca, lcb, rule: VerdictRule, plan: Plan) -> Decomposition:
    import numpy as np

    diffs = np.array([b - a for a, b in zip(lta, ltb)])
    look, verdicts = paired_decision(diffs, plan, rule)
    time = ratio_from_look(look, level=rule.level)
    if time.dropped:
        time = replace(time, all_pairs=math.exp(float(diffs.mean())))
    verdict = judge(time, rule, n_a=look.pairs, n_b=look.pairs)
    if verdict not in ("too few repeats", "not judged"):
        verdict = str(verdicts[()])
    cycles = clock = None
    if lca is not None:
        kept = look.kept[: len(diffs)]
        cycles = _kept_ratio([t + c for t, c in zip(ltb, lcb)], [t + c for t, c in zip(lta, lca)], kept, look, rule)
        clock = _kept_ratio(lca, lcb, kept, look, rule)  # A over B
    return Decomposition(time=time, cycles=cycles, clock=clock, verdict=verdict)


def _kept_ratio(num: Sequence[float], den: Sequence[float], kept, look, rule: VerdictRule) -> Ratio:
    """exp(mean of num - den over the kept pairs), with the deciding look's critical values on their spread."""
    import numpy as np

    d = np.array([x - y for x, y, k in zip(num, den, kept) if k])
    centre = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    if not math.isfinite(se):
        return Ratio(value=math.exp(centre))
    c, e = float(look.crit), float(look.crit_eq)
    return Ratio(value=math.exp(centre), low=math.exp(centre - c * se), high=math.exp(centre + c * se),
                 eq_low=math.exp(centre - e * se), eq_high=math.exp(centre + e * se), df=float(len(d) - 1),
                 level=rule.level, method=ratio_from_look(look, level=rule.level).method,
                 estimator="mean of paired log ratios over the kept pairs" if look.number == 2 else
                 "ratio of geometric means")


def limiter_label(rows: Sequence[dict], *, max_clock_mhz: float | None = None) -> str:
    """What held the clock during the windows of these repeats, in words a reader can act on.

    "power cap 99%" (share of window time the driver reported a power limit), "thermal 40%", other
    reasons active in most samples by name, else "none (at max clock)" or "none".
    """
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
