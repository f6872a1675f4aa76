"""Burst time of a few launch configs of the Triton kernels on one shape (CUDA events; not sustained).

    python benchmarks/triton_tune.py                      # triton-bf16 and triton-fp8-lean, 16K x 32 x 128
    python benchmarks/triton_tune.py --kernel triton-fp8-exact --input gaussian:1

Each config is prepared (compiled) outside the timing, compared with the table config's output (max
|diff|: a broken config shows here before its time means anything), launched 5 times to warm up, then
20 times between two CUDA events. Candidates, from the sm_90 SASS of the table configs:
- bf16 `pack_p`: p -> bf16 two at a time (F2FP.PACK_AB) instead of one F2F per element, which shares the
  quarter-rate unit with MUFU.EX2 (64 EX2 + 64 F2F per thread per 128x128 block; the HGMMAs wait for it).
- num_stages 3 (bf16: 230 KB of shared memory) / 4: deeper K/V prefetch.
- 64-row blocks, 4 warps: 2 (bf16) or 3 (fp8) CTAs per SM whose softmax and wgmma are not in lockstep,
  so one CTA's products can run under another's softmax (Triton does not overlap them within a CTA),
  at twice the K/V reads from L2.
"""

from __future__ import annotations

import argparse

CANDIDATES = {  # {} is the table config (CONFIGS in the kernel module); the others override some of its keys
    "triton-bf16": [{}, dict(pack_p=True), dict(pack_p=True, num_stages=3),
                    dict(pack_p=True, block_m=64, block_n=64, num_warps=4, num_stages=2)],
    "triton-fp8-lean": [{}, dict(num_stages=4), dict(block_m=64, num_warps=4, num_stages=3)],
}
CANDIDATES["triton-fp8-exact"] = CANDIDATES["triton-fp8-lean"]


def main() -> None:
    import torch

    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import default_registry
    from kernels_under_test import triton_bf16, triton_fp8

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", action="append", default=[], choices=sorted(CANDIDATES))
    ap.add_argument("--input", default="gaussian:0.1")
    ap.add_argument("--seq-len", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--launches", type=int, default=20)
    args = ap.parse_args()

    shape = AttentionShape(batch=1, heads_q=args.heads, heads_kv=args.heads, seq_len=args.seq_len,
                           head_dim_qk=args.head_dim, causal=True)
    inputs = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=args.input), device="cuda")
    print(f"{shape.label()} {args.input}: {args.warmup} warm-ups, {args.launches} timed launches per config")
    for name in args.kernel or ["triton-bf16", "triton-fp8-lean"]:
        kernel = default_registry().get(name)
        table = triton_bf16.CONFIGS if name == "triton-bf16" else triton_fp8.CONFIGS
        base = table[(args.head_dim, args.head_dim)]
        first = None
        for over in CANDIDATES[name]:
            config = {**base, **over}
            label = ", ".join(f"{k}={v}" for k, v in config.items())
            try:
                launch = kernel.prepare(inputs, config=config)  # compiles and launches once
                out = launch().clone()
                first = out if first is None else first
                diff = float((out.float() - first.float()).abs().max())
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for _ in range(args.warmup):
                    launch()
                start.record()
                for _ in range(args.launches):
                    launch()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end) / args.launches
                print(f"{name:16} {ms:8.4f} ms {shape.flops / ms * 1e-9:7.1f} TFLOP/s  "
                      f"max|diff| vs table {diff:.3g}  [{label}]")
            except Exception as exc:  # one config that fails to compile or launch must not hide the others
                print(f"{name:16} FAILED {type(exc).__name__}: {str(exc)[:300]}  [{label}]")
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
