"""Change points of one nightly series: steps in the mean of log(figure), found by ruptures.

Why ruptures (checked 2026-12 against what installs here, `pip download` / `pip index versions`):
- apache-otava 0.8.0 (E-divisive means, made for this) pins numpy==2.2.0 on Python < 3.14 and pulls a
  BigQuery client, pg8000, slack-sdk and requests: it cannot share a venv with this project's numpy 2.4 and torch,
  and would slow scripts/setup.sh for a database layer the history does not use;
- MongoDB's signal-processing-algorithms 2.1.6 (E-divisive too) supports Python 3.11 only (the GPU images run
  3.12), needs numpy < 2 and gevent, and ships an sdist only (a compile at install);
- ruptures 1.1.10 (BSD-2, wheels for CPython 3.9-3.13) needs only numpy and scipy, and its KernelCPD runs PELT
  over the linear kernel, the least-squares cost of a shift in the mean, in C: 1.2 ms for 1,000 nights here
  (its pure-Python `Pelt(model="l2")` took 2.1 s). Installed with the `analysis` extra (and `dev`).

The model: a night's value is log(figure) (so a step is a ratio, and time = cycles / clock splits additively),
piecewise constant plus noise. The noise sigma is estimated robustly from the nights themselves (the median
absolute deviation of successive differences, which a few steps barely move), the series is scaled by it, and
PELT places change points where each one lowers the squared error by more than PENALTY x log(n) (a BIC-like
penalty; PENALTY is calibrated on simulated A/A histories of recorded H200 repeats, benchmarks/history_simulation.py).

Each change point gets a location interval (which nights it may be at): the nights t where moving the split to t
raises the segment's squared error by at most 3.84 sigma^2 (the 95 % point of chi^2 with one degree of
freedom; approximate, as a profile likelihood of a change's location is). Its commit range spans that interval.
"""

from __future__ import annotations

import importlib
import math
import sys
from dataclasses import dataclass
from typing import Sequence

from harness.errors import ConfigError

__all__ = ["PENALTY", "MIN_SIZE", "Step", "find_steps", "noise_sigma", "require_ruptures"]

# Calibrated on simulated 120-night A/A histories of the H200 cuDNN repeats (benchmarks/history_simulation.py): at
# 4.0, 1 A/A history in 400 shows a change point in cycles, clock or time (kernel or control), and a +0.3 % step in
# cycles (2.7 sigma of a night of 10 repeats) is found within 5 nights in 90 % of histories (at 3.0 more are found
# sooner, but 1-2 % of A/A histories show a step).
PENALTY = 4.0
MIN_SIZE = 2  # nights in a segment: a step needs two nights after it, so one odd night is not a change
_LOCATION_CHI2 = 3.84


@dataclass(frozen=True, kw_only=True)
class Step:
    """A change point at series position `at` (the first night of the new level), with its location interval
    [lo, hi] (positions), the levels before and after (geometric means of the segments around it) and `ratio`
    = after / before."""

    at: int
    lo: int
    hi: int
    before: float
    after: float
    ratio: float
    z: float  # the step in units of the night-to-night sigma


def noise_sigma(logs: Sequence[float]) -> float:
    """The night-to-night sigma of a log series from its successive differences, robust to the few a step makes:
    the larger of 1.4826 x their MAD and their RMS without the largest 10 % (x 1.267, its normal-theory
    correction), over sqrt 2. The second keeps a quantized series honest: on the H200 the in-band clock reads in
    15 MHz steps, so most nights may differ by exactly 0 and the MAD alone would be 0."""
    import numpy as np

    diffs = np.diff(np.asarray(logs, dtype=float))
    if diffs.size == 0:
        return 0.0
    dev = np.sort(np.abs(diffs - np.sort(diffs)[diffs.size // 2]))
    mad = dev[diffs.size // 2]
    kept = dev[: max(1, math.ceil(0.9 * diffs.size))]
    trimmed = 1.267 * math.sqrt(float(np.mean(kept * kept)))
    return max(1.4826 * float(mad), trimmed) / math.sqrt(2)


def require_ruptures():
    """The ruptures module, or a ConfigError saying how to install it (the `analysis` extra)."""
    try:
        return importlib.import_module("ruptures")
    except ImportError:
        raise ConfigError(f"The history's change points are found by ruptures, which is not installed in this Python "
                          f"({sys.executable}). Install it with `{sys.executable} -m pip install 'ruptures>=1.1.9'` (it "
                          f"is in this package's `analysis` extra: `pip install -e '.[analysis]'`).") from None


def find_steps(values: Sequence[float], *, penalty: float = PENALTY, min_size: int = MIN_SIZE,
               floor: float = 1e-4) -> list[Step]:
    """The change points of a series of positive figures (nights in order). `floor` is the smallest sigma used
    (0.01 %): below it a difference between nights is no longer a change a nightly job can stand behind."""
    import numpy as np

    logs = np.log(np.asarray(values, dtype=float))
    n = logs.size
    if n < 2 * min_size:
        return []
    sigma = max(noise_sigma(logs), floor)
    ruptures = require_ruptures()
    signal = ((logs - logs[0]) / sigma).reshape(-1, 1)
    breaks = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(pen=penalty * math.log(n))
    cuts = [int(b) for b in breaks[:-1]]
    p1, p2 = np.concatenate([[0.0], np.cumsum(logs)]), np.concatenate([[0.0], np.cumsum(logs * logs)])

    def sse(a, b):  # squared error of the segments [a, b) (arrays of bounds), about their means
        m = (b - a).astype(float)
        s = p1[b] - p1[a]
        return p2[b] - p2[a] - s * s / np.maximum(m, 1)

    bounds = [0, *cuts, n]
    steps = []
    for i, at in enumerate(cuts):
        a, b = bounds[i], bounds[i + 2]
        ts = np.arange(a + 1, b)
        cost = sse(np.full_like(ts, a), ts) + sse(ts, np.full_like(ts, b))
        near = ts[cost - cost[ts == at][0] <= _LOCATION_CHI2 * sigma * sigma]
        before = (p1[at] - p1[a]) / (at - a)
        after = (p1[b] - p1[at]) / (b - at)
        steps.append(Step(at=at, lo=int(near.min()), hi=int(near.max()), before=math.exp(before), after=math.exp(after),
                          ratio=math.exp(after - before), z=float((after - before) / sigma)))
    return steps
