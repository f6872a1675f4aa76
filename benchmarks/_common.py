"""Shared set-up for the benchmark scripts: inputs and a prepared kernel on the first CUDA device."""

from __future__ import annotations

from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import default_registry


def shape_args(ap, *, kernel: str = "sdpa-cudnn", results: str | None = None):
    """The options every benchmark shares: one kernel on one input of one attention shape."""
    ap.add_argument("--kernel", default=kernel)
    ap.add_argument("--input", default="gaussian:0.1")
    ap.add_argument("--seq-len", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    if results is not None:
        ap.add_argument("--pairs", type=int, default=3)
        ap.add_argument("--results", default=results)
    return ap


def prepared(kernel_name: str, *, source: str, seq_len: int, heads: int, head_dim: int, device: str = "cuda"):
    shape = AttentionShape(batch=1, heads_q=heads, heads_kv=heads, seq_len=seq_len, head_dim_qk=head_dim)
    inputs = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=source), device=device)
    kernel = default_registry().get(kernel_name)
    return kernel, inputs, kernel.prepare(inputs)


def alternate(*, arms: dict, base: dict, pairs: int, results: str, console=None) -> list[dict]:
    """Run two variants of one sustained measurement alternately (A B, B A, ...) and return their rows.

    Alternating, and flipping the order every pair, keeps a slow drift of the card (temperature) from
    landing on one arm only.
    """
    from pathlib import Path

    from harness.config import RunConfig, SustainedProtocol
    from harness.inputs import AttentionShape, InputSpec
    from harness.runner import run_sustained

    (a_name, a_over), (b_name, b_over) = arms.items()
    shape = AttentionShape(batch=1, heads_q=base["heads"], heads_kv=base["heads"], seq_len=base["seq_len"],
                           head_dim_qk=base["head_dim"])
    spec = InputSpec(shape=shape, dtype="bfloat16", source=base["input"])
    rows = []
    for i in range(pairs):
        order = [(a_name, a_over), (b_name, b_over)] if i % 2 == 0 else [(b_name, b_over), (a_name, a_over)]
        for name, over in order:
            proto = SustainedProtocol(repeats=1, **over.get("protocol", {}))
            cfg = RunConfig(kernels=(base["kernel"],), inputs=(spec,), device=base.get("device", "cuda:0"),
                            telemetry=over.get("telemetry", "auto"), protocol=proto, results_dir=Path(results),
                            run_name=f"{name}-{i}")
            res = run_sustained(cfg)
            m = next(r for r in res.measurements if r.get("time_ns"))
            rows.append({"arm": name, "pair": i, "time_ns": m["time_ns"], "sm_clock_mhz": m.get("sm_clock_mhz"),
                         "inband_clock_mhz": m.get("inband_clock_mhz"), "settled_after_s": m.get("settled_after_s"),
                         "power_w": m.get("power_w"), "run": str(res.path)})
            if console:
                console(f"pair {i} {name:>10}: {m['time_ns'] / 1e6:.4f} ms/launch, NVML {m.get('sm_clock_mhz')} MHz, "
                        f"in-band {m.get('inband_clock_mhz')}, settled after {m.get('settled_after_s')}")
    return rows


def paired_ratios(rows: list[dict], a: str, b: str) -> list[float]:
    """time(A) / time(B) for each pair."""
    out = []
    for p in sorted({r["pair"] for r in rows}):
        ta = next(r["time_ns"] for r in rows if r["pair"] == p and r["arm"] == a)
        tb = next(r["time_ns"] for r in rows if r["pair"] == p and r["arm"] == b)
        out.append(ta / tb)
    return out
