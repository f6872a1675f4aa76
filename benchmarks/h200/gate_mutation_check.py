"""Mutation check of the correctness gate by declared numerics (issue 32): every bundled FP8 kernel must pass
it and every deliberately broken one (tests/kernels/fp8_mutants.py) must fail it, on captured layers and on
a Gaussian control of their shape.

    PYTHONPATH=. python benchmarks/h200/gate_mutation_check.py --capture captures/smollm2-135m/pydoc-S8192-B3/layer15.safetensors \\
        --capture captures/smollm2-135m/pydoc-S8192-B3/layer03.safetensors --control gaussian:0.1 --json gate.json
    TRITON_INTERPRET=1 PYTHONPATH=. python benchmarks/h200/gate_mutation_check.py --device cpu --heads 1 --seq-len 1024 \\
        --capture ... (the CPU, in Triton's interpreter: a slice of the capture's heads and rows)

Per input: one fp64 emulation per declared numerics (harness.kernels.emulate_declared), then per kernel
the harness's own gate (`harness.kernels.gate`: the comparison, the stale-output relaunch), and beside it
the format gate the FP8 kernels used to meet (max |diff| beyond rounding < 0.03 against fp64 on the
quantized inputs) for contrast. Kernels: every registered kernel that declares e4m3 inputs and its P
rounding and runs on this device at this head dim (`-k` to name some), plus the five mutants.
Prints one line per input x kernel; exits 0 when every bundled kernel passed and every mutant failed on
every input, 1 otherwise (the offending lines are marked UNEXPECTED).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", action="append", default=[], help="a capture layer file (repeatable)")
    ap.add_argument("--control", action="append", default=None, help="control source of each capture's shape "
                    "(repeatable; default gaussian:0.1)")
    ap.add_argument("-k", "--kernel", action="append", default=[], help="bundled FP8 kernels (default: all that run here)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--heads", type=int, default=None, help="keep the first N KV heads (and their query heads)")
    ap.add_argument("--seq-len", type=int, default=None, help="keep the first S rows and keys (a causal prefix)")
    ap.add_argument("--batch", type=int, default=None, help="keep the first B batch rows")
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


def _crop(x, *, heads, seq_len, batch):
    """A causal prefix of `x`: the first `batch` rows, `heads` KV heads with their query heads, `seq_len`."""
    import dataclasses

    if heads is None and seq_len is None and batch is None:
        return x
    s = x.shape
    group = s.heads_q // s.heads_kv
    hkv = min(heads or s.heads_kv, s.heads_kv)
    n = min(seq_len or s.seq_len, s.seq_len)
    b = min(batch or s.batch, s.batch)
    shape = dataclasses.replace(s, batch=b, heads_q=hkv * group, heads_kv=hkv, seq_len=n)
    cut = lambda t, h: t[:b, :h, :n].contiguous()  # noqa: E731
    return dataclasses.replace(x, q=cut(x.q, hkv * group), k=cut(x.k, hkv), v=cut(x.v, hkv), shape=shape,
                               source=f"{x.source} (B{b} H{hkv * group}/{hkv} S{n} prefix)")


def _inputs(args, device):
    import dataclasses

    from harness.capture import load_capture
    from harness.inputs import InputSpec, make_inputs

    out, controls = [], set()
    for path in args.capture:
        x = _crop(load_capture(path, device=device), heads=args.heads, seq_len=args.seq_len, batch=args.batch)
        layer = path.rsplit("layer", 1)[-1].split(".")[0]
        out.append((f"L{layer}:captured", x))
        for c in args.control or ["gaussian:0.1"]:
            if (x.shape, x.scale, c) in controls:  # the same control of another layer of this capture
                continue
            controls.add((x.shape, x.scale, c))
            spec = InputSpec(shape=x.shape, dtype="bfloat16", source=c, seed=0)
            y = make_inputs(spec, device=device)
            out.append((f"L{layer}:{c}", dataclasses.replace(y, scale=x.scale)))
    return out


def _kernels(names, device_kind, head_dims):
    from harness.kernels import declared_numerics, default_registry

    reg = default_registry()
    chosen = [reg.get(n) for n in names] if names else [
        k for k in (reg.get(n) for n in reg.names()) if declared_numerics(k) is not None
        and k.unavailable_reason(device_kind) is None and (k.head_dims is None or head_dims in k.head_dims)]
    return chosen


def main(argv=None) -> int:
    args = _args(argv)
    import torch

    from harness.errors import GateFailure
    from harness.kernels import (
        compare_declared,
        compare_outputs,
        declared_numerics,
        emulate_declared,
        gate,
        gate_tolerance,
        kernel_reference_inputs,
    )
    from tests.kernels.fp8_mutants import mutants

    device = "cpu" if args.device == "cpu" else args.device
    kind = device.partition(":")[0]
    inputs = _inputs(args, device)
    if not inputs:
        print("give at least one --capture", file=sys.stderr)
        return 2
    s0 = inputs[0][1].shape
    bundled = _kernels(args.kernel, kind, (s0.head_dim_qk, s0.head_dim_v))
    kernels = [(k, False) for k in bundled] + [(k, True) for k in mutants()]
    print(f"{len(bundled)} bundled FP8 kernels: {', '.join(k.name for k in bundled)}; "
          f"{len(kernels) - len(bundled)} mutants", flush=True)
    rows, unexpected = [], 0
    for label, x in inputs:
        ems = {}
        t0 = time.perf_counter()
        for kernel, broken in kernels:
            num = declared_numerics(kernel)
            if num not in ems:
                q, k, v = kernel_reference_inputs(kernel, x)
                ems[num] = emulate_declared(num, q, k, v, scale=x.scale, causal=x.shape.causal)
            em = ems[num]
            row = {"input": label, "source": x.source, "shape": x.shape.label(), "kernel": kernel.name,
                   "mutant": broken}
            try:
                launch = kernel.prepare(x)
                out = launch()
                if kind == "cuda":
                    torch.cuda.synchronize()
                r = compare_declared(out, em, kernel=kernel.name)
                old = compare_outputs(out, em.exact, kernel=kernel.name, v_rms=float(x.v.double().pow(2).mean().sqrt()),
                                      tolerance=_format_tolerance(kernel, gate_tolerance))
                row.update(max_ratio=r.max_ratio, rms_ratio=r.rms_ratio, snr_db=r.snr_db, max_abs_diff=r.max_abs_diff,
                           format_gate_excess=old.max_excess_diff, format_gate_passed=old.passed)
                try:
                    gate(kernel, x, launch, reference=em)
                    row.update(passed=True, reason="")
                except GateFailure as exc:
                    row.update(passed=False, reason=str(exc))
            except Exception as exc:  # noqa: BLE001 - a kernel that cannot run here is reported, not fatal
                row.update(passed=None, reason=f"{type(exc).__name__}: {exc}")
            ok = row["passed"] is (not broken)
            unexpected += not ok
            rows.append(row)
            figures = ("" if "max_ratio" not in row else
                       f"max |diff|/allowance {row['max_ratio']:9.3g}  RMS/rounding {row['rms_ratio']:8.3g}  "
                       f"SNR {row['snr_db']:6.1f} dB  format gate (0.03): "
                       f"{'pass' if row['format_gate_passed'] else 'FAIL'} {row['format_gate_excess']:.3g}")
            verdict = {True: "pass", False: "FAIL", None: "ERROR"}[row["passed"]]
            print(f"{label:22} {kernel.name:36} {verdict:5} {figures}{'' if ok else '  UNEXPECTED'}"
                  + ("" if ok or row["passed"] else f"\n    {row['reason'][:600]}"), flush=True)
        print(f"  ({label}: {time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"mutation check: {'OK' if not unexpected else f'{unexpected} UNEXPECTED'}: "
          f"{len(bundled)} bundled kernels x {len(inputs)} inputs must pass, {len(kernels) - len(bundled)} mutants "
          f"must fail")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0 if not unexpected else 1


def _format_tolerance(kernel, gate_tolerance):
    import dataclasses

    tol = gate_tolerance("fp8")
    return dataclasses.replace(tol, p_rounding=max(tol.p_rounding, float(kernel.extra.get("p_rel_error") or 0.0)))


if __name__ == "__main__":
    sys.exit(main())
