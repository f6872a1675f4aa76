"""The one interval procedure: every ratio B/A a comparison prints, its interval and its verdict.

The unit of replication is the repeat: each repeat of the protocol (idle, warm-in, window) gives one time per
launch, and repeats are what vary from one try to the next (the chunks inside one window share the clock's
state). A ratio is exp(mean log B - mean log A) over repeats, so that time = cycles x clock holds exactly for the
estimates, with an interval on log time per repeat:

- interleaved sides (A and B in turn within every repeat, their order alternating: the revisions of `bench
  commits`, two kernels of one run, a capture and its controls): the per-repeat differences log B_r - log A_r.
  With one look (a fixed number of repeats) a paired t interval. With the sequential design (`Plan`: a pilot of at
  least 5 pairs, look 2 planned at `--max-repeats`), look 1 is the paired t on the pilot and, only when look 1 is
  unresolved, look 2 is a skipped mean of all pairs (pairs far from the median dropped, so a repeat caught in the
  GPU's other state cannot hold the width open), with critical values simulated so that the two looks together
  keep the level (`_sequential`);
- independent sides within one run: Welch's t;
- separate runs (`compare A B`, nightly against a baseline): Welch's t plus a between-run variance, since two
  runs (another process, another hour) differ by more than their own repeats show. Its coefficient of variation
  is the rule's `between_runs_cv`: measured (a history of nights, `--between-runs-cv`) or the stated default for
  the device kind (`BETWEEN_RUNS_CV`), and it sets the smallest threshold such a comparison can call `same`.

The verdict against the threshold T (`VerdictRule.threshold`: the user's `--fail-on-slowdown` where given, the
stated default otherwise), with I the level's two-sided interval and E the equivalence interval (two one-sided
tests at 1 - level each: the 90 % interval at the 95 % level):
- `slower` / `faster`: I excludes 1 and the estimate is beyond T. The only verdict a gate fails on;
- `slower, within threshold` / `faster, within threshold`: I excludes 1 and E lies inside (1 - T, 1 + T): a real
  change, shown to be smaller than T;
- `same`: I includes 1 and E lies inside (1 - T, 1 + T): no change as large as T (TOST);
- `unresolved`: anything else: the measurement cannot say whether a change of T happened. A gate does not pass it
  (exit 6, `--unresolved pass` to let it);
- `too few repeats`: fewer than `min_repeats` a side, or fewer than 2 degrees of freedom (an interval with one
  degree of freedom never judges), or an interval wider than the estimate itself (`Ratio.usable`);
- `not judged`: the rule draws no verdict (`judged=False`: CPU timings without a threshold asked for).
So a false `slower` or `faster` needs I to exclude the truth (at most 1 - level), and a `same` on a true change of
T needs E to miss it (at most (1 - level) on that side).

>>> r = ratio_interval([0.0, 0.002, -0.002], [0.01, 0.012, 0.008])
>>> round(r.value, 5), r.method, r.df, judge(r, VerdictRule(), n_a=3, n_b=3)
(1.01005, 'Welch t', 4.0, 'slower')
>>> judge(ratio_interval([0.0, 0.002, -0.002], [0.001, 0.003, -0.001]), VerdictRule(threshold=0.02), n_a=3, n_b=3)
'same'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import TYPE_CHECKING, Sequence

from harness.analysis._sequential import Look, Plan, paired_look
from harness.analysis._tdist import t_quantile, t_quantiles

if TYPE_CHECKING:  # numpy is imported where it is used: `import harness.analysis` loads none of it
    import numpy as np

__all__ = ["BETWEEN_RUNS_CV", "between_runs_floor", "DEFAULT_THRESHOLD", "FAILING", "INTERVAL_METHODS", "OPEN", "Ratio", "VERDICTS",
           "VerdictRule", "classify", "judge", "paired_decision", "percent", "ratio_from_look",
           "ratio_interval", "stein_total", "t_quantile", "welch"]

DEFAULT_THRESHOLD = 0.005  # 0.5 %: the default smallest change called slower or faster
SLOWER_WITHIN, FASTER_WITHIN = "slower, within threshold", "faster, within threshold"
VERDICTS = ("faster", "slower", "same", SLOWER_WITHIN, FASTER_WITHIN, "unresolved", "too few repeats", "not judged")
FAILING = ("slower",)  # the verdicts a gate fails on (exit 1)
OPEN = ("unresolved", "too few repeats")  # the verdicts a gate could not judge (exit 6 unless --unresolved pass)
INTERVAL_METHODS = ("Welch t", "paired t", "Welch t (two-stage)", "Welch t + between-run", "paired t (look 1 of 2)",
                    "skipped mean (look 2 of 2)")
# Separate runs differ by more than their repeats show (the H200: a state 0.6-1.0 % apart that a run can stay in,
# drift over hours, another process's allocations). Stated defaults until a history or the user measures it:
BETWEEN_RUNS_CV = {"gpu": 0.005, "cpu": 0.05}
MIN_DF = 2  # an interval with one degree of freedom never judges
_DF_SLACK = 1e-9  # Welch's df of two equally spread sides is 2 up to rounding in the logs


def percent(frac: float | None) -> str:
    """A threshold or a half-width as every output writes it: `0.3`, `0.058`, `5.5`, `3900` (percent, no sign)."""
    if frac is None:
        return "-"
    x = frac * 100
    # from 99.5 on, two significant digits would round to 100 and be written "1e+02"
    return f"{x:.0f}" if abs(x) >= 99.5 else f"{x:.2g}"


@dataclass(frozen=True, kw_only=True)
class VerdictRule:
    """How a ratio becomes a verdict (see the module doc). `threshold_source` says where the threshold came from,
    so every output can state the threshold it actually applied ("default", "--fail-on-slowdown 0.3%").
    `between_runs_cv`: the between-run coefficient of variation a comparison of separate runs adds (None: the
    device kind's default in BETWEEN_RUNS_CV), named by `between_runs_source`."""

    level: float = 0.95
    threshold: float = DEFAULT_THRESHOLD
    threshold_source: str = "default"
    min_repeats: int = 2
    judged: bool = True  # False: ratios and intervals only, no verdict (CPU dry runs without a threshold)
    between_runs_cv: float | None = None
    between_runs_source: str = "default"

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"confidence level must be in (0, 1), got {self.level}")
        if not self.threshold >= 0 or self.min_repeats < 2:
            raise ValueError("threshold >= 0 and min_repeats >= 2 are required")
        if self.between_runs_cv is not None and not self.between_runs_cv >= 0:
            raise ValueError("between_runs_cv must be >= 0")

    def with_threshold(self, threshold: float | None, *, source: str) -> "VerdictRule":
        """This rule judged at the user's threshold (`None`: unchanged, the default stays and says so)."""
        return self if threshold is None else replace(self, threshold=threshold, threshold_source=source)

    @property
    def threshold_text(self) -> str:
        """`0.3 % (--fail-on-slowdown 0.3%)` or `0.5 % (default)`: the threshold as every output names it."""
        if not self.judged:
            return f"none: not judged ({self.threshold_source})"
        return f"{percent(self.threshold)} % ({self.threshold_source})"

    def between_runs(self, device_kind: str | None) -> tuple[float, str]:
        """(the between-run cv a comparison of separate runs on this device kind adds, where it came from)."""
        if self.between_runs_cv is not None:
            return self.between_runs_cv, self.between_runs_source
        kind = "cpu" if device_kind == "cpu" else "gpu"
        return BETWEEN_RUNS_CV[kind], f"default for a {kind.upper()}"

    def describe(self) -> str:
        if not self.judged:
            return f"none drawn ({self.threshold_source}; --fail-on-slowdown asks for verdicts at a threshold)"
        eq = 1 - 2 * (1 - self.level)
        return (f"slower / faster: the {self.level:.0%} interval of time B/A excludes 1 and the estimate is beyond "
                f"{self.threshold_text}; same: the {eq:.0%} equivalence interval lies inside +-that threshold; "
                f"slower/faster within threshold: the interval excludes 1 and the equivalence interval lies inside "
                f"it; unresolved otherwise (a gate does not pass it); no verdict with fewer than {self.min_repeats} "
                f"repeats a side or {MIN_DF} degrees of freedom")


