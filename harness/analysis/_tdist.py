"""Student's t quantiles for fractional degrees of freedom (Welch's), without scipy.

>>> round(t_quantile(0.975, 2.0), 4), round(t_quantile(0.975, 1e9), 4)
(4.3027, 1.96)
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["t_quantile", "t_quantiles"]


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


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t for 0.5 <= p < 1 (df may be fractional, as Welch's is); always a Python float."""
    # The cache is keyed by Python floats: a numpy scalar argument equals and hashes as its float, so it would
    # otherwise fill the entry with a numpy result that every later plain call gets back.
    return _t_quantile(float(p), float(df))


@lru_cache(maxsize=4096)
def _t_quantile(p: float, df: float) -> float:
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


_DEGREE = 24  # of the Chebyshev interpolant of log q in u = 1/df over [0, 1]: within 1e-7 of `t_quantile` (tests/analysis)


@lru_cache(maxsize=16)
def _interpolant(p: float):
    """log t_quantile(p, 1/u) as a Chebyshev series in u on [0, 1], from 25 exact quantiles at Chebyshev points
    (df 1.001 to about 1000; it was a linear interpolation between 2001 of them, 0.23 s of every process that judged
    more than 64 comparisons). log q is smooth in u down to u = 0, df = infinity, where the series gives the normal
    quantile."""
    import numpy as np

    def log_q(u):
        return np.log([t_quantile(p, 1.0 / x) for x in u])

    return np.polynomial.Chebyshev.interpolate(log_q, _DEGREE, domain=[0.0, 1.0])


def t_quantiles(p: float, df):
    """`t_quantile(p, df)` for an array of degrees of freedom >= 1 (Welch's, one per comparison), by Chebyshev
    interpolation in 1/df between exact quantiles (`_interpolant`); one function for one comparison and for 20,000
    simulated ones."""
    import numpy as np

    df = np.asarray(df, dtype=float)
    if np.any(~(df >= 1.0)):
        raise ValueError("t_quantiles needs degrees of freedom >= 1")
    if df.size <= 64:  # a handful of comparisons: exact, as `t_quantile` (the interpolant serves simulations)
        return np.vectorize(lambda x: t_quantile(p, float(x)), otypes=[float])(df)
    return np.exp(_interpolant(p)(1.0 / df))
