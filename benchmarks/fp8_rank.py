"""Gate, then rank, kernels on one shape by a short burst time (issue 19's FP8 variants; not sustained).

    python benchmarks/fp8_rank.py -k triton-fp8-lean -k triton-fp8-lean-pipe --json rank.json
    python benchmarks/fp8_rank.py --batch 8 --heads 9 --seq-len 8192 --head-dim 64 --variants --json rank64.json

Per kernel: prepare (compiles), the harness's correctness gate against fp64 attention on what the kernel
multiplies (one reference per distinct set of inputs: all FP8 kernels share the e4m3 one), and only
then timing. Timing is `triton.testing.do_bench` (median) after `--warm-s` of back-to-back launches, in
`--rounds` rounds with the kernel order reversed every round (a card that is heating up then does not
favour the kernels that ran first); a kernel's figure is its median over rounds. This is the quick
filter before `bench sustained` on the best: burst times flatter fast kernels by 3-13 % on the H200.

`--best-variant` prints, last, `best variant: NAME`, the fastest gated kernel that declares `variant_of`
(benchmarks/h200/fp8_variants.sh picks its sustained and traced candidate so). On the CPU (`--device cpu`, TRITON_INTERPRET=1 for the
Triton kernels) the timing is a plain wall-clock loop: for testing this script, never for figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", "--kernel", action="append", default=[])
    ap.add_argument("--variants", action="store_true", help="add every kernel of kernels_under_test.triton_fp8_variants")
    ap.add_argument("--input", default="gaussian:0.1")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=16384)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warm-s", type=float, default=1.5)
    ap.add_argument("--rep-ms", type=float, default=300.0, help="do_bench's rep (ms of timed launches)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--best-variant", action="store_true",
                    help="print the fastest gated kernel that declares `variant_of` (exit 3 if none was timed)")
    return ap.parse_args(argv)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _time_ms(launch, *, device: str, warm_s: float, rep_ms: float) -> float:
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:  # bring the clock near where back-to-back launches hold it
        for _ in range(8):
            launch()
        _sync(device)
    if device.startswith("cuda"):
        from triton.testing import do_bench

        return float(do_bench(launch, warmup=25, rep=rep_ms, return_mode="median"))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        launch()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def rank(args) -> dict:
    import torch

    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import (
        default_registry,
        gate,
        kernel_reference_inputs,
        reference_attention,
    )

    names = list(args.kernel)
    if args.variants:
        from kernels_under_test.triton_fp8_variants import VARIANTS

        names += [n for n in VARIANTS if n not in names]
    shape = AttentionShape(batch=args.batch, heads_q=args.heads, heads_kv=args.heads, seq_len=args.seq_len,
                           head_dim_qk=args.head_dim, causal=args.causal)
    inputs = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=args.input), device=args.device)
    registry = default_registry()
    refs: dict = {}
    rows: dict = {}
    launches = {}
    for name in names:
        row = rows[name] = {"kernel": name, "gate_passed": False}
        try:
            kernel = registry.get(name)
            row["variant_of"] = kernel.extra.get("variant_of")
            t0 = time.perf_counter()
            launch = kernel.prepare(inputs)
            row["prepare_s"] = round(time.perf_counter() - t0, 2)
            key = kernel.extra.get("quant")  # None: the kernel multiplies the inputs as they are
            if key not in refs:
                q, k, v = kernel_reference_inputs(kernel, inputs)
                refs[key] = reference_attention(q, k, v, scale=inputs.scale, causal=shape.causal)
                del q, k, v
            result = gate(kernel, inputs, launch, reference=refs[key])
            row.update(gate_passed=True, gate=result.summary())
            launches[name] = launch
        except Exception as exc:  # noqa: BLE001 - a compile error, a gate failure: one kernel must not hide the others
            row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        print(f"{name:28} gate {'pass' if row['gate_passed'] else 'FAIL'}  {row.get('gate') or row.get('error')}",
              flush=True)
        torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    refs.clear()
    order = list(launches)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            ms = _time_ms(launches[name], device=args.device, warm_s=args.warm_s, rep_ms=args.rep_ms)
            rows[name].setdefault("ms_rounds", []).append(ms)
            print(f"round {r + 1}: {name:28} {ms:9.4f} ms", flush=True)  # kept if the step's time limit hits
    for name in order:
        row = rows[name]
        row["ms"] = statistics.median(row["ms_rounds"])
        row["tflops"] = shape.flops / (row["ms"] * 1e-3) * 1e-12
    return {"shape": shape.label(), "input": args.input, "device": args.device, "kernels": rows}


def best_variant(result: dict) -> str | None:
    timed = [r for r in result["kernels"].values() if r.get("variant_of") and "ms" in r]
    return min(timed, key=lambda r: r["ms"])["kernel"] if timed else None


def main(argv=None) -> int:
    args = _args(argv)
    result = rank(args)
    timed = sorted((r for r in result["kernels"].values() if "ms" in r), key=lambda r: r["ms"])
    print(f"{result['shape']} {result['input']}: do_bench median of {args.rounds} rounds")
    fastest = timed[0]["ms"] if timed else None
    for r in timed:
        rounds = " ".join(f"{m:.4f}" for m in r["ms_rounds"])
        print(f"{r['kernel']:28} {r['ms']:9.4f} ms {r['tflops']:7.1f} TFLOP/s  x{r['ms'] / fastest:5.3f}  [{rounds}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.best_variant:
        pick = best_variant(result)
        print(f"best variant: {pick}")
        return 0 if pick else 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