@dataclass(frozen=True, kw_only=True)
class Ratio:
    """A ratio B/A and its interval; `low`/`high` are None without one. `eq_low`/`eq_high` bound the
    equivalence interval (two one-sided tests). `estimator` names what was judged: the ratio of geometric means
    over repeats, or (look 2) the skipped mean of paired log ratios; `dropped` counts the pairs it left out."""

    value: float
    low: float | None = None
    high: float | None = None
    method: str = ""  # one of INTERVAL_METHODS, "" without an interval
    df: float | None = None
    level: float | None = None
    eq_low: float | None = None
    eq_high: float | None = None
    estimator: str = "ratio of geometric means"
    dropped: int = 0
    all_pairs: float | None = None  # with pairs dropped: the ratio of geometric means over every pair, for reference

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

    @property
    def usable(self) -> bool:
        """An interval that says something: present, finite, and either excluding 1 or narrower than a factor of 2
        each way (a half-width under 100 %). Two repeats of a noisy CPU can give [0.0001, 4675263]: no verdict is
        drawn from that; [35, 286] for a 100x slowdown still says it is slower."""
        r = self.resolution
        return r is not None and math.isfinite(r) and (r < 1.0 or self.excludes_one())


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


def _bounds(centre: float, se: float, crit: float, crit_eq: float) -> dict:
    return dict(low=math.exp(centre - crit * se), high=math.exp(centre + crit * se),
                eq_low=math.exp(centre - crit_eq * se), eq_high=math.exp(centre + crit_eq * se))


