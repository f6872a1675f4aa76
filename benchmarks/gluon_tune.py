"""Check `gluon-fp8-lean` against `triton-fp8-lean-accmma`, then gate and rank its launch configs (issue 19).

    python benchmarks/gluon_tune.py --configs 64x4x3,64x4x2,128x8x2 -k triton-fp8-lean-accmma -k triton-bf16 \
        -k sdpa-cudnn --json tune.json

1. Small shapes (causal and not, d=64 and 128, GQA, a ragged S): the Gluon kernel's output against the
   Triton kernel whose P it shares (same P, another order of fp32 sums: they agree to bf16 rounding),
   and the harness's gate, per config.
2. The timing shape (default S=16384, H=32, d=128, causal, gaussian:0.1): the gate per config and per
   `-k` kernel, then `fp8_rank`'s burst timing (do_bench median after a warm-up, rounds in alternating
   order). A burst figure, the filter before `bench sustained`. Configs are BLOCK_MxWARPSxSTAGES.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_rank import _time_ms

SMALL = [  # batch, heads_q, heads_kv, S, d, causal
    (1, 4, 4, 1024, 128, True), (2, 4, 2, 1040, 64, False), (1, 2, 2, 240, 128, True), (1, 2, 1, 512, 64, True),
    (1, 2, 2, 1088, 128, False),
]


def _args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="64x4x3")
    ap.add_argument("-k", "--kernel", action="append", default=[])
    ap.add_argument("--input", default="gaussian:0.1")
    ap.add_argument("--seq-len", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm-s", type=float, default=1.5)
    ap.add_argument("--rep-ms", type=float, default=300.0)
    ap.add_argument("--skip-small", action="store_true")
    ap.add_argument("--small-configs", type=int, default=2, help="how many of --configs the small shapes check")
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


def _config(text: str) -> dict:
    """BLOCK_MxWARPSxSTAGES, a trailing "s" for the row sum by wgmma (gluon-fp8-lean-summma): 64x4x3s."""
    sum_mma = text.endswith("s")
    bm, warps, stages = (int(x) for x in text.rstrip("s").split("x"))
    return {"block_m": bm, "block_n": 64, "num_warps": warps, "num_stages": stages, "sum_mma": sum_mma}


def main(argv=None) -> int:
    import torch

    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import (
        default_registry,
        gate,
        kernel_reference_inputs,
        reference_attention,
    )

    args = _args(argv)
    reg = default_registry()
    gk = reg.get("gluon-fp8-lean")
    base = reg.get("triton-fp8-lean-accmma")
    configs = args.configs.split(",")
    result = {"small": [], "kernels": {}}
    if not args.skip_small:
        for dims in SMALL:
            b, hq, hkv, s, d, causal = dims
            shape = AttentionShape(batch=b, heads_q=hq, heads_kv=hkv, seq_len=s, head_dim_qk=d, causal=causal)
            x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1.0"), device="cuda")
            ref_out = base.prepare(x, config={"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 2})().float()
            q, k, v = kernel_reference_inputs(gk, x)
            ref = reference_attention(q, k, v, scale=x.scale, causal=causal)
            for c in configs[: args.small_configs]:
                row = {"shape": shape.label(), "config": c}
                try:
                    got = gk.prepare(x, config=_config(c))().float()
                    row["max_diff_rel"] = float((got - ref_out).abs().max() / ref_out.abs().max())
                    row["finite"] = bool(torch.isfinite(got).all())
                    row["gate"] = gate(gk, x, gk.prepare(x, config=_config(c)), reference=ref).summary()
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                print("small", row, flush=True)
                result["small"].append(row)
    shape = AttentionShape(batch=1, heads_q=args.heads, heads_kv=args.heads, seq_len=args.seq_len,
                           head_dim_qk=args.head_dim, causal=args.causal)
    x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=args.input), device="cuda")
    refs: dict = {}
    launches = {}
    entries = [(f"gluon-fp8-lean[{c}]", gk, _config(c)) for c in configs] + [(n, reg.get(n), None) for n in args.kernel]
    for name, kernel, cfg in entries:
        row = result["kernels"][name] = {"kernel": name}
        try:
            t0 = time.perf_counter()
            launch = kernel.prepare(x, config=cfg) if cfg else kernel.prepare(x)
            row["prepare_s"] = round(time.perf_counter() - t0, 2)
            key = kernel.extra.get("quant")
            if key not in refs:
                q, k, v = kernel_reference_inputs(kernel, x)
                refs[key] = reference_attention(q, k, v, scale=x.scale, causal=args.causal)
                del q, k, v
            row["gate"] = gate(kernel, x, launch, reference=refs[key]).summary()
            launches[name] = launch
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        print(name, row.get("gate") or row.get("error"), flush=True)
    refs.clear()
    order = list(launches)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            ms = _time_ms(launches[name], device="cuda", warm_s=args.warm_s, rep_ms=args.rep_ms)
            result["kernels"][name].setdefault("ms_rounds", []).append(ms)
            print(f"round {r + 1}: {name:30} {ms:9.4f} ms", flush=True)
    for name in order:
        row = result["kernels"][name]
        row["ms"] = statistics.median(row["ms_rounds"])
        row["tflops"] = shape.flops / (row["ms"] * 1e-3) * 1e-12
    timed = sorted((r for r in result["kernels"].values() if "ms" in r), key=lambda r: r["ms"])
    print(f"{shape.label()} {args.input}: do_bench median of {args.rounds} rounds")
    for r in timed:
        print(f"{r['kernel']:30} {r['ms']:9.4f} ms {r['tflops']:7.1f} TFLOP/s  x{r['ms'] / timed[0]['ms']:5.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
