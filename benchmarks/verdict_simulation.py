"""The verdict procedure under GPU-like noise: its error rates, cell by cell, from the harness's own functions.

Each trial draws the log time of every repeat of A and B from one noise model (below), in the order the harness
measures them, and judges it with the functions every table, sentence, JSON field and exit code uses:
`harness.analysis.paired_decision` (interleaved: `bench commits`, two kernels of one run; the sequential design,
look 1 after a pilot of 5 pairs, look 2 at 10) and `harness.analysis.welch` + `classify` (two separate runs:
`compare A B`, nightly against a baseline; each interval includes the stated between-run cv for a GPU).

Noise models (log time per repeat, in the order measured; the H200's, docs/verdicts.md):
- `iid 0.1 %`, `iid 0.5 %`: normal, that coefficient of variation;
- `state 5/10/20 %`: base 0.05 %, and that share of repeats (each independently) 0.8 % faster: cuDNN's second
  state on the H200 (benchmarks/h200/cudnn_states.py; 1 repeat in 20 of an A/A `bench commits`);
- `drift`: base 0.05 % and a linear drift of 0.5 % from the first repeat measured to the last;
- `AR(1)`: correlated neighbours, rho 0.5, stationary cv 0.1 %;
- `t3`: Student t with 3 degrees of freedom, scale 0.05 % (heavy tails);
- `mix`: t3 at scale 0.05 % + state 10 % + drift 0.5 % + AR(1) rho 0.5 at 0.05 %.
Interleaved: pair i measures A then B for even i, B then A for odd i (the orchestrator alternates). Independent:
all of A's repeats, then all of B's (two runs, one after the other).

Each cell reports, over `--trials` trials (default 20,000):
- `false`: a `slower` or `faster` verdict when nothing changed (at most 5 %);
- `interval`: the deciding interval excludes the true ratio when nothing changed (at most 5.5 %);
- `unres`: `unresolved`/`too few repeats` when nothing changed (interleaved at 0.3 %: at most 10 % in `state 10 %`
  and `mix`);
- `slower@0.5`: a true +0.5 % called `slower` (at 0.3 %, mix, interleaved: at least 85 %), and `same@0.5` (at most
  1 %);
- `same@T`: a true change equal to the threshold called `same` (at most 5.5 %: TOST's 5 % plus simulation error).

    python -m benchmarks.verdict_simulation               # the table (about 20 s)
    python -m benchmarks.verdict_simulation --table       # regenerate harness/analysis/_sequential_table.py

`tests/analysis/test_verdict_simulation.py` runs `simulate` on every cell and asserts the limits above.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from harness.analysis import BETWEEN_RUNS_CV, Plan, VerdictRule, classify, paired_decision
from harness.analysis._interval import welch
from harness.analysis._sequential import simulate_critical_values
from harness.analysis._sequential_table import TABLE_LEVEL, TABLE_TRIALS

__all__ = ["DESIGNS", "LIMITS", "MODELS", "noise", "simulate", "main"]

BASE = 0.0005  # 0.05 %: the H200's repeat-to-repeat noise of a settled 4 s window
STATE = -0.008  # the second state: 0.8 % faster
DRIFT = 0.005  # 0.5 % from the first repeat measured to the last
MODELS = ("iid 0.1 %", "iid 0.5 %", "state 5 %", "state 10 %", "state 20 %", "drift", "AR(1)", "t3", "mix")
DESIGNS = ("interleaved", "independent")
PILOT, TOTAL = 5, 10  # the sequential design's looks (bench commits' defaults)
INDEPENDENT_REPEATS = 5  # a side, for two separate runs
LIMITS = {"false": 0.05, "interval": 0.055, "same@T": 0.055, "unres": 0.10, "slower@0.5": 0.85, "same@0.5": 0.01}


def _ar1(rng, trials: int, slots: int, sd: float, rho: float = 0.5) -> np.ndarray:
    out = np.empty((trials, slots))
    out[:, 0] = rng.standard_normal(trials) * sd
    e = rng.standard_normal((trials, slots)) * sd * math.sqrt(1 - rho ** 2)
    for t in range(1, slots):
        out[:, t] = rho * out[:, t - 1] + e[:, t]
    return out


def noise(model: str, rng: np.random.Generator, trials: int, slots: int) -> np.ndarray:
    """Log-time noise of `slots` repeats measured one after the other, `trials` times (see the module doc)."""
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
    raise ValueError(f"unknown noise model {model!r}; one of {MODELS}")


def _draw(design: str, model: str, rng, trials: int, change: float) -> tuple[np.ndarray, np.ndarray]:
    """(log A, log B) per trial, each (trials, repeats), B carrying the true change."""
    shift = math.log1p(change)
    if design == "interleaved":
        x = noise(model, rng, trials, 2 * TOTAL)
        first, second = x[:, 0::2], x[:, 1::2]
        even = (np.arange(TOTAL) % 2 == 0)
        a = np.where(even, first, second)
        b = np.where(even, second, first)
        return a, b + shift
    x = noise(model, rng, trials, 2 * INDEPENDENT_REPEATS)
    return x[:, :INDEPENDENT_REPEATS], x[:, INDEPENDENT_REPEATS:] + shift


def _judge(design: str, a: np.ndarray, b: np.ndarray, rule: VerdictRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verdicts, interval low, interval high) in log time, through the harness's own functions."""
    if design == "interleaved":
        look, verdicts = paired_decision(b - a, Plan(pilot=PILOT, total=TOTAL), rule)
        c, half = look.estimate, look.crit * look.se
        return verdicts, c - half, c + half
    centre, se, df, crit, crit_eq = welch(a, b, level=rule.level, between_cv=BETWEEN_RUNS_CV["gpu"])
    verdicts = classify(centre, centre - crit * se, centre + crit * se, centre - crit_eq * se, centre + crit_eq * se,
                        threshold=rule.threshold, df=df)
    return verdicts, centre - crit * se, centre + crit * se


