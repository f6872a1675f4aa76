"""The one interval procedure: every ratio B/A a comparison prints, its interval and its verdict.

The unit of replication is the repeat: each repeat of the protocol (idle, warm-in, window) gives one time per
launch, and repeats are what vary from one try to the next (the chunks inside one window are not independent:
they share the clock's state). A ratio is the ratio of geometric means over repeats, exp(mean log B - mean log A),
so that time = cycles x clock holds exactly for the estimates, and its interval is a Student t interval on log
time per repeat:

- independent sides (two runs, or two inputs measured one after the other): Welch's t, with the
  Welch-Satterthwaite degrees of freedom;
- interleaved sides (A and B measured in turn within every repeat, their order alternating: the revisions of
  `bench commits`, two kernels of one run): t on the per-repeat differences log B_r - log A_r, n - 1 degrees of
  freedom. The pairing removes what drifts between repeats (the card's temperature, the host's load), and the
  alternating order turns a steady drift within a repeat into noise instead of a bias.

Why not a bootstrap over repeats: with 2 or 3 repeats a side it resamples a handful of values and its "95 %"
interval excluded 1 in 20-30 % of A/A comparisons (simulated). Why a t interval on logs: times are positive and
their noise is multiplicative; on the log scale it is close to normal, where the t interval is exact.
`tests/analysis/test_interval_calibration.py` drives this procedure with simulated A/A data and shows its false
"slower/faster" rate at the stated level.

Adaptive repeats (`--until-ci`) use Stein's two-stage procedure, which keeps the level exact: the variance is
estimated from the first `pilot` repeats only, the number of repeats N is chosen from it, and the interval is
mean over all N +- t(pilot - 1) x s_pilot / sqrt(N). Stopping when a width computed from all repeats so far
falls below the target would not: it stops when the spread happens to look small (simulated: 8-12 % false
verdicts at a stated 5 %).

The verdict of a ratio against a threshold (`VerdictRule.threshold`: the user's `--fail-on-slowdown` where one is
given, the stated default otherwise):
- `slower` / `faster`: the interval excludes 1 and the point estimate moved by more than the threshold;
- `same`: the interval excludes 1 but the change is within the threshold, or it includes 1 and its half-width is
  within the threshold (no change as large as the threshold went unseen);
- `unresolved`: the interval includes 1 and is wider than the threshold: the measurement cannot tell a change of
  that size from noise (more repeats, `--until-ci`, would);
- `too few repeats`: fewer than `min_repeats` a side, so no spread to judge by;
- `not judged`: the rule draws no verdict (`judged=False`: CPU timings without a threshold asked for, see
  `_caveats.rule_for`); the ratio and its interval are still given.
A false `slower` or `faster` therefore needs the interval to exclude 1, which happens at most 1 - level of the
time when nothing changed.

>>> r = ratio_interval([0.0, 0.002, -0.002], [0.01, 0.012, 0.008])
>>> round(r.value, 5), r.method, r.df, judge(r, VerdictRule(), n_a=3, n_b=3)
(1.01005, 'Welch t', 4.0, 'slower')
>>> round(t_quantile(0.975, 2.0), 4), round(t_quantile(0.975, 1e9), 4)
(4.3027, 1.96)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Sequence

__all__ = ["DEFAULT_THRESHOLD", "INTERVAL_METHODS", "Ratio", "VERDICTS", "VerdictRule", "judge", "percent",
           "ratio_interval", "stein_total", "t_quantile"]

DEFAULT_THRESHOLD = 0.005  # 0.5 %: the default smallest change called slower or faster
VERDICTS = ("faster", "slower", "same", "unresolved", "too few repeats", "not judged")
INTERVAL_METHODS = ("Welch t", "paired t", "Welch t (two-stage)", "paired t (two-stage)")


def percent(frac: float | None) -> str:
    """A threshold or a half-width as every output writes it: `0.3`, `0.058`, `5.5`, `3900` (percent, no sign)."""
    if frac is None:
        return "-"
    x = frac * 100
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}"


@dataclass(frozen=True, kw_only=True)
class VerdictRule:
    """How a ratio becomes a verdict (see the module doc). `threshold_source` says where the threshold came from,
    so every output can state the threshold it actually applied ("default", "--fail-on-slowdown 0.3%")."""

    level: float = 0.95
    threshold: float = DEFAULT_THRESHOLD
    threshold_source: str = "default"
    min_repeats: int = 2
    judged: bool = True  # False: ratios and intervals only, no verdict (CPU dry runs without a threshold)

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"confidence level must be in (0, 1), got {self.level}")
        if not self.threshold >= 0 or self.min_repeats < 2:
            raise ValueError("threshold >= 0 and min_repeats >= 2 are required")

    def with_threshold(self, threshold: float | None, *, source: str) -> "VerdictRule":
        """This rule judged at the user's threshold (`None`: unchanged, the default stays and says so)."""
        return self if threshold is None else replace(self, threshold=threshold, threshold_source=source)

    @property
    def threshold_text(self) -> str:
        """`0.3 % (--fail-on-slowdown 0.3%)` or `0.5 % (default)`: the threshold as every output names it."""
        if not self.judged:
            return f"none ({self.threshold_source}: not judged)"
        return f"{percent(self.threshold)} % ({self.threshold_source})"

    def describe(self) -> str:
        return (f"slower / faster: the {self.level:.0%} t interval of time B/A on log time per repeat (paired by "
                f"repeat where A and B were interleaved, Welch otherwise) excludes 1 and |B/A - 1| > "
                f"{self.threshold_text}; unresolved: the interval includes 1 and is wider than that threshold; same "
                f"otherwise; no verdict with fewer than {self.min_repeats} repeats a side")


