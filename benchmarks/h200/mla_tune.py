"""triton-mla's pointer-load baseline (the configuration tuned on 2026-12-05) against its TMA configurations, one
device call: B16, S_kv 16384, DeepSeek dims (512 latent + 64 RoPE), Hq 128 (compute-bound) and Hq 16 (a TP slice:
memory-bound), on pages of 64 (the decode roofs' layout) and on a dense cache. Each configuration is checked
against the fp32 math reference first, then timed as decode_tune.py times (CUDA-graph replays, median of 7): a
ranking, not the figure of record (benchmarks/h200/decode_roofs.sh). Writes $OUT/mla_tune.jsonl and
$OUT/mla_tune.log (decode_tune's `record`/`log`, renamed), and prints old against new per shape last.
The candidates and why: docs/experiments/mla-decode-sass.md.

    python benchmarks/h200/mla_tune.py --out $OUT                     # the H200, ~2.5 min
    TRITON_INTERPRET=1 python benchmarks/h200/mla_tune.py --dry --out /tmp/mla   # the CPU: tiny shapes, code paths
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decode_tune as dt  # noqa: E402  (a script beside this one, not a package)

from kernels_under_test.decode import (  # noqa: E402
    MLA_CONFIG,
    MLA_CONFIG_NARROW,
    MLA_CONFIG_NARROW_POINTERS,
    MLA_CONFIG_POINTERS,
)

# (label, config, split choices): the pointer baselines first, so each shape's table reads old, then new. The
# split counts are what prepare() would time; bn32 x 3 stages keeps its loop free of spills but spills 24-32
# bytes outside it (so it is not shipped; timed here to see what 32 keys a trip is worth).
WIDE = (
    ("old: pointers bn64 x2", MLA_CONFIG_POINTERS, (1, 2)),
    ("new: tma bn16 x4", MLA_CONFIG, (1, 2)),
    ("tma bn16 x6", dict(MLA_CONFIG, num_stages=6), (1,)),
    ("tma bn32 x3", dict(MLA_CONFIG, block_n=32, num_stages=3), (1, 2)),
    ("tma bn32 x4", dict(MLA_CONFIG, block_n=32, num_stages=4), (1,)),
)
NARROW = (
    ("old: pointers bn32 x2", MLA_CONFIG_NARROW_POINTERS, (2, 4, 6)),
    ("new: tma bn32 x3", MLA_CONFIG_NARROW, (2, 4, 6)),
    ("tma bn32 x4", dict(MLA_CONFIG_NARROW, num_stages=4), (1, 2)),
    ("tma bn16 x4", dict(MLA_CONFIG_NARROW, block_n=16, num_stages=4), (2, 4)),
)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=170.0, help="stop starting timings after this")
    ap.add_argument("--dry", action="store_true", help="CPU: tiny shapes in the Triton interpreter")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    # decode_tune's log/record write tune.log / tune.jsonl: this step's files get their own names
    log = lambda text: dt.log(out, text)  # noqa: E731
    (out / "tune.log").unlink(missing_ok=True)
    (out / "tune.jsonl").unlink(missing_ok=True)
    import torch

    device = "cpu" if args.dry else "cuda"
    deadline = time.time() + args.budget_s
    if not args.dry:
        import triton

        p = torch.cuda.get_device_properties(0)
        log(f"{p.name} SMs {p.multi_processor_count} torch {torch.__version__} triton {triton.__version__}")
    timer = dt.Timer(torch, device)
    mla = dt.kernel_factory("triton-mla")
    M = dict(batch=1, hkv=1, d=576, s_kv=64) if args.dry else dict(batch=16, hkv=1, d=576, s_kv=16384)
    shapes = [(hq, page) for hq in ((64, 16) if args.dry else (128, 16)) for page in ((16, None) if args.dry
                                                                                      else (64, None))]
    table = []
    for hq, page in shapes:
        x, k, v = dt.decode_inputs(torch, hq=hq, page=page, device=device, mla=True, **M)
        ref = dt.reference(torch, x, k, v)
        nb, fl = x.shape.bytes_moved(item=2, out_item=2), x.shape.flops
        label = f"Hq{hq} {'page' + str(page) if page else 'dense'}"
        for name, cfg, splits in WIDE if hq * x.shape.seq_len >= 64 else NARROW:
            for c in splits[:1] if args.dry else splits:
                if time.time() > deadline:
                    log(f"budget spent: {label} {name} ctas {c} not timed")
                    break
                row = dt.try_config(torch, timer, out, kernel="triton-mla", prepare=mla, x=x, ref=ref,
                                    config={**cfg, "ctas_per_sm": c}, label=label, nbytes=nb, flops=fl)
                if row and row["time_ns"]:
                    table.append((label, f"{name} ctas {c}", row["time_ns"], row["tflop_per_s"], row["gb_per_s"]))
        del x, k, v, ref
        if not args.dry:
            torch.cuda.empty_cache()
    for src, dst in (("tune.log", "mla_tune.log"), ("tune.jsonl", "mla_tune.jsonl")):
        if (out / src).exists():
            (out / src).replace(out / dst)
    print("SUMMARY (graph replays, median per launch; old = the pointer configuration of 2026-12-05)")
    for label in dict.fromkeys(t[0] for t in table):
        rows = [t for t in table if t[0] == label]
        old = min((t for t in rows if t[1].startswith("old")), key=lambda t: t[2], default=None)
        for _, name, t, tf, gbs in rows:
            vs = f"{old[2] / t:5.2f}x old" if old else ""
            print(f"  {label:13s} {name:32s} {t / 1e3:9.1f} us {tf:7.1f} TFLOP/s {gbs:7.0f} GB/s  {vs}")
        best = min(rows, key=lambda t: t[2])
        print(f"  {label:13s} BEST {best[1]}: {best[2] / 1e3:.1f} us")
    (out / "mla_tune_summary.json").write_text(json.dumps(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
