"""Gate, error table, reproducibility and a quick burst time for bundled kernels on one shape.

Not a sustained measurement (use `bench sustained` for that): this is the correctness side of the
bundled kernels, run on the GPU before timing them.

    python benchmarks/h200/kernel_check.py --seq-len 16384 --heads 32 --head-dim 128 --input gaussian:0.1
"""

from __future__ import annotations

import argparse
import time

KERNELS = ("sdpa-cudnn", "sdpa-flash", "triton-bf16", "triton-fp8-exact", "triton-fp8-lean")


def main() -> None:
    import torch

    from harness.errors import HarnessError
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import attention_error, default_registry, gate, reproducibility

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", action="append", default=[])
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--seq-len", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=None)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--repro", type=int, default=0, help="launches for the reproducibility check (0: skip)")
    ap.add_argument("--error", action="store_true", help="error by stage vs fp64 (slow at 16K)")
    args = ap.parse_args()
    reg = default_registry()
    shape = AttentionShape(batch=1, heads_q=args.heads, heads_kv=args.heads_kv or args.heads, seq_len=args.seq_len,
                           head_dim_qk=args.head_dim)
    for source in args.input or ["gaussian:0.1", "gaussian:1"]:
        inputs = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=source), device="cuda")
        print(f"== {source} {shape.label()}")
        for name in args.kernel or KERNELS:
            kernel = reg.get(name)
            try:
                t0 = time.perf_counter()
                launch = kernel.prepare(inputs)
                prep = time.perf_counter() - t0
                g = gate(kernel, inputs, launch)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for _ in range(5):
                    launch()
                start.record()
                for _ in range(20):
                    launch()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end) / 20
                print(f"{name:18} gate PASS {g.summary()}; burst {ms:.4f} ms ({shape.flops / ms * 1e-9:.1f} TFLOP/s); "
                      f"prepare {prep:.1f} s")
                if args.error:
                    print(f"{'':18} error: {attention_error(kernel, inputs, launch=launch).summary()}")
                if args.repro:
                    for interfere in (None, "gemm"):
                        print(f"{'':18} repro: {reproducibility(kernel, inputs, launches=args.repro, interfere=interfere, launch=launch).summary()}")
            except HarnessError as exc:
                print(f"{name:18} FAIL {exc}")
            except Exception as exc:  # a kernel that crashes must not hide the others' results
                print(f"{name:18} CRASH {type(exc).__name__}: {str(exc)[:500]}")
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
