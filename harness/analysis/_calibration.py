"""The verdict procedure's calibration: simulated comparisons judged by the harness's own functions.

Two studies, each a pure function of its seed (`benchmarks/interval_calibration.py` and
`benchmarks/verdict_simulation.py` print their tables; tests/analysis/test_interval_calibration.py and
test_verdicts_under_gpu_noise.py assert them):
- `simulate_verdict_shares`: log-normal repeats through `decompose` (every table, sentence, JSON field and gate),
  for the independent, interleaved and two-stage designs;
- `simulate_verdict_rates`: the H200's noise models (`noise_draws`: two states, drift, correlated neighbours,
  heavy tails and their mix, docs/verdicts.md) through `paired_decision` (the sequential design of `bench commits`)
  and `welch` + `classify` (two separate runs).
`write_critical_table` makes `_sequential_table.py`, the two-look design's critical values simulated once.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis import _sequential_table
from harness.analysis._decompose import decompose
from harness.analysis._interval import BETWEEN_RUNS_CV, VerdictRule, classify, paired_decision, stein_total, welch
from harness.analysis._sequential import Plan, simulate_critical_values
from harness.analysis._sequential_table import TABLE_LEVEL, TABLE_TRIALS

if TYPE_CHECKING:
    import numpy as np  # annotations only: the simulations import it when they run

__all__ = ["NOISE_MODELS", "SEQUENTIAL_DESIGNS", "SHARE_DESIGNS", "SIM_INDEPENDENT_REPEATS", "SIM_PILOT", "SIM_TOTAL",
           "noise_draws", "simulate_verdict_rates", "simulate_verdict_shares", "write_critical_table"]

SHARE_DESIGNS = ("independent", "interleaved", "two-stage")
BASE = 0.0005  # 0.05 %: the H200's repeat-to-repeat noise of a settled 4 s window
STATE = -0.008  # the second state: 0.8 % faster
DRIFT = 0.005  # 0.5 % from the first repeat measured to the last
NOISE_MODELS = ("iid 0.1 %", "iid 0.5 %", "state 5 %", "state 10 %", "state 20 %", "drift", "AR(1)", "t3", "mix")
SEQUENTIAL_DESIGNS = ("interleaved", "independent")
SIM_PILOT, SIM_TOTAL = 5, 10  # the sequential design's looks in simulate_verdict_rates (bench commits' defaults)
SIM_INDEPENDENT_REPEATS = 5  # a side, for two separate runs

def _noise(rng: random.Random, cv: float, outliers: float) -> float:
    # With `outliers`, that share of repeats scatters 4x wider (a repeat that caught a clock step, say).
    return rng.gauss(0.0, 4 * cv if outliers and rng.random() < outliers else cv)


def _pair(rng: random.Random, cv: float, change: float, order: int, drift: float,
          outliers: float) -> tuple[float, float]:
    shared = rng.gauss(0.0, drift * cv)  # the card's state in this repeat, the same for both sides
    within = 0.25 * drift * cv * (1 if order % 2 == 0 else -1)  # what moves between the first and second side
    a = shared + _noise(rng, cv, outliers) - within / 2
    b = shared + _noise(rng, cv, outliers) + within / 2 + math.log1p(change)
    return math.exp(a), math.exp(b)


def simulate_verdict_shares(*, design: str, n: int, cv: float, trials: int, seed: int = 0, change: float = 0.0,
             threshold: float = 0.0, drift: float = 1.0, target: float = 0.005, cap: int = 10,
             outliers: float = 0.0) -> dict:
    """Shares of each verdict over `trials` comparisons of n log-normal repeats a side (coefficient of variation
    `cv`) through `decompose`: `independent` (Welch t), `interleaved` (each repeat shares a drift of the card's
    state, `drift` x cv, and A and B differ by a within-repeat drift whose sign follows the order; paired t) or
    `two-stage` (`--until-ci`: a pilot of 3 a side sets how many, at most `cap`, Stein's rule needs for a half-width
    of `target`; n is ignored). `outliers`: that share of repeats scatters 4x wider. `threshold` 0 judges the interval alone, the strictest reading of "false slower/faster". Each
    cell draws its own stream (the seed and the cell's parameters), so cells are independent samples."""
    if design not in SHARE_DESIGNS:
        raise ValueError(f"design must be one of {SHARE_DESIGNS}")
    rng = random.Random(f"{seed}:{design}:{n}:{cv}:{change}:{threshold}:{drift}:{target}:{cap}:{outliers}")
    rule = VerdictRule(threshold=threshold)
    counts: dict[str, int] = {}
    pairs_used = 0
    for _ in range(trials):
        if design == "independent":
            ta = [math.exp(_noise(rng, cv, outliers)) for _ in range(n)]
            tb = [math.exp(math.log1p(change) + _noise(rng, cv, outliers)) for _ in range(n)]
            d = decompose(time_a=ta, time_b=tb, rule=rule)
        else:
            if design == "two-stage":
                pilot = 3
                side = lambda k, shift: [math.exp(shift + _noise(rng, cv, outliers)) for _ in range(k)]
                ta, tb = side(pilot, 0.0), side(pilot, math.log1p(change))
                need = max(stein_total([math.log(t) for t in ta], target=target / 2 ** 0.5, cap=cap),
                           stein_total([math.log(t) for t in tb], target=target / 2 ** 0.5, cap=cap))
                ta += side(need - pilot, 0.0)
                tb += side(need - pilot, math.log1p(change))
                d = decompose(time_a=ta, time_b=tb, rule=rule, pilot_a=pilot, pilot_b=pilot)
                pairs_used += need
            else:
                sides = [_pair(rng, cv, change, i, drift, outliers) for i in range(n)]
                d = decompose(time_a=[a for a, _ in sides], time_b=[b for _, b in sides], rule=rule, paired=True)
                pairs_used += n
        counts[d.verdict] = counts.get(d.verdict, 0) + 1
    out = {v: counts.get(v, 0) / trials for v in ("slower", "faster", "same", "unresolved", "too few repeats")}
    out["false"] = out["slower"] + out["faster"]
    out["mean_pairs"] = pairs_used / trials if design != "independent" else float(n)
    return out


def _ar1(rng, trials: int, slots: int, sd: float, rho: float = 0.5) -> np.ndarray:
    import numpy as np

    out = np.empty((trials, slots))
    out[:, 0] = rng.standard_normal(trials) * sd
    e = rng.standard_normal((trials, slots)) * sd * math.sqrt(1 - rho ** 2)
    for t in range(1, slots):
        out[:, t] = rho * out[:, t - 1] + e[:, t]
    return out


def noise_draws(model: str, rng: np.random.Generator, trials: int, slots: int) -> np.ndarray:
    """Log-time noise of `slots` repeats measured one after the other, `trials` times (see the module doc)."""
    import numpy as np

    ramp = DRIFT * np.arange(slots) / max(slots - 1, 1)
    normal = lambda sd: rng.standard_normal((trials, slots)) * sd
    state = lambda p: STATE * (rng.random((trials, slots)) < p)
    if model.startswith("iid"):
        return normal(float(model.split()[1]) / 100)
    if model.startswith("state"):
        return normal(BASE) + state(float(model.split()[1]) / 100)
    if model == "drift":
        return normal(BASE) + ramp
    if model == "AR(1)":
        return _ar1(rng, trials, slots, 0.001)
    if model == "t3":
        return rng.standard_t(3, (trials, slots)) * BASE
    if model == "mix":
        return rng.standard_t(3, (trials, slots)) * BASE + state(0.10) + ramp + _ar1(rng, trials, slots, BASE)
    raise ValueError(f"unknown noise model {model!r}; one of {NOISE_MODELS}")


def _draw(design: str, model: str, rng, trials: int, change: float) -> tuple[np.ndarray, np.ndarray]:
    """(log A, log B) per trial, each (trials, repeats), B carrying the true change."""
    import numpy as np

    shift = math.log1p(change)
    if design == "interleaved":
        x = noise_draws(model, rng, trials, 2 * SIM_TOTAL)
        first, second = x[:, 0::2], x[:, 1::2]
        even = (np.arange(SIM_TOTAL) % 2 == 0)
        a = np.where(even, first, second)
        b = np.where(even, second, first)
        return a, b + shift
    x = noise_draws(model, rng, trials, 2 * SIM_INDEPENDENT_REPEATS)
    return x[:, :SIM_INDEPENDENT_REPEATS], x[:, SIM_INDEPENDENT_REPEATS:] + shift


def _judge(design: str, a: np.ndarray, b: np.ndarray, rule: VerdictRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verdicts, interval low, interval high) in log time, through the harness's own functions."""
    if design == "interleaved":
        look, verdicts = paired_decision(b - a, Plan(pilot=SIM_PILOT, total=SIM_TOTAL), rule)
        c, half = look.estimate, look.crit * look.se
        return verdicts, c - half, c + half
    centre, se, df, crit, crit_eq = welch(a, b, level=rule.level, between_cv=BETWEEN_RUNS_CV["gpu"])
    verdicts = classify(centre, centre - crit * se, centre + crit * se, centre - crit_eq * se, centre + crit_eq * se,
                        threshold=rule.threshold, df=df)
    return verdicts, centre - crit * se, centre + crit * se


def simulate_verdict_rates(*, design: str, model: str, threshold: float, trials: int = 20_000, seed: int = 1) -> dict:
    """The rates of one cell under GPU-like noise (`noise_draws`), the sequential design of `bench commits`
    (`interleaved`: pilot SIM_PILOT pairs, look 2 at SIM_TOTAL) or two separate runs (`independent`,
    SIM_INDEPENDENT_REPEATS a side, the GPU's between-run cv), judged by `paired_decision` or `welch` +
    `classify`: `false` (slower or faster when nothing changed), `interval` (the interval excludes the true ratio), `unres` and `same` when nothing
    changed, `slower@0.5` and `same@0.5` at a true +0.5 %, `same@T` at a true change of the threshold. Each cell
    draws its own stream (the seed and the cell), so the figures are the same on every run."""
    import numpy as np

    if design not in SEQUENTIAL_DESIGNS:
        raise ValueError(f"design must be one of {SEQUENTIAL_DESIGNS}")
    rule = VerdictRule(threshold=threshold)
    out = {}
    for name, change in (("aa", 0.0), ("0.5", 0.005), ("T", threshold)):
        rng = np.random.default_rng([seed, SEQUENTIAL_DESIGNS.index(design), NOISE_MODELS.index(model), round(threshold * 1e6),
                                     round(change * 1e6)])
        a, b = _draw(design, model, rng, trials, change)
        verdicts, low, high = _judge(design, a, b, rule)
        share = lambda *vs: float(np.isin(verdicts, vs).mean())
        if name == "aa":
            out["false"] = share("slower", "faster")
            out["interval"] = float(((low > 0) | (high < 0)).mean())
            out["unres"] = share("unresolved", "too few repeats")
            out["same"] = share("same")
        elif name == "0.5":
            out["slower@0.5"], out["same@0.5"] = share("slower"), share("same")
        else:
            out["same@T"] = share("same")
    return out


def write_critical_table(path: Path | None = None, *, pilots=range(2, 9), totals=range(3, 21)) -> Path:
    """Simulate the committed critical values as `critical_values` would and rewrite their module
    (`_sequential_table.py`, or `path`); returns the file written."""
    path = Path(path or _sequential_table.__file__)
    entries = []
    for n1 in pilots:
        for n2 in totals:
            if n2 > n1:
                c = simulate_critical_values(n1, n2, TABLE_LEVEL, trials=TABLE_TRIALS)
                entries.append(f"    ({n1}, {n2}): ({', '.join(f'{x:.6f}' for x in c)}),")
    text = path.read_text(encoding="utf-8")
    head = text[: text.index("\nCRITICAL_TABLE") + 1]
    path.write_text(head + "CRITICAL_TABLE: dict[tuple[int, int], tuple[float, float, float, float]] = {\n"
                    + "\n".join(entries) + "\n}\n", encoding="utf-8")
    return path