@dataclass(frozen=True, kw_only=True)
class Ratio:
    """A ratio B/A (geometric means over repeats) and its t interval; `low`/`high` are None without one."""

    value: float
    low: float | None = None
    high: float | None = None
    method: str = ""  # one of INTERVAL_METHODS, "" without an interval
    df: float | None = None
    level: float | None = None

    @property
    def change(self) -> float:
        return self.value - 1.0

    def excludes_one(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)

    @property
    def resolution(self) -> float | None:
        """The smallest change this comparison could have called: the interval's half-width, as a fraction.

        The interval is symmetric in log time about the estimate, so an estimate that moved by more than this
        would have excluded 1."""
        if self.low is None or self.high is None:
            return None
        return math.exp(0.5 * (math.log(self.high) - math.log(self.low))) - 1.0


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast below this point; use the symmetry above it
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t for 0.5 <= p < 1 (df may be fractional, as Welch's is)."""
    if not 0.5 <= p < 1 or not df > 0:
        raise ValueError("t_quantile needs 0.5 <= p < 1 and df > 0")
    if p == 0.5:
        return 0.0
    q = 1.0 - p
    lo, hi = 0.0, 1.0
    while _t_upper_tail(hi, df) > q:
        lo, hi = hi, hi * 2.0
    # Newton on the tail (its derivative is minus the density), kept inside the bracket by bisection steps.
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    x = 0.5 * (lo + hi)
    for _ in range(100):
        f = _t_upper_tail(x, df) - q
        if f > 0:
            lo = x
        else:
            hi = x
        density = math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))
        step = f / density if density > 0 else 0.0
        nxt = x + step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - x) <= 1e-14 * max(1.0, x) or hi - lo <= 1e-14 * max(1.0, hi):
            return nxt
        x = nxt
    return x


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _var(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _pilot(n: int, pilot: int | None) -> int:
    if pilot is None:
        return n
    if not 2 <= pilot <= n:
        raise ValueError(f"a pilot of {pilot} repeats needs 2 <= pilot <= {n} (the repeats there are)")
    return pilot


def ratio_interval(log_a: Sequence[float], log_b: Sequence[float], *, paired: bool = False, level: float = 0.95,
                   pilot_a: int | None = None, pilot_b: int | None = None) -> Ratio:
    """exp(mean log_b - mean log_a) and its t interval (see the module doc), logs in repeat order.

    `paired`: log_a[i] and log_b[i] were measured in the same repeat. `pilot_a`/`pilot_b`: the repeats a
    two-stage (adaptive) run fixed in advance; its variance comes from those first repeats only. Fewer than two
    repeats (pairs) on a side give the value alone.
    """
    na, nb = len(log_a), len(log_b)
    if not na or not nb:
        raise ValueError("an interval needs at least one repeat on each side")
    value = math.exp(_mean(log_b) - _mean(log_a))
    if paired:
        if na != nb:
            raise ValueError(f"paired repeats need as many on each side, got {na} and {nb}")
        if pilot_a != pilot_b:
            raise ValueError("paired repeats share one pilot")
        if na < 2:
            return Ratio(value=value)
        diffs = [b - a for a, b in zip(log_a, log_b)]
        k = _pilot(na, pilot_a)
        se2, df = _var(diffs[:k]) / na, float(k - 1)
        method = "paired t" if pilot_a is None else "paired t (two-stage)"
    else:
        if na < 2 or nb < 2:
            return Ratio(value=value)
        ka, kb = _pilot(na, pilot_a), _pilot(nb, pilot_b)
        va, vb = _var(log_a[:ka]) / na, _var(log_b[:kb]) / nb
        se2 = va + vb
        # Welch-Satterthwaite; with one side exactly constant its df are the other side's.
        df = se2 ** 2 / (va ** 2 / (ka - 1) + vb ** 2 / (kb - 1)) if se2 > 0 else float(min(ka, kb) - 1)
        method = "Welch t" if pilot_a is None and pilot_b is None else "Welch t (two-stage)"
    half = t_quantile((1 + level) / 2, df) * math.sqrt(se2)
    centre = math.log(value)
    return Ratio(value=value, low=math.exp(centre - half), high=math.exp(centre + half), method=method, df=df,
                 level=level)


def stein_total(pilot_logs: Sequence[float], *, target: float, level: float = 0.95, cap: int) -> int:
    """Repeats (pairs) a two-stage run needs so that its interval half-width is at most `target` (a fraction),
    from the pilot's log values (paired: the per-repeat differences); at most `cap`, at least the pilot."""
    k = len(pilot_logs)
    if k < 2:
        raise ValueError("a pilot needs at least two repeats")
    if not target > 0:
        raise ValueError("the target half-width must be > 0")
    half = math.log1p(target)  # half-width in log time
    s = math.sqrt(_var(pilot_logs))
    need = math.ceil((t_quantile((1 + level) / 2, k - 1) * s / half) ** 2) if s > 0 else k
    return max(k, min(cap, need))


def judge(time: Ratio, rule: VerdictRule, *, n_a: int, n_b: int) -> str:
    """The verdict of a time ratio B/A under `rule` (one of VERDICTS; see the module doc)."""
    if min(n_a, n_b) < rule.min_repeats or time.low is None:
        return "too few repeats"
    if not rule.judged:
        return "not judged"
    if time.excludes_one():
        if abs(time.change) > rule.threshold:
            return "slower" if time.value > 1 else "faster"
        return "same"
    return "unresolved" if time.resolution > rule.threshold else "same"
