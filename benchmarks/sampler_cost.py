"""What the telemetry sampler costs the kernel it watches: NVML sampling at 10 ms vs no telemetry.

Same kernel, same inputs, sustained protocol, alternated (A B, B A, ...) for --pairs pairs; the in-band
probe is off in both arms so that only the sampler differs. Prints time per launch per run and the
paired ratio time(sampler on) / time(off). Goal: within 0.3 %.

    python benchmarks/sampler_cost.py --kernel sdpa-cudnn --pairs 3
"""

from __future__ import annotations

import argparse

from benchmarks._common import alternate, paired_ratios, shape_args
from harness.analysis import median


def main() -> None:
    ap = argparse.ArgumentParser()
    shape_args(ap, results="results/bench-sampler-cost")
    ap.add_argument("--period-ms", type=float, default=10.0)
    args = ap.parse_args()
    proto = {"probe": False, "sample_period_s": args.period_ms / 1000}
    rows = alternate(
        arms={"sampler": {"telemetry": "nvml", "protocol": proto}, "none": {"telemetry": "none", "protocol": proto}},
        base=vars(args), pairs=args.pairs, results=args.results, console=print,
    )
    ratios = paired_ratios(rows, "sampler", "none")
    print(f"time(sampler at {args.period_ms:g} ms) / time(no telemetry), per pair: "
          + ", ".join(f"{r:.5f}" for r in ratios))
    print(f"median {median(ratios):.5f} -> sampler cost {100 * (median(ratios) - 1):+.3f} % (goal within 0.3 %)")


if __name__ == "__main__":
    main()
