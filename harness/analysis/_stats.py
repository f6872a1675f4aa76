"""Small statistics as pure functions (no numpy needed on the measuring side)."""

from __future__ import annotations

import math
import random
from typing import Callable, Sequence

__all__ = ["median", "mean", "cv", "value_range", "bootstrap_ci"]


def median(values: Sequence[float]) -> float | None:
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def mean(values: Sequence[float]) -> float | None:
    xs = [v for v in values if v is not None and not math.isnan(v)]
    return sum(xs) / len(xs) if xs else None


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample standard deviation over the mean)."""
    xs = [v for v in values if v is not None]
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return math.sqrt(var) / m if m else None


def value_range(values: Sequence[float]) -> tuple[float, float] | None:
    xs = [v for v in values if v is not None]
    return (min(xs), max(xs)) if xs else None


def bootstrap_ci(
    samples: Sequence[float],
    statistic: Callable[[Sequence[float]], float],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of `statistic` over `samples` (seeded: same input, same interval)."""
    rng = random.Random(seed)
    n = len(samples)
    if n == 0:
        raise ValueError("bootstrap of no samples")
    stats = sorted(statistic([samples[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    lo = stats[int((1 - level) / 2 * (resamples - 1))]
    hi = stats[int((1 + level) / 2 * (resamples - 1))]
    return lo, hi