def between_runs_floor(cv: float, *, level: float = 0.95) -> float:
    """The smallest threshold a comparison of two separate runs can call `same`, however many repeats each takes:
    the equivalence half-width of the between-run variance alone, z(level) x sqrt(2) x log(1 + cv)."""
    return math.expm1(NormalDist().inv_cdf(level) * math.sqrt(2) * math.log1p(cv))


def ratio_interval(log_a: Sequence[float], log_b: Sequence[float], *, paired: bool = False, level: float = 0.95,
                   pilot_a: int | None = None, pilot_b: int | None = None, between_cv: float = 0.0) -> Ratio:
    """exp(mean log_b - mean log_a) and its one-look t interval (see the module doc), logs in repeat order.

    `paired`: log_a[i] and log_b[i] were measured in the same repeat (one look; the sequential design is
    `paired_decision`). `pilot_a`/`pilot_b` (independent sides): the repeats a two-stage (adaptive) run of each side
    fixed in advance; its variance comes from those first repeats only. `between_cv`: the between-run coefficient of
    variation added to each side (separate runs). Fewer than two repeats (pairs) on a side give the value alone.
    """
    import numpy as np

    na, nb = len(log_a), len(log_b)
    if not na or not nb:
        raise ValueError("an interval needs at least one repeat on each side")
    value = math.exp(_mean(log_b) - _mean(log_a))
    if paired:
        if na != nb:
            raise ValueError(f"paired repeats need as many on each side, got {na} and {nb}")
        if na < 2:
            return Ratio(value=value)
        se2, df = _var([b - a for a, b in zip(log_a, log_b)]) / na, float(na - 1)
        method = "paired t"
    else:
        if na < 2 or nb < 2:
            return Ratio(value=value)
        centre, se, df, crit, crit_eq = (float(x) for x in welch(
            np.array(log_a), np.array(log_b), level=level, between_cv=between_cv, pilot_a=pilot_a, pilot_b=pilot_b))
        method = ("Welch t + between-run" if between_cv else
                  "Welch t" if pilot_a is None and pilot_b is None else "Welch t (two-stage)")
        return Ratio(value=math.exp(centre), method=method, df=df, level=level, **_bounds(centre, se, crit, crit_eq))
    crit, crit_eq = t_quantile((1 + level) / 2, df), t_quantile(level, df)
    return Ratio(value=value, method=method, df=df, level=level,
                 **_bounds(math.log(value), math.sqrt(se2), crit, crit_eq))


def welch(log_a, log_b, *, level: float = 0.95, between_cv: float = 0.0, pilot_a: int | None = None,
          pilot_b: int | None = None):
    """Independent sides on the last axis (leading axes: independent comparisons, as the simulation drives it):
    (centre, se, df, crit, crit_eq) in log time. Welch-Satterthwaite degrees of freedom from the sides' own
    spread; the between-run variance 2 log(1 + between_cv)^2 is a stated or measured value with no degrees of
    freedom of its own. With one side exactly constant the df are the other side's."""
    import numpy as np

    a, b = np.asarray(log_a, dtype=float), np.asarray(log_b, dtype=float)
    na, nb = a.shape[-1], b.shape[-1]
    ka, kb = _pilot(na, pilot_a), _pilot(nb, pilot_b)
    va, vb = a[..., :ka].var(axis=-1, ddof=1) / na, b[..., :kb].var(axis=-1, ddof=1) / nb
    within = va + vb
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(within > 0, within ** 2 / (va ** 2 / (ka - 1) + vb ** 2 / (kb - 1)), float(min(ka, kb) - 1))
    se = np.sqrt(within + 2 * math.log1p(between_cv) ** 2)
    centre = b.mean(axis=-1) - a.mean(axis=-1)
    return centre, se, df, t_quantiles((1 + level) / 2, df), t_quantiles(level, df)


