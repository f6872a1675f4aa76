"""How often the verdict procedure calls a difference where there is none, and how often it finds a real one.

Simulates repeats of A and B (log-normal times per repeat, coefficient of variation `cv`), drives them through
`harness.analysis.decompose` (the procedure every table, sentence, JSON field and gate uses) and counts the
verdicts. Three designs, as the harness measures:

- independent: two runs (or two inputs of one run), Welch t;
- interleaved: A and B in turn within each repeat, their order alternating (`bench commits`, two kernels of one
  run): each repeat shares a drift of the card's state (`drift` x cv, common to both sides) and A and B differ by
  a within-repeat drift whose sign follows the order; paired t, one look;
- two-stage: independent sides of adaptive runs (`--until-ci` in `bench sustained`): a pilot of 3 repeats a side
  sets how many (at most `cap`) Stein's rule needs for a half-width of `target`, then Welch t with the pilots'
  spread.
The sequential design of `bench commits` (two looks, a skipped mean at look 2) and the GPU-like noise models
(two states, drift, correlation, heavy tails) are `benchmarks/verdict_simulation.py`'s. Two repeats a side (one
degree of freedom) draw no verdict at all, so n starts at 3 here.

    python -m benchmarks.interval_calibration              # the A/A table and the power row (about 30 s)
    python -m benchmarks.interval_calibration --trials 400 # the issue's 400 trials a cell

`tests/analysis/test_interval_calibration.py` runs `simulate` on every cell of the acceptance table.
"""

from __future__ import annotations

import argparse
import math
import random

from harness.analysis import VerdictRule, decompose, stein_total

__all__ = ["DESIGNS", "simulate", "main"]

DESIGNS = ("independent", "interleaved", "two-stage")


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


def simulate(*, design: str, n: int, cv: float, trials: int, seed: int = 0, change: float = 0.0,
             threshold: float = 0.0, drift: float = 1.0, target: float = 0.005, cap: int = 10,
             outliers: float = 0.0) -> dict:
    """Shares of each verdict over `trials` comparisons of n repeats a side (two-stage: n is ignored; the pilot
    is 3 pairs). `threshold` 0 judges the interval alone, the strictest reading of "false slower/faster". Each
    cell draws its own stream (the seed and the cell's parameters), so cells are independent samples."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}")
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    cvs = (0.002, 0.005, 0.01, 0.02, 0.05)
    print(f"A/A: false slower/faster at the 95 % level (threshold 0: the interval alone), {args.trials} trials a cell")
    print(f"{'design':<12} {'n':>2} " + " ".join(f"cv {c * 100:>4.1f} %" for c in cvs))
    for design in ("independent", "interleaved"):
        for n in (3, 5, 8):
            cells = [simulate(design=design, n=n, cv=c, trials=args.trials, seed=args.seed)["false"] for c in cvs]
            print(f"{design:<12} {n:>2} " + " ".join(f"{x * 100:>8.1f} %" for x in cells))
    cells = [simulate(design="two-stage", n=3, cv=c, trials=args.trials, seed=args.seed, target=2 * c)
             for c in cvs]
    print(f"{'two-stage':<12} {'3+':>2} " + " ".join(f"{x['false'] * 100:>8.1f} %" for x in cells)
          + "   (independent, target +-2 cv, cap 10; mean repeats a side " + ", ".join(
              f"{x['mean_pairs']:.1f}" for x in cells) + ")")
    print("with 10 % of repeats scattering 4x wider:")
    for design, n in (("independent", 3), ("interleaved", 3), ("independent", 8), ("interleaved", 8)):
        cells = [simulate(design=design, n=n, cv=c, trials=args.trials, seed=args.seed, outliers=0.1)["false"]
                 for c in cvs]
        print(f"{design:<12} {n:>2} " + " ".join(f"{x * 100:>8.1f} %" for x in cells))
    print("\nPlanted change, threshold 0.5 % (the default), share called slower:")
    for design, n in (("independent", 5), ("interleaved", 5), ("independent", 3), ("interleaved", 3)):
        for change, cv in ((0.01, 0.002), (0.005, 0.002), (0.01, 0.005)):
            r = simulate(design=design, n=n, cv=cv, trials=args.trials, seed=args.seed, change=change,
                         threshold=0.005)
            print(f"  {design:<12} n={n} +{change * 100:.1f} % at cv {cv * 100:.1f} %: slower {r['slower'] * 100:5.1f} %, "
                  f"same {r['same'] * 100:5.1f} %, unresolved {r['unresolved'] * 100:5.1f} %")


if __name__ == "__main__":
    main()
