"""The verdict procedure under GPU-like noise: its error rates, cell by cell, from the harness's own functions.

Each trial draws the log time of every repeat of A and B from one noise model (below), in the order the harness
measures them, and judges it with the functions every table, sentence, JSON field and exit code uses:
`harness.analysis.simulate_verdict_rates` with `harness.analysis.paired_decision` (interleaved: `bench commits`, two kernels of one run; the sequential design,
look 1 after a pilot of 5 pairs, look 2 at 10) and `harness.analysis.welch` + `classify` (two separate runs:
`compare A B`, nightly against a baseline; each interval includes the stated between-run cv for a GPU).

Noise models (log time per repeat, in the order measured; the H200's, docs/verdicts.md):
- `iid 0.1 %`, `iid 0.5 %`: normal, that coefficient of variation;
- `state 5/10/20 %`: base 0.05 %, and that share of repeats (each independently) 0.8 % faster: cuDNN's second
  state on the H200 (docs/experiments/cudnn-two-states.md; 1 repeat in 20 of an A/A `bench commits`);
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

`tests/analysis/test_verdicts_under_gpu_noise.py` runs `harness.analysis.simulate_verdict_rates` on every cell and
asserts the limits above.
"""

from __future__ import annotations

import argparse

from harness.analysis import (
    BETWEEN_RUNS_CV,
    NOISE_MODELS,
    SEQUENTIAL_DESIGNS,
    SIM_INDEPENDENT_REPEATS as INDEPENDENT_REPEATS,
    SIM_PILOT as PILOT,
    SIM_TOTAL as TOTAL,
    simulate_verdict_rates,
    write_critical_table,
)

# What the acceptance asks of each cell (tests/analysis/test_verdicts_under_gpu_noise.py asserts the same limits)
LIMITS = {"false": 0.05, "interval": 0.055, "same@T": 0.055, "unres": 0.10, "slower@0.5": 0.85, "same@0.5": 0.01}


def _row(design: str, model: str, threshold: float, r: dict) -> str:
    return (f"{design:<12} {threshold * 100:>4.1f} % {model:<11}" + "".join(
        f" {r[k] * 100:>9.2f}" for k in ("false", "interval", "unres", "same", "slower@0.5", "same@0.5", "same@T")))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--table", action="store_true", help="regenerate harness/analysis/_sequential_table.py")
    args = ap.parse_args(argv)
    if args.table:
        print(f"wrote {write_critical_table()}")
        return
    print(f"Verdicts under GPU-like noise, {args.trials} trials a cell; percentages. Interleaved: pilot {PILOT} "
          f"pairs, look 2 at {TOTAL}. Independent: {INDEPENDENT_REPEATS} repeats a run, between-run cv "
          f"{BETWEEN_RUNS_CV['gpu']:.1%}.")
    print(f"{'design':<12} {'T':>6} {'model':<11} {'false':>9} {'interval':>9} {'unres':>9} {'same':>9} "
          f"{'slower@.5':>9} {'same@.5':>9} {'same@T':>9}")
    for design in SEQUENTIAL_DESIGNS:
        for threshold in (0.003, 0.02):
            for model in NOISE_MODELS:
                print(_row(design, model, threshold, simulate_verdict_rates(design=design, model=model, threshold=threshold,
                                                              trials=args.trials, seed=args.seed)))
    print(f"limits: false <= {LIMITS['false']:.0%}, interval <= {LIMITS['interval']:.1%}, same@T <= "
          f"{LIMITS['same@T']:.1%} everywhere; interleaved at 0.3 %: unres <= {LIMITS['unres']:.0%} (state 10 %, mix), "
          f"mix slower@0.5 >= {LIMITS['slower@0.5']:.0%} and same@0.5 <= {LIMITS['same@0.5']:.0%}")


if __name__ == "__main__":
    main()
