"""Full-size architecture check without downloads: Mistral-7B, Qwen3-8B and DeepSeek-V2-Lite built from their
published configs with random weights on the GPU (bf16), one middle layer captured at S = 8192 through the same
hook as a real capture, self-checked; time, estimate and peak GPU memory per model, printed as a table.

    python benchmarks/h200/capture_full_size.py --device cuda:0 --seq-len 8192
    python benchmarks/h200/capture_full_size.py --device cpu --mini        # the same code path on miniatures (CPU)

Each model runs in its own try block, so one failure (memory, a transformers version without the class)
still leaves the others' rows; the failure is printed in its row.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback

from harness.capture import MODELS, CaptureConfig, capture, miniature


def _gb(n) -> str:
    return "-" if n is None else f"{n / 1e9:.1f}"


def run_one(name: str, *, device: str, seq_len: int, mini: bool, root: str, layer: int | None) -> dict:
    spec = miniature(MODELS[name]) if mini else MODELS[name]
    layer = spec.num_layers // 2 if layer is None else layer
    config = CaptureConfig(model=spec, layers=(layer,), seq_len=seq_len, root=root, random_weights=True,
                           device=device)
    t0 = time.perf_counter()
    result = capture(config, on_estimate=lambda e: print(f"  estimate: {e.describe()}", flush=True))
    wall = time.perf_counter() - t0
    (lr,) = result.layers
    e = result.estimate
    return {
        "model": spec.name, "layer": layer, "shape": f"q {lr.shapes['q']} k {lr.shapes['k']} v {lr.shapes['v']}",
        "params_b": f"{e.params / 1e9:.2f}", "wall_s": f"{wall:.1f}",
        "load_s": f"{result.timings_s['load']:.1f}", "forward_s": f"{result.timings_s['forward']:.1f}",
        "check_s": f"{result.timings_s['check']:.1f}", "peak_gb": _gb(result.peak_device_memory_bytes),
        "est_gb": _gb(e.total_bytes), "est_s": f"{e.total_s:.0f}",
        "self_check": f"{lr.self_check_max_abs_diff:.3g} <= {lr.tolerance:.3g}", "scale": f"{lr.scale:.6g}",
        "error": "",
    }


def table(rows: list[dict]) -> str:
    cols = ("model", "layer", "params_b", "wall_s", "load_s", "forward_s", "check_s", "peak_gb", "est_gb", "est_s",
            "self_check", "scale", "shape", "error")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(cols, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mistral-7b,qwen3-8b,deepseek-v2-lite")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    ap.add_argument("--mini", action="store_true", help="miniatures of the same architectures (CPU check)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="full-size-captures-") as root:
        for name in args.models.split(","):
            print(f"== {name}", flush=True)
            try:
                rows.append(run_one(name, device=args.device, seq_len=args.seq_len, mini=args.mini, root=root,
                                    layer=args.layer))
            except Exception as exc:  # one model's failure must not cost the others' rows
                traceback.print_exc()
                rows.append({"model": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(table(rows[-1:]), flush=True)
    print("\nrandom weights (their activations mean nothing); peak_gb = torch.cuda.max_memory_allocated during "
          "load + forward; est = the estimate made before loading")
    print(table(rows))
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