def simulate(*, design: str, model: str, threshold: float, trials: int = 20_000, seed: int = 1) -> dict:
    """The rates of one cell (see the module doc). Each cell draws its own stream (the seed and the cell), so the
    figures are the same on every run and cells are independent samples."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}")
    rule = VerdictRule(threshold=threshold)
    out = {}
    for name, change in (("aa", 0.0), ("0.5", 0.005), ("T", threshold)):
        rng = np.random.default_rng([seed, DESIGNS.index(design), MODELS.index(model), round(threshold * 1e6),
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


def _row(design: str, model: str, threshold: float, r: dict) -> str:
    return (f"{design:<12} {threshold * 100:>4.1f} % {model:<11}" + "".join(
        f" {r[k] * 100:>9.2f}" for k in ("false", "interval", "unres", "same", "slower@0.5", "same@0.5", "same@T")))


def write_table(path: Path, *, pilots=range(5, 9), totals=range(6, 21)) -> None:
    """The committed critical values (`_sequential_table.py`), simulated as `critical_values` would."""
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--table", action="store_true", help="regenerate harness/analysis/_sequential_table.py")
    args = ap.parse_args(argv)
    if args.table:
        import harness.analysis._sequential_table as table

        write_table(Path(table.__file__))
        print(f"wrote {table.__file__}")
        return
    print(f"Verdicts under GPU-like noise, {args.trials} trials a cell; percentages. Interleaved: pilot {PILOT} "
          f"pairs, look 2 at {TOTAL}. Independent: {INDEPENDENT_REPEATS} repeats a run, between-run cv "
          f"{BETWEEN_RUNS_CV['gpu']:.1%}.")
    print(f"{'design':<12} {'T':>6} {'model':<11} {'false':>9} {'interval':>9} {'unres':>9} {'same':>9} "
          f"{'slower@.5':>9} {'same@.5':>9} {'same@T':>9}")
    for design in DESIGNS:
        for threshold in (0.003, 0.02):
            for model in MODELS:
                print(_row(design, model, threshold, simulate(design=design, model=model, threshold=threshold,
                                                              trials=args.trials, seed=args.seed)))
    print(f"limits: false <= {LIMITS['false']:.0%}, interval <= {LIMITS['interval']:.1%}, same@T <= "
          f"{LIMITS['same@T']:.1%} everywhere; interleaved at 0.3 %: unres <= {LIMITS['unres']:.0%} (state 10 %, mix), "
          f"mix slower@0.5 >= {LIMITS['slower@0.5']:.0%} and same@0.5 <= {LIMITS['same@0.5']:.0%}")


if __name__ == "__main__":
    main()
