"""time = cycles / clock between two sets of repeats, with bootstrap intervals and a stated verdict rule.

Ratios are B over A for time and cycles, and A over B for the clock, so that for every pair

    time_B / time_A  ==  (cycles_B / cycles_A)  x  (clock_A / clock_B)

holds exactly: each factor is a ratio of geometric means over repeats, and log(time) = log(cycles) -
log(clock) for every repeat, so the means of the logs add up (medians would not). A clock factor above
1 means B ran at a lower clock, which made it slower by that factor.

>>> from harness.analysis import VerdictRule, decompose
>>> d = decompose(time_a=[4.0, 4.0], clock_a=[1500.0, 1500.0], time_b=[4.4, 4.4], clock_b=[1500.0, 1500.0])
>>> round(d.time.value, 6), round(d.cycles.value, 6), round(d.clock.value, 6), d.verdict
(1.1, 1.1, 1.0, 'slower')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence
from harness.analysis._window import POWER_REASONS as _POWER, THERMAL_REASONS as _THERMAL

__all__ = ["VerdictRule", "Ratio", "Decomposition", "decompose", "geomean", "limiter_label", "VERDICTS"]

VERDICTS = ("faster", "slower", "same", "too few repeats")


@dataclass(frozen=True, kw_only=True)
class VerdictRule:
    """B is `slower` (`faster`) than A when the bootstrap interval of time B/A lies wholly above (below) 1
    and the point estimate moved by more than `min_change`; otherwise `same`. Fewer than `min_repeats`
    repeats on either side give no interval worth the name, so no verdict ("too few repeats")."""

    level: float = 0.95
    min_change: float = 0.005
    min_repeats: int = 2
    resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"confidence level must be in (0, 1), got {self.level}")
        if self.min_change < 0 or self.resamples < 1 or self.min_repeats < 1:
            raise ValueError("min_change >= 0, resamples >= 1 and min_repeats >= 1 are required")

    def describe(self) -> str:
        return (f"slower / faster: the {self.level:.0%} bootstrap interval of time B/A (over repeats, "
                f"{self.resamples} resamples, seed {self.seed}) excludes 1 and |B/A - 1| > {self.min_change:.1%}; "
                f"same otherwise; no verdict with fewer than {self.min_repeats} repeats a side")


@dataclass(frozen=True, kw_only=True)
class Ratio:
    """A ratio and its bootstrap interval (None where there is nothing to resample)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def change(self) -> float:
        return self.value - 1.0

    def excludes_one(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)


@dataclass(frozen=True, kw_only=True)
class Decomposition:
    time: Ratio  # time_B / time_A
    cycles: Ratio | None  # cycles_B / cycles_A (None without a clock on both sides)
    clock: Ratio | None  # clock_A / clock_B: the clock's factor in the time ratio
    verdict: str


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _ratio(log_a, log_b, idx_a, idx_b, level: float) -> Ratio:
    """exp(mean(log_b) - mean(log_a)) with a percentile interval over the shared resample indices."""
    import numpy as np

    value = float(np.exp(log_b.mean() - log_a.mean()))
    if idx_a is None:
        return Ratio(value=value)
    boot = np.exp(log_b[idx_b].mean(axis=1) - log_a[idx_a].mean(axis=1))
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return Ratio(value=value, low=float(lo), high=float(hi))


def decompose(
    *,
    time_a: Sequence[float],
    time_b: Sequence[float],
    clock_a: Sequence[float] | None = None,
    clock_b: Sequence[float] | None = None,
    rule: VerdictRule = VerdictRule(),
) -> Decomposition:
    """Decompose time B/A over repeats into cycles B/A x clock A/B (clocks per repeat, same order as times).

    The repeats of A and of B are resampled independently (they were not measured in pairs), and the
    same resample indices serve all three factors, so each resample obeys the identity too.
    """
    import numpy as np

    if not time_a or not time_b:
        raise ValueError("decompose needs at least one repeat on each side")
    if any(t is None or not t > 0 for t in (*time_a, *time_b)):
        raise ValueError("times must be positive numbers")
    lta, ltb = np.log(np.asarray(time_a, float)), np.log(np.asarray(time_b, float))
    enough = min(len(time_a), len(time_b)) >= rule.min_repeats
    idx_a = idx_b = None
    if enough:
        rng = np.random.default_rng(rule.seed)
        idx_a = rng.integers(0, len(time_a), size=(rule.resamples, len(time_a)))
        idx_b = rng.integers(0, len(time_b), size=(rule.resamples, len(time_b)))
    time = _ratio(lta, ltb, idx_a, idx_b, rule.level)
    cycles = clock = None
    have_clock = clock_a is not None and clock_b is not None and all(
        c is not None and c > 0 for c in (*clock_a, *clock_b))
    if have_clock:
        if len(clock_a) != len(time_a) or len(clock_b) != len(time_b):
            raise ValueError("one clock per repeat is needed on each side")
        lca, lcb = np.log(np.asarray(clock_a, float)), np.log(np.asarray(clock_b, float))
        cycles = _ratio(lta + lca, ltb + lcb, idx_a, idx_b, rule.level)
        clock = _ratio(lcb, lca, idx_b, idx_a, rule.level)  # A over B: swap the roles
    if not enough:
        verdict = "too few repeats"
    elif time.excludes_one() and abs(time.change) > rule.min_change:
        verdict = "slower" if time.value > 1 else "faster"
    else:
        verdict = "same"
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
