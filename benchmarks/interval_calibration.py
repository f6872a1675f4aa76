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

`harness.analysis.simulate_verdict_shares` is the simulation; tests/analysis/test_interval_calibration.py runs it on
every cell of the acceptance table.
"""

from __future__ import annotations

import argparse

from harness.analysis import simulate_verdict_shares as simulate


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
