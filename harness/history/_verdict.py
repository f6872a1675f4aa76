"""The nightly verdict against history: tonight against the last N comparable nights, as a prediction interval.

Comparing tonight with one stored baseline is a comparison of two runs: it cannot see how much a figure moves
from night to night (simulated with harness.analysis's own procedure, a 0.5 % drift between two runs gives
21-36 % false `slower` at a 0.3 % gate). The nights can. For each figure (time, cycles, clock) on the log
scale, the last N comparable nights (same machine fingerprint, software and protocol: docs/history.md) give a
mean m and a standard deviation s that holds every source of night-to-night variation, and tonight is expected
in the prediction interval

    m +- t(n-1, 1 - (1 - level) / 2) x s x sqrt(1 + 1/n)

(exact for nights drawn independently from one normal law; `simulate_verdicts` measures how often it misses on
nights drawn from recorded H200 repeats). Its half-width is the floor: the smallest change the nights can tell
from noise. With fewer than N nights the interval is wider (fewer nights, a larger t) and the verdict says at
which floor it judged; with fewer than MIN_NIGHTS it does not judge.

A series' verdict (`judge_series`):
- `slower` / `faster`: the code's figure (cycles where a clock was recorded, else time) is outside its
  interval and moved by more than the threshold. Cycles are what the code decides: a slower night in cycles is
  the code's, whatever the clock did.
- `machine`: time moved outside its interval by more than the threshold while the cycles stayed inside theirs:
  the clock carried it. The control (a pinned kernel or the bf16 GEMM peak timed every night) says whether the
  machine moved for every kernel (it moved too) or only for this one. Without a recorded clock, a move of the
  time that the control shares is the machine's too; one it does not share is `slower`/`faster`.
- `same`: inside the interval, or within the threshold.
- `event`: the fingerprint, software or protocol changed tonight and too few nights of the new one exist to
  judge by: an event, not a regression. `too few nights`: fewer than MIN_NIGHTS comparable nights.
- `not timed`: the series ran tonight but nothing was timed (its status says why).

>>> p = predict([100.0, 101.0, 99.0, 100.5, 99.5], 105.0, level=0.99)
>>> p.outside, round(p.ratio, 4), p.nights
('above', 1.05, 5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from harness.analysis import t_quantile
from harness.history._series import comparability_key

__all__ = ["NIGHTS", "MIN_NIGHTS", "LEVEL", "Prediction", "SeriesVerdict", "predict", "judge_series",
           "simulate_verdicts"]

NIGHTS = 10  # the last N comparable nights a verdict is drawn from
MIN_NIGHTS = 3  # below this no s (n - 1 >= 2 degrees of freedom) worth an interval
LEVEL = 0.99  # per series and figure: 1 % of A/A nights outside, before the threshold is applied


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """One figure tonight against its prediction interval from `nights` comparable nights; ratios to their
    geometric mean. `outside`: "above", "below" or ""."""

    metric: str
    tonight: float
    centre: float
    ratio: float
    low: float
    high: float
    nights: int
    outside: str

    @property
    def floor(self) -> float:
        """The interval's half-width as a fraction: the smallest change these nights can call."""
        return self.high - 1.0


