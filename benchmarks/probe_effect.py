"""What the in-band clock probe costs the kernel it measures: probe on vs off, alternated.

NVML telemetry is on in both arms. Prints time per launch per run and the paired ratio
time(probe on) / time(probe off). Goal: within 1 %.

    python benchmarks/probe_effect.py --kernel sdpa-cudnn --pairs 3
"""

from __future__ import annotations

import argparse

from benchmarks._common import alternate, paired_ratios, shape_args
from harness.analysis import median


def main() -> None:
    ap = argparse.ArgumentParser()
    shape_args(ap, results="results/bench-probe-effect")
    args = ap.parse_args()
    rows = alternate(
        arms={"probe": {"protocol": {"probe": True}}, "no-probe": {"protocol": {"probe": False}}},
        base=vars(args), pairs=args.pairs, results=args.results, console=print,
    )
    ratios = paired_ratios(rows, "probe", "no-probe")
    print("time(probe on) / time(probe off), per pair: " + ", ".join(f"{r:.5f}" for r in ratios))
    print(f"median {median(ratios):.5f} -> probe effect {100 * (median(ratios) - 1):+.3f} % (goal within 1 %)")


if __name__ == "__main__":
    main()
