"""The launch overhead left in a decode figure: per launch, graph vs eager device time and the host's issue time,
for each kernel at each decode shape, and for the smallest kernel torch has (a one-element fill: the floor of
any launch). Written as JSON into a run directory (`--into RUN`: RUN/launch_overhead.json) beside the sweep it
qualifies, and printed one sentence per kernel x shape.

    python benchmarks/launch_overhead.py --device cuda:0 -k sdpa-kvcache -k triton-splitkv \\
        --batch 1,16 --seq-len-kv 1024,8192 --page-size 16 --heads 32 --heads-kv 8 --into results/RUN

The sustained protocol times graphs of up to `max_graph_launches` launches, each replay about `graph_replay_s`
long, so its figures are the graph column; the eager column is what a loop-timed benchmark would report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("-k", "--kernel", action="append", default=[])
    ap.add_argument("--batch", type=_ints, default=[1])
    ap.add_argument("--seq-len-kv", type=_ints, default=[4096])
    ap.add_argument("--seq-len-q", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=None)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--launches", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--into", type=Path, default=None, help="a run directory: write launch_overhead.json there")
    args = ap.parse_args(argv)

    import torch

    from harness.devices import open_device
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import default_registry
    from harness.runner import measure_launch_overhead

    if args.into is not None and not args.into.is_dir():
        print(f"--into {args.into}: not a run directory; give the directory `bench sustained` printed.", file=sys.stderr)
        return 2
    device = open_device(args.device)
    registry = default_registry()
    rows = []
    tiny = torch.zeros(1, device=device.torch_device)
    floor = measure_launch_overhead(device, lambda: tiny.fill_(1.0), launches=args.launches, repeats=args.repeats)
    print(floor.sentence("one-element fill (the floor of a launch)"), flush=True)
    rows.append({"kernel": "torch fill_ (1 element)", "shape": None, **floor.as_dict()})
    for name in args.kernel or ["sdpa-kvcache"]:
        kernel = registry.get(name)
        for batch in args.batch:
            for s_kv in args.seq_len_kv:
                shape = AttentionShape(batch=batch, heads_q=args.heads, heads_kv=args.heads_kv, seq_len=args.seq_len_q,
                                       seq_len_kv=s_kv, head_dim_qk=args.head_dim, page_size=args.page_size)
                inputs = make_inputs(InputSpec(shape=shape, dtype=args.dtype), device=device.torch_device)
                t0 = time.perf_counter()
                launch = kernel.prepare(inputs)
                got = measure_launch_overhead(device, launch, launches=args.launches, repeats=args.repeats)
                print(got.sentence(f"{name} {shape.label()}") + f" [{time.perf_counter() - t0:.1f} s]", flush=True)
                rows.append({"kernel": name, "shape": shape.label(), **got.as_dict()})
                del inputs, launch
    doc = {"what": "per launch: graph = device time inside a CUDA graph (the sustained protocol's figures), eager = "
                   "device time of eager launches back to back, host = host time to issue one eager launch; ns",
           "device": device.identity().as_dict(), "rows": rows}
    if args.into is not None:
        path = args.into / "launch_overhead.json"
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