def predict(nights: Sequence[float], tonight: float, *, level: float = LEVEL, metric: str = "time") -> Prediction | None:
    """Tonight's figure against the prediction interval of `nights` (positive figures), or None with fewer than
    MIN_NIGHTS."""
    logs = [math.log(v) for v in nights if v and v > 0]
    n = len(logs)
    if n < MIN_NIGHTS or not tonight or tonight <= 0:
        return None
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(1 - (1 - level) / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
    y = math.log(tonight) - mean
    return Prediction(metric=metric, tonight=tonight, centre=math.exp(mean), ratio=math.exp(y), low=math.exp(-half),
                      high=math.exp(half), nights=n, outside="above" if y > half else "below" if y < -half else "")


@dataclass(frozen=True, kw_only=True)
class SeriesVerdict:
    series: str
    role: str
    verdict: str
    sentence: str
    nights: int = 0  # comparable nights judged by
    tonight_ns: float | None = None  # tonight's time per launch, judged or not
    time: Prediction | None = None
    cycles: Prediction | None = None
    clock: Prediction | None = None

    @property
    def floor(self) -> float | None:
        code = self.cycles or self.time
        return code.floor if code else None


def _moved(p: Prediction | None, threshold: float) -> bool:
    return bool(p and p.outside and abs(p.ratio - 1) > threshold)


def _x(p: Prediction) -> str:
    return f"x{p.ratio:.4f} [{p.low:.4f}, {p.high:.4f}]"


def judge_series(series: str, *, role: str, tonight: dict, comparable: Sequence[dict], threshold: float,
                 level: float = LEVEL, wanted: int = NIGHTS, event: str = "", control: "SeriesVerdict | None" = None
                 ) -> SeriesVerdict:
    """The verdict of one series tonight (rows of the history table: `tonight` and its `comparable` nights, the
    last `wanted` of them used). `event`: what changed tonight against the night before (empty: nothing)."""
    base = dict(series=series, role=role, tonight_ns=tonight.get("time_ns"))
    if tonight.get("status") != "timed":
        return SeriesVerdict(**base, verdict="not timed", sentence=f"not timed tonight: {tonight.get('status')}")
    used = list(comparable)[-wanted:]
    if len(used) < MIN_NIGHTS:
        if event:
            return SeriesVerdict(**base, verdict="event", nights=len(used), sentence=(
                f"an event, not a regression: {event}. The nights before are another machine or setup, so tonight "
                f"is not judged; {len(used)} comparable night(s) so far, judged again from {MIN_NIGHTS}."))
        return SeriesVerdict(**base, verdict="too few nights", nights=len(used), sentence=(
            f"not judged: {len(used)} comparable night(s) in the history, {MIN_NIGHTS} needed for a prediction "
            f"interval."))
    time = predict([r["time_ns"] for r in used], tonight["time_ns"], level=level, metric="time")
    have_cycles = tonight.get("cycles_per_launch") and all(
        r.get("cycles_per_launch") and r.get("cycles_clock") == tonight.get("cycles_clock") for r in used)
    cycles = predict([r["cycles_per_launch"] for r in used], tonight["cycles_per_launch"], level=level,
                     metric="cycles") if have_cycles else None
    clock = predict([r["clock_mhz"] for r in used], tonight["clock_mhz"], level=level,
                    metric="clock") if have_cycles else None
    n = len(used)
    floor = (cycles or time).floor
    at = (f"against the last {n} comparable nights" if n >= wanted else
          f"against {n} comparable nights (fewer than {wanted}: the smallest change this can call is "
          f"{floor:.2%})")
    thr = f"the {threshold:.2%} threshold"
    kw = dict(**base, nights=n, time=time, cycles=cycles, clock=clock)
    prefix = f"{event}; " if event else ""
    if cycles is not None:
        if _moved(cycles, threshold):
            word = "slower" if cycles.outside == "above" else "faster"
            return SeriesVerdict(**kw, verdict=word, sentence=(
                f"{prefix}{word} in cycles (the code): cycles {_x(cycles)}, beyond {thr}, {at}; time {_x(time)}, "
                f"clock {_x(clock)}"))
        if _moved(time, threshold):
            return SeriesVerdict(**kw, verdict="machine", sentence=(
                f"{prefix}time {_x(time)} moved beyond {thr} {at}, but cycles {_x(cycles)} stayed within theirs: "
                f"the clock carried it ({_x(clock)}): the machine, not the code. {_control_words(control, time)}"))
        return SeriesVerdict(**kw, verdict="same", sentence=(
            f"{prefix}same: cycles {_x(cycles)}, time {_x(time)} {at} (threshold {threshold:.2%})"))
    if _moved(time, threshold):
        shared = control is not None and control.time is not None and control.time.outside == time.outside
        if shared:
            return SeriesVerdict(**kw, verdict="machine", sentence=(
                f"{prefix}time {_x(time)} moved beyond {thr} {at}, and the control moved with it "
                f"({_x(control.time)}): the machine, not the code (no clock was recorded to split cycles from "
                f"clock)"))
        word = "slower" if time.outside == "above" else "faster"
        return SeriesVerdict(**kw, verdict=word, sentence=(
            f"{prefix}{word}: time {_x(time)} beyond {thr} {at}; no clock was recorded, so cycles and clock are not "
            f"split; {_control_words(control, time)}"))
    return SeriesVerdict(**kw, verdict="same",
                         sentence=f"{prefix}same: time {_x(time)} {at} (threshold {threshold:.2%})")


def _control_words(control: "SeriesVerdict | None", time: Prediction) -> str:
    if control is None or control.time is None:
        return "No control was timed tonight to tell whether the machine moved for every kernel."
    c = control.time
    if c.outside and c.outside == time.outside:
        return f"The control ({control.series.split(' | ')[0]}) moved too ({_x(c)}): the machine moved."
    return (f"The control ({control.series.split(' | ')[0]}) did not move ({_x(c)}): the clock of this kernel "
            f"alone (its data or its power).")


def simulate_verdicts(rows_of_history: Sequence[dict], *, threshold: float, level: float = LEVEL,
                      wanted: int = NIGHTS, role: str = "kernel") -> dict:
    """Judge every night of a simulated history against the nights before it (as `bench nightly --history` would
    have, night after night) and count: nights judged, outside the time / cycles intervals, and each verdict."""
    key = comparability_key
    mine = [r for r in rows_of_history if r["role"] == role]
    out = {"judged": 0, "time outside": 0, "cycles outside": 0, "verdicts": {}, "per_night": []}
    for i, tonight in enumerate(mine):
        comparable = [r for r in mine[:i] if key(r) == key(tonight)]
        event = "the fingerprint changed" if i and key(mine[i - 1]) != key(tonight) else ""
        v = judge_series(tonight["series"], role=role, tonight=tonight, comparable=comparable, threshold=threshold,
                         level=level, wanted=wanted, event=event)
        out["verdicts"][v.verdict] = out["verdicts"].get(v.verdict, 0) + 1
        out["per_night"].append(v.verdict)
        if v.time is not None:
            out["judged"] += 1
            out["time outside"] += bool(v.time.outside)
            out["cycles outside"] += bool(v.cycles and v.cycles.outside)
    return out
