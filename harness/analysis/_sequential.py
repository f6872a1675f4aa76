"""The sequential design of interleaved comparisons: two looks, the level spent across both.

Interleaved A/B repeats give one paired log difference d_i = log B_i - log A_i per pair. Sustained GPU repeats
are not normal: the H200 shows a second state about 0.8 % faster in 5-20 % of repeats, slow drift, correlated
neighbours and heavy tails (docs/verdicts.md). A paired t interval is exact for normal noise but one fast repeat
in a pilot of 5 widens it past a 0.3 % threshold, and Stein's second stage keeps that pilot's variance, so more
pairs do not help. So:

- **look 1**, after the pilot of n1 >= 5 pairs: the paired t statistic (mean of d over its standard error);
- **look 2**, only when look 1 is `unresolved`, on all n2 pairs: a *skipped mean*. Pairs farther than
  `SKIP_CUT` x MADN from the median of d are dropped (the Hampel identifier; MADN = median |d - median| / 0.6745,
  2.24 = sqrt of chi-square(1)'s 0.975 quantile, Wilcox's modified one-step rule), and the mean of the rest with
  its standard error is the statistic. A repeat caught in the other state is such a pair; a normal pair is kept
  (about 2.5 % are dropped from normal data).

The critical values of both looks are simulated together under normal noise, so that P(look 1 rejects or look 2
rejects) is exactly 1 - level (a Pocock-style split: each look gets the same nominal tail alpha'). Stopping at
look 1 (when it resolves) only removes paths, so the stated level is an upper bound whatever the stopping rule
does (the futility stop is non-binding). The same is done one-sided for the equivalence test (`same` = TOST: the
interval at 1 - 2 (1 - level) inside the threshold). The statistic of look 2 is pivotal under normal noise, so
one simulated table serves every scale of noise; under the heavy tails and two states of real repeats the
simulation in `benchmarks/verdict_simulation.py` shows the false-verdict rate stays below the level.

Everything here works on the last axis of numpy arrays, so the simulation drives the same functions the
harness calls on one comparison (a 1-d array).

>>> import numpy as np
>>> plan = Plan(pilot=5, total=10)
>>> d = np.log([1.003, 1.002, 1.004, 1.003, 1.003])
>>> look = paired_look(d, plan, level=0.95)
>>> look.number, look.looks, look.method, round(float(np.exp(look.estimate)), 4)
(1, 2, 'paired t', 1.003)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from harness.analysis._sequential_table import CRITICAL_TABLE, TABLE_LEVEL, TABLE_TRIALS
from harness.analysis._tdist import t_quantile

if TYPE_CHECKING:  # numpy is imported where it is used: `import harness.analysis` loads none of it
    import numpy as np

__all__ = ["MIN_GATE_PILOT", "Look", "Plan", "SKIP_CUT", "critical_values", "paired_look", "skipped_mean",
           "simulate_critical_values"]

MIN_GATE_PILOT = 5  # no gate judges a pilot of fewer interleaved pairs (4 degrees of freedom)
SKIP_CUT = 2.24  # pairs farther than this many MADN from the median are dropped at look 2
_MADN = 0.6745  # MAD / this estimates the standard deviation of normal data
SIM_SEED = 20261204  # the simulated critical values are a fixed function of (n1, n2, level)


@dataclass(frozen=True)
class Plan:
    """The looks of an interleaved comparison: the pilot's pairs (look 1) and the pairs look 2 is planned at
    (`total`; None: one look only, the pilot is the whole comparison)."""

    pilot: int
    total: int | None = None

    def __post_init__(self) -> None:
        if self.pilot < 2:
            raise ValueError(f"a pilot needs at least 2 pairs, got {self.pilot}")
        if self.total is not None and self.total <= self.pilot:
            raise ValueError(f"look 2 must come after the pilot ({self.pilot} pairs), got {self.total}")

    @property
    def sequential(self) -> bool:
        return self.total is not None


@dataclass(frozen=True)
class Look:
    """One look's estimate of mean log B/A, with its intervals' critical values.

    `estimate` and `se` are in log time (arrays over trials when the input had a leading axis); the interval is
    estimate +- `crit` x se at the comparison's level and the equivalence interval estimate +- `crit_eq` x se.
    `kept` marks the pairs the estimate used (all at look 1), `df` the degrees of freedom of the kept pairs."""

    number: int  # 1 or 2
    looks: int  # the looks the plan has: 1 (a fixed number of pairs) or 2 (the sequential design)
    method: str  # "paired t" or "skipped mean"
    pairs: int
    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    crit: np.ndarray
    crit_eq: np.ndarray
    kept: np.ndarray


def skipped_mean(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard error, kept mask) of the pairs within SKIP_CUT MADN of the median, on the last axis.

    With MADN 0 (half the values equal) nothing is dropped: there is no scale to call a value far by."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    med = np.median(d, axis=-1, keepdims=True)
    dev = np.abs(d - med)
    madn = np.median(dev, axis=-1, keepdims=True) / _MADN
    kept = np.where(madn > 0, dev <= SKIP_CUT * madn, True)
    nk = kept.sum(axis=-1)
    mean = np.where(kept, d, 0.0).sum(axis=-1) / nk
    ss = np.where(kept, (d - mean[..., None]) ** 2, 0.0).sum(axis=-1)
    se = np.sqrt(ss / np.maximum(nk - 1, 1)) / np.sqrt(nk)
    return mean, se, kept


def _paired_t(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = d.shape[-1]
    return d.mean(axis=-1), d.std(axis=-1, ddof=1) / math.sqrt(n)


def simulate_critical_values(n1: int, n2: int, level: float, *, trials: int = 200_000,
                             seed: int = SIM_SEED) -> tuple[float, float, float, float]:
    """(look-1 two-sided, look-2 two-sided, look-1 one-sided, look-2 one-sided) critical values of the two-look
    design under normal noise: each look gets the tail alpha' for which the union of the looks' rejections has
    probability 1 - level (two-sided), and likewise one-sided for the equivalence test."""
    import numpy as np

    rng = np.random.default_rng([seed, n1, n2, round(level * 1e6)])
    z = rng.standard_normal((trials, n2))
    m1, s1 = _paired_t(z[:, :n1])
    m2, s2, _ = skipped_mean(z)
    t1, t2 = m1 / s1, m2 / s2
    alpha = 1.0 - level
    out = []
    for a1, a2 in ((np.abs(t1), np.abs(t2)), (t1, t2)):
        s1_sorted, s2_sorted = np.sort(a1), np.sort(a2)
        q = lambda s, a: float(s[min(len(s) - 1, int(math.ceil((1 - a) * len(s))) - 1)])
        lo, hi = alpha / 2, alpha  # alpha' lies between Bonferroni's split and the whole alpha
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            union = np.mean((a1 > q(s1_sorted, mid)) | (a2 > q(s2_sorted, mid)))
            lo, hi = (mid, hi) if union <= alpha else (lo, mid)
        out.append((q(s1_sorted, lo), q(s2_sorted, lo)))
    (c1, c2), (e1, e2) = out
    return c1, c2, e1, e2


@lru_cache(maxsize=512)
def critical_values(n1: int, n2: int, level: float) -> tuple[float, float, float, float]:
    """The two-look critical values for a pilot of n1 and look 2 at n2 pairs: from the committed table
    (`_sequential_table.py`, made by `python -m benchmarks.verdict_simulation --table`), else simulated now
    with the same seed and trials, so either way they are one fixed function of (n1, n2, level)."""
    if level == TABLE_LEVEL and (n1, n2) in CRITICAL_TABLE:
        return CRITICAL_TABLE[(n1, n2)]
    return simulate_critical_values(n1, n2, level, trials=TABLE_TRIALS)


def _t_crit(df: int, level: float) -> tuple[float, float]:
    return t_quantile((1 + level) / 2, df), t_quantile(level, df)


def paired_look(d, plan: Plan, *, level: float = 0.95) -> Look:
    """The look that decides an interleaved comparison of the pairs `d` (log B - log A, in repeat order).

    With `len(d) <= plan.pilot` (or a one-look plan) this is look 1 on the pilot's pairs; otherwise look 2 on all
    of them (the caller moves on to look 2 only when look 1 was unresolved: `Plan` records that look 2 was
    planned). A one-look plan uses the plain t quantiles; a two-look plan the simulated ones."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    if n < 2:
        raise ValueError("a look needs at least 2 pairs")
    if not plan.sequential or n <= plan.pilot:
        k = min(n, plan.pilot) if plan.sequential else n
        mean, se = _paired_t(d[..., :k])
        if plan.sequential and k == plan.pilot:
            c, _c2, e, _e2 = critical_values(plan.pilot, plan.total, level)
        else:
            c, e = _t_crit(k - 1, level)
        kept = np.zeros(d.shape, dtype=bool)
        kept[..., :k] = True
        return Look(number=1, looks=2 if plan.sequential else 1, method="paired t", pairs=k, estimate=mean, se=se, df=np.full(mean.shape, k - 1),
                    crit=np.full(mean.shape, c), crit_eq=np.full(mean.shape, e), kept=kept)
    _c1, c, _e1, e = critical_values(plan.pilot, n, level)
    mean, se, kept = skipped_mean(d)
    return Look(number=2, looks=2, method="skipped mean", pairs=n, estimate=mean, se=se, df=kept.sum(axis=-1) - 1,
                crit=np.full(mean.shape, c), crit_eq=np.full(mean.shape, e), kept=kept)