def classify(centre, low, high, eq_low, eq_high, *, threshold: float, df=None):
    """The verdict of each comparison (numpy arrays in log time; see the module doc), as an array of VERDICTS
    strings. `df` below MIN_DF, or a non-finite bound, gives `too few repeats`."""
    import numpy as np

    centre, low, high, eq_low, eq_high = (np.asarray(x, dtype=float) for x in (centre, low, high, eq_low, eq_high))
    up, down = math.log1p(threshold), math.log1p(-min(threshold, 0.999999))
    inside = (eq_low > down) & (eq_high < up)
    above, below = low > 0, high < 0
    out = np.full(centre.shape, "unresolved", dtype=object)
    out[~above & ~below & inside] = "same"
    out[above & inside] = SLOWER_WITHIN
    out[below & inside] = FASTER_WITHIN
    out[above & (centre > up)] = "slower"
    out[below & (centre < down)] = "faster"
    wide = (high - low >= 2 * math.log(2.0)) & ~above & ~below
    bad = ~(np.isfinite(low) & np.isfinite(high)) | wide  # not `Ratio.usable`
    if df is not None:
        bad |= np.asarray(df, dtype=float) < MIN_DF - _DF_SLACK
    out[bad] = "too few repeats"
    return out


def judge(time: Ratio, rule: VerdictRule, *, n_a: int, n_b: int) -> str:
    """The verdict of a time ratio B/A under `rule` (one of VERDICTS; see the module doc)."""
    if min(n_a, n_b) < rule.min_repeats or time.low is None or not time.usable:
        return "too few repeats"
    if time.df is not None and time.df < MIN_DF - _DF_SLACK:
        return "too few repeats"
    if not rule.judged:
        return "not judged"
    eq_low = time.eq_low if time.eq_low is not None else time.low
    eq_high = time.eq_high if time.eq_high is not None else time.high
    logs = [math.log(x) for x in (time.value, time.low, time.high, eq_low, eq_high)]
    return str(classify(*logs, threshold=rule.threshold)[()])


def paired_decision(diffs, plan: Plan, rule: VerdictRule) -> tuple[Look, np.ndarray]:
    """The sequential design on paired log differences `diffs` (last axis: pairs in repeat order; leading axes:
    independent comparisons, as the simulation drives it): look 1 on the pilot; where it is unresolved and look 2
    was planned and its pairs exist, look 2 on all of them. Returns (the deciding look, its verdicts): each array
    entry takes the look that decided it."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    first = paired_look(d[..., :plan.pilot] if plan.sequential else d, plan, level=rule.level)
    v1 = _look_verdicts(first, rule)
    if not plan.sequential or d.shape[-1] <= plan.pilot:
        return first, v1
    second = paired_look(d, plan, level=rule.level)
    v2 = _look_verdicts(second, rule)
    go = np.isin(v1, OPEN)
    if not go.any():
        return first, v1
    if go.all():
        return second, v2
    pick = lambda a, b: np.where(go, b, a)
    kept = np.where(go[..., None], second.kept, np.pad(first.kept, [(0, 0)] * (d.ndim - 1)
                                                        + [(0, d.shape[-1] - first.kept.shape[-1])]))
    mixed = Look(number=0, looks=2, method="mixed", pairs=d.shape[-1], estimate=pick(first.estimate, second.estimate),
                 se=pick(first.se, second.se), df=pick(first.df, second.df), crit=pick(first.crit, second.crit),
                 crit_eq=pick(first.crit_eq, second.crit_eq), kept=kept)
    return mixed, pick(v1, v2)


def _look_verdicts(look: Look, rule: VerdictRule) -> np.ndarray:
    c, se = look.estimate, look.se
    return classify(c, c - look.crit * se, c + look.crit * se, c - look.crit_eq * se, c + look.crit_eq * se,
                    threshold=rule.threshold, df=look.df)


def ratio_from_look(look: Look, *, level: float) -> Ratio:
    """The Ratio of one comparison's deciding look (a 1-d comparison: scalar arrays)."""
    centre, se = float(look.estimate), float(look.se)
    method = look.method if look.looks == 1 else f"{look.method} (look {look.number} of {look.looks})"
    return Ratio(value=math.exp(centre), method=method, df=float(look.df), level=level,
                 estimator=("skipped mean of paired log ratios" if look.number == 2 else "ratio of geometric means"),
                 dropped=int(look.pairs - look.kept.sum()) if look.number == 2 else 0,
                 **_bounds(centre, se, float(look.crit), float(look.crit_eq)))


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
