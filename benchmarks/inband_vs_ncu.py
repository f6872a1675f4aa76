"""Cross-check the in-band clock probe against Nsight Compute's SM clock for one launch after warm-in.

The script re-runs itself under `ncu --clock-control none --profile-from-start off` (never ncu's
default, which locks clocks). The child warms the kernel up back to back for --warm-s seconds with the
in-band probe running, then profiles exactly one launch between cudaProfilerStart/Stop. Printed: the
in-band clock over the last second of warm-in, NVML's SM clock, and ncu's
`sm__cycles_elapsed.avg.per_second` for the profiled launch.

    python benchmarks/inband_vs_ncu.py --kernel sdpa-cudnn --seq-len 16384
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import time

METRICS = "sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,gpu__time_duration.sum"


def child(args) -> None:
    import torch

    from benchmarks._common import prepared
    from harness.devices import open_device
    from harness.runner import InbandProbe
    from harness.telemetry import create_sampler

    kernel, inputs, launch = prepared(args.kernel, source=args.input, seq_len=args.seq_len, heads=args.heads,
                                      head_dim=args.head_dim)
    dev = open_device("cuda:0")
    sampler = create_sampler("nvml", pci_bus_id=dev.identity().pci_bus_id, gpm=False)
    sampler.open()
    probe = InbandProbe(dev, period_s=0.1, spin_us=200)
    probe.calibrate()
    t_end = time.monotonic() + args.warm_s
    clocks = []
    probe.start()
    while time.monotonic() < t_end:
        for _ in range(20):
            launch()
        torch.cuda.synchronize()
        clocks.append(sampler.read().sm_clock_mhz)
    readings = probe.stop()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    last = [r.clock_mhz for r in readings if r.t_ns >= time.monotonic_ns() - 1.5e9]
    last = last or [r.clock_mhz for r in readings[-10:]]
    sampler.close()
    print("CHILD " + json.dumps({
        "inband_mhz": sorted(last)[len(last) // 2] if last else None,
        "nvml_mhz": sorted(clocks[-10:])[len(clocks[-10:]) // 2],
        "probes": len(readings),
    }))


def parse_ncu_csv(text: str) -> dict[str, float]:
    rows = [r for r in csv.reader(io.StringIO(text[text.index('"ID"'):]))] if '"ID"' in text else []
    if not rows:
        return {}
    head = rows[0]
    name_i, unit_i, val_i = head.index("Metric Name"), head.index("Metric Unit"), head.index("Metric Value")
    out = {}
    for r in rows[1:]:
        if len(r) > val_i:
            try:
                out[f"{r[name_i]} [{r[unit_i]}]"] = float(r[val_i].replace(",", ""))
            except ValueError:
                pass
    return out


def main() -> None:
    from benchmarks._common import shape_args

    ap = argparse.ArgumentParser()
    shape_args(ap)
    ap.add_argument("--warm-s", type=float, default=6.0)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--metrics", default=METRICS, help="comma-separated ncu metrics (the clock ones are always added)")
    ap.add_argument("--raw", default=None, help="write ncu's raw CSV output to this file (a fixture for parsers)")
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    ncu = shutil.which("ncu")
    if ncu is None:
        sys.exit("ncu is not on PATH: install Nsight Compute to run this cross-check")
    metrics = ",".join(dict.fromkeys([*METRICS.split(","), *args.metrics.split(",")]))
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", metrics, "--csv",
           sys.executable, "-m", "benchmarks.inband_vs_ncu", "--child", "--kernel", args.kernel, "--input", args.input,
           "--seq-len", str(args.seq_len), "--heads", str(args.heads), "--head-dim", str(args.head_dim),
           "--warm-s", str(args.warm_s)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if args.raw:
        with open(args.raw, "w") as f:
            f.write(proc.stdout)
    child_line = next((l for l in proc.stdout.splitlines() if l.startswith("CHILD ")), None)
    if child_line is None:
        sys.exit(f"child failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    res = json.loads(child_line[6:])
    metrics = parse_ncu_csv(proc.stdout)
    ncu_hz = next((v for k, v in metrics.items() if k.startswith("sm__cycles_elapsed.avg.per_second")), None)
    unit = next((k for k in metrics if k.startswith("sm__cycles_elapsed.avg.per_second")), "")
    scale = {"[hz]": 1e-6, "[khz]": 1e-3, "[mhz]": 1.0, "[ghz]": 1e3}.get(unit[unit.find("["):].lower(), 1.0) if unit else 1.0
    ncu_mhz = ncu_hz * scale if ncu_hz is not None else None
    print(f"kernel {args.kernel} input {args.input} S={args.seq_len} after {args.warm_s} s warm-in")
    print(f"  in-band probe (last ~1.5 s of warm-in): {res['inband_mhz']} MHz from {res['probes']} probes")
    print(f"  NVML SM clock (last polls):             {res['nvml_mhz']} MHz")
    print(f"  ncu sm__cycles_elapsed.avg.per_second:  {ncu_mhz} MHz (one launch)")
    for k, v in metrics.items():
        print(f"    {k} = {v}")
    if ncu_mhz and res["inband_mhz"]:
        print(f"  in-band / ncu = {res['inband_mhz'] / ncu_mhz:.4f}")


if __name__ == "__main__":
    main()
