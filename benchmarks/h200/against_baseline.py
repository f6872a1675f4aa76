"""Every kernel of a sustained run against one baseline kernel (default sdpa-cudnn), per input: time = cycles /
clock, each as a median over repeats, read with pyarrow alone (the GPU image has no polars).

    python benchmarks/h200/against_baseline.py results/<run> [--baseline sdpa-cudnn]

Prints per input and kernel: status (a kernel that failed the gate says so and has no figures), median
ms/launch, in-band clock, Mcycles/launch (time x in-band clock), and time, cycles and clock factors against
the baseline on the same input: time B/A = cycles B/A x clock A/B (medians of repeats: the identity holds
to the spread of the repeats). Then, for kernels timed on a captured input and its control, captured /
control the same way. `bench compare` gives the intervals once the run is back where polars is.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict


def figures(rows):
    """(kernel, input) -> {'time_ns', 'clock_mhz', 'cycles', 'repeats', 'status', 'gate'} from timed rows."""
    by = defaultdict(list)
    status = {}
    for r in rows:
        key = (r["kernel"], r["input_label"])
        if r["status"] in ("ok", "unsettled") and r["time_ns"]:
            by[key].append(r)
        else:
            status.setdefault(key, (r["status"], (r.get("error") or "")[:300]))
    out = {}
    for key, rs in by.items():
        clock = [r["inband_clock_mhz"] or r["sm_clock_mhz"] for r in rs]
        known = None not in clock  # a CPU run has no clock: times only
        out[key] = {"time_ns": statistics.median(r["time_ns"] for r in rs),
                    "clock_mhz": statistics.median(clock) if known else None,
                    "cycles": statistics.median(r["time_ns"] * c * 1e-3 for r, c in zip(rs, clock)) if known else None,
                    "repeats": len(rs), "status": "timed", "gate_max_ratio": rs[0].get("gate_max_ratio"),
                    "gate_snr_db": rs[0].get("gate_snr_db")}
    for key, (st, err) in status.items():
        out.setdefault(key, {"status": st, "error": err})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--baseline", default="sdpa-cudnn")
    args = ap.parse_args(argv)
    from harness.results import read_rows

    fig = figures(read_rows(args.run, "measurements"))
    inputs = list(dict.fromkeys(i for _, i in fig))
    kernels = list(dict.fromkeys(k for k, _ in fig))
    for inp in inputs:
        base = fig.get((args.baseline, inp), {})
        print(f"== {inp}: against {args.baseline}")
        for k in kernels:
            f = fig.get((k, inp))
            if f is None:
                continue
            if f["status"] != "timed":
                print(f"  {k:28} {f['status']}: {f.get('error', '')}")
                continue
            ratio = "-" if f["gate_max_ratio"] is None else f"{f['gate_max_ratio']:.3g}"
            clocked = f["clock_mhz"] is not None
            line = (f"  {k:28} {f['time_ns'] / 1e6:8.4f} ms  "
                    + (f"{f['clock_mhz']:6.0f} MHz in-band  {f['cycles'] / 1e6:7.3f} Mcycles  " if clocked else "no clock  ")
                    + f"({f['repeats']} repeats; gate max/allowance {ratio})")
            if base.get("status") == "timed" and k != args.baseline:
                line += f"  time x{f['time_ns'] / base['time_ns']:.3f}"
                if clocked and base["clock_mhz"] is not None:
                    line += f" = cycles x{f['cycles'] / base['cycles']:.3f} x clock x{base['clock_mhz'] / f['clock_mhz']:.3f}"
            print(line)
    captured = [i for i in inputs if i.endswith(":captured")]
    for cap in captured:
        for control in (i for i in inputs if i != cap and i.split(":")[0] == cap.split(":")[0]):
            print(f"== {cap} / {control}")
            for k in kernels:
                a, b = fig.get((k, control), {}), fig.get((k, cap), {})
                if a.get("status") == "timed" and b.get("status") == "timed":
                    split = (f" = cycles x{b['cycles'] / a['cycles']:.4f} x clock x{a['clock_mhz'] / b['clock_mhz']:.4f}"
                             if a["clock_mhz"] is not None and b["clock_mhz"] is not None else " (no clock)")
                    print(f"  {k:28} time x{b['time_ns'] / a['time_ns']:.4f}{split}")
                elif b.get("status") not in (None, "timed"):
                    print(f"  {k:28} not timed on the captured layer: {b['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
