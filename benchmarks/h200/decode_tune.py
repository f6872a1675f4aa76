"""Issue 42's tuning sweep, one device call: triton-splitkv and triton-mla configurations, the memory-stream peak
candidates, and cuDNN SDPA's dense decode as the yardstick, each timed the same way; the best configurations then
under ncu. Writes $OUT/tune.jsonl (one line per timing) and $OUT/tune.log, and prints a short table last.

Timing: each candidate is compiled and checked against cuDNN SDPA on the same (logical) cache first, then timed as
CUDA-graph replays (graphs of N launches, N so a replay lasts ~20 ms; 3 warm replays, then the median of 7 timed
with CUDA events), the way the sustained protocol times a decode kernel, but without waiting for the clock to
settle: a ranking, not the figure of record (that is benchmarks/h200/decode_roofs.sh's).

    python benchmarks/h200/decode_tune.py --out $OUT [--budget-s 300]      # the H200
    python benchmarks/h200/decode_tune.py --out $OUT --parts copy,mla16    # the copy tilings and MLA's TP slice only
    TRITON_INTERPRET=1 python benchmarks/h200/decode_tune.py --dry --out /tmp/tune   # the CPU: tiny shapes, code paths
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.kernels import default_registry
from harness.profiling import stream_kernel

T0 = time.time()


def log(out: Path, text: str) -> None:
    line = f"[{time.time() - T0:6.1f} s] {text}"
    print(line, flush=True)
    with open(out / "tune.log", "a") as f:
        f.write(line + "\n")


def record(out: Path, **row) -> None:
    with open(out / "tune.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


class Timer:
    """Per-launch time of a zero-argument launch: CUDA-graph replays timed with events (GPU), or a plain loop
    (CPU dry run)."""

    def __init__(self, torch, device: str):
        self.torch, self.cuda = torch, device.startswith("cuda")

    def __call__(self, launch, *, replay_s: float = 0.02, timed: int = 7) -> float:
        torch = self.torch
        if not self.cuda:
            t = time.perf_counter()
            launch()
            return (time.perf_counter() - t) * 1e9
        launch()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(3):
            launch()
        e.record()
        torch.cuda.synchronize()
        one = s.elapsed_time(e) / 3 * 1e6  # ns
        n = max(1, min(500, int(replay_s * 1e9 / max(one, 1.0))))
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            launch()  # a warm launch on the capture stream
            with torch.cuda.graph(g, stream=stream):
                for _ in range(n):
                    launch()
        torch.cuda.current_stream().wait_stream(stream)
        for _ in range(3):
            g.replay()
        times = []
        for _ in range(timed):
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e6 / n)
        return statistics.median(times)

    def eager(self, launch, *, n: int = 20, timed: int = 5) -> float:
        torch = self.torch
        if not self.cuda:
            return self(launch)
        launch()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(timed):
            s.record()
            for _ in range(n):
                launch()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e6 / n)
        return statistics.median(times)


def decode_inputs(torch, *, batch, hq, hkv, d, s_kv, page, device, mla=False, dtype="bfloat16"):
    """AttentionInputs of a decode shape drawn on the device (fast: no CPU draws), paged through the harness's own
    `paged_cache` (shuffled pages, spare pages, the same layout a run has)."""
    from harness.inputs import AttentionInputs, AttentionShape, paged_cache

    dims = dict(head_dim_qk=576, head_dim_v=512, latent_kv=True) if mla else dict(head_dim_qk=d)
    shape = AttentionShape(batch=batch, heads_q=hq, heads_kv=hkv, seq_len=1, seq_len_kv=s_kv, page_size=page, **dims)
    dt = getattr(torch, dtype)
    g = torch.Generator(device=device).manual_seed(0)
    q = (torch.randn(shape.q_shape(), generator=g, device=device) * 0.5).to(dt)
    k = (torch.randn((batch, hkv, s_kv, shape.head_dim_qk), generator=g, device=device) * 0.5).to(dt)
    v = k[..., :shape.head_dim_v] if mla else (torch.randn((batch, hkv, s_kv, d), generator=g, device=device)).to(dt)
    extra = {}
    if page:
        extra = paged_cache(shape, k, v, generator=torch.Generator().manual_seed(1))
    else:
        extra = {"k": k, "v": v}
    x = AttentionInputs(q=q, shape=shape, dtype=dtype, source="gaussian:0.5", scale=shape.head_dim_qk ** -0.5,
                        **extra)
    return x, k, v


def reference(torch, x, k, v):
    """The output on the logical dense cache: cuDNN SDPA on the GPU (the yardstick), math on the CPU."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.CUDNN_ATTENTION if x.q.is_cuda else SDPBackend.MATH
    s = x.shape
    if s.latent_kv:  # one KV head, one query: the heads as 128 queries of one head, in fp32 (no GQA expansion)
        with sdpa_kernel([SDPBackend.MATH]):
            o = F.scaled_dot_product_attention(x.q.transpose(1, 2).float(), k.float(), v.float(), scale=x.scale)
        return o.transpose(1, 2)
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(x.q, k, v, scale=x.scale, enable_gqa=s.heads_q != s.heads_kv)


def cudnn_launch(torch, x, k, v, backend_name: str):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)
    gqa = x.shape.heads_q != x.shape.heads_kv

    def launch():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(x.q, k, v, scale=x.scale, enable_gqa=gqa)
    return launch


def kernel_factory(name: str):
    """A registered kernel's factory, `prepare(inputs, config=None)`: the decode kernels take a launch config
    (kernels_under_test/decode.py exports the tuned ones)."""
    return default_registry().get(name).prepare


def try_config(torch, timer, out, *, kernel, prepare, x, ref, config, label, nbytes, flops):
    try:
        launch = prepare(x, config=config)
        got = launch()
        err = float((got.float() - ref.float()).abs().max())
        ok = err < 0.05 * float(ref.float().abs().max()) + 1e-2
        t = timer(launch) if ok else None
    except Exception as exc:  # a config that does not compile or run is a line, not the end of the sweep
        record(out, kernel=kernel, shape=label, config=config, error=f"{type(exc).__name__}: {str(exc)[:300]}")
        log(out, f"{kernel} {label} {config}: ERROR {type(exc).__name__}: {str(exc)[:160]}")
        return None
    row = dict(kernel=kernel, shape=label, config=config, max_abs_err=err, ok=ok, time_ns=t,
               gb_per_s=nbytes / t if t else None, tflop_per_s=flops / t * 1e-3 if t else None)
    record(out, **row)
    log(out, f"{kernel} {label} {config}: {'%.1f us' % (t / 1e3) if t else 'WRONG'} "
             f"{'%.0f GB/s' % (nbytes / t) if t else ''} err {err:.2e}")
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--dry", action="store_true", help="CPU: tiny shapes in the Triton interpreter")
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--parts", default="splitkv,mla,streams,ncu",
                    help="comma-separated: splitkv, mla, streams, ncu, copy (the copy stream's tilings), mla16 (more "
                         "TP-slice splits), candidates (triton-splitkv's setup candidates on 3 page orders)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    import torch

    device = "cpu" if args.dry else "cuda"
    deadline = T0 + args.budget_s
    left = lambda: deadline - time.time()  # noqa: E731
    if not args.dry:
        p = torch.cuda.get_device_properties(0)
        import triton
        log(out, f"{p.name} SMs {p.multi_processor_count} L2 {p.L2_cache_size >> 20} MiB torch {torch.__version__} "
                 f"triton {triton.__version__}")
    timer = Timer(torch, device)
    splitkv, mla = kernel_factory("triton-splitkv"), kernel_factory("triton-mla")

    D = dict(batch=2, hq=8, hkv=2, d=64, s_kv=256) if args.dry else dict(batch=16, hq=32, hkv=8, d=128, s_kv=32768)
    best: dict[str, dict] = {}
    summary = []

    if "candidates" in parts:
        candidates(torch, timer, out, args, left, summary)
    if "copy" in parts or "mla16" in parts:
        extra_parts(torch, timer, out, args, left, summary, parts)
    if not parts & {"splitkv", "mla", "streams", "ncu"}:
        for name, shape, t, gbs in summary:
            log(out, f"  {name:70s} {shape:14s} {t / 1e3:10.1f} us {gbs:8.0f} GB/s")
        return 0
    # 1. the dense decode shape: the yardsticks, then triton-splitkv dense and with pages of 16
    dense, k, v = decode_inputs(torch, page=None, device=device, **D)
    nbytes = dense.shape.bytes_moved(item=2, out_item=2)
    flops = dense.shape.flops
    ref = reference(torch, dense, k, v)
    if not args.dry:
        for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
            try:
                t = timer(cudnn_launch(torch, dense, k, v, name))
                record(out, kernel=f"sdpa-{name}", shape="dense", time_ns=t, gb_per_s=nbytes / t)
                log(out, f"sdpa {name} dense: {t / 1e3:.1f} us {nbytes / t:.0f} GB/s")
                summary.append((f"sdpa {name}", "dense", t, nbytes / t))
                best.setdefault("yardstick", {"time_ns": t, "gb_per_s": nbytes / t, "name": name})
            except Exception as exc:
                log(out, f"sdpa {name}: {type(exc).__name__}: {str(exc)[:200]}")
    paged, _, _ = decode_inputs(torch, page=16 if not args.dry else 4, device=device, **D)
    shapes = {"dense": dense, "page16": paged}
    stage_a = [dict(block_n=bn, num_stages=st, num_warps=4) for bn, st in itertools.product((32, 64, 128), (2, 3, 4))]
    stage_a.append(dict(block_n=16, num_stages=5, num_warps=4))  # one page of 16 a block, deeply pipelined
    ctas = (2, 3, 4, 8) if not args.dry else (2,)
    if args.dry:
        stage_a = stage_a[:2]
    for label, x in shapes.items():
        rows = []
        for cfg in stage_a:
            for c in ctas:
                if left() < 120:
                    break
                r = try_config(torch, timer, out, kernel="triton-splitkv", prepare=splitkv, x=x, ref=ref,
                               config={**cfg, "ctas_per_sm": c}, label=label, nbytes=nbytes, flops=flops)
                if r and r["time_ns"]:
                    rows.append(r)
        if not rows:
            continue
        top = min(rows, key=lambda r: r["time_ns"])
        for extra in ({"num_warps": 8}, {"num_warps": 2}, {"evict_first": True},
                      *([{"page_rows": True}, {"page_rows": True, "evict_first": True}] if label != "dense" else [])):
            if left() < 100:
                break
            r = try_config(torch, timer, out, kernel="triton-splitkv", prepare=splitkv, x=x, ref=ref,
                           config={**top["config"], **extra}, label=label, nbytes=nbytes, flops=flops)
            if r and r["time_ns"]:
                rows.append(r)
        top = min(rows, key=lambda r: r["time_ns"])
        best[f"splitkv-{label}"] = top
        summary.append((f"splitkv {json.dumps(top['config'])}", label, top["time_ns"], top["gb_per_s"]))
    del dense, paged, k, v, shapes, ref
    if not args.dry:
        torch.cuda.empty_cache()

    # 2. triton-mla at B16 S_kv 16384: Hq 128 (compute-bound: 242 FLOP/B) and Hq 16 (a TP-8 slice: memory-bound)
    M = dict(batch=2, hkv=1, d=576, s_kv=64) if args.dry else dict(batch=16, hkv=1, d=576, s_kv=16384)
    for hq, page in ((128, 64), (16, 64)) if not args.dry else ((8, 16),):
        x, k, v = decode_inputs(torch, hq=hq, page=page, device=device, mla=True, **M)
        ref = reference(torch, x, k, v)
        nb, fl = x.shape.bytes_moved(item=2, out_item=2), x.shape.flops
        cands = ([dict(block_h=64, block_n=32, num_warps=8, num_stages=2), dict(block_h=64, block_n=32, num_warps=4,
                  num_stages=2), dict(block_h=64, block_n=64, num_warps=8, num_stages=2),
                  dict(block_h=32, block_n=32, num_warps=4, num_stages=2), dict(block_h=64, block_n=16, num_warps=4,
                  num_stages=3), dict(block_h=128, block_n=16, num_warps=8, num_stages=2)] if hq == 128 else
                 [dict(block_h=16, block_n=32, num_warps=4, num_stages=2), dict(block_h=16, block_n=64, num_warps=4,
                  num_stages=2), dict(block_h=16, block_n=32, num_warps=4, num_stages=3),
                  dict(block_h=16, block_n=64, num_warps=8, num_stages=3)])
        if args.dry:
            cands = [dict(block_h=8, block_n=16, num_warps=4, num_stages=2)]
        rows = []
        for cfg in cands:
            for c in ((1, 2) if not args.dry else (1,)):
                if left() < 70:
                    break
                r = try_config(torch, timer, out, kernel="triton-mla", prepare=mla, x=x, ref=ref,
                               config={**cfg, "ctas_per_sm": c}, label=f"mla Hq{hq} page{page}", nbytes=nb, flops=fl)
                if r and r["time_ns"]:
                    rows.append(r)
        if rows:
            top = min(rows, key=lambda r: r["time_ns"])
            best[f"mla-{hq}"] = top
            summary.append((f"mla {json.dumps(top['config'])}", f"Hq{hq}", top["time_ns"], top["gb_per_s"]))
        del x, k, v, ref
        if not args.dry:
            torch.cuda.empty_cache()

    # 3. the memory streams: read candidates, write and copy at the best read tiling; torch's own beside them
    read_stream, write_stream, copy_stream = (stream_kernel(w) for w in ("read", "write", "copy"))

    n = (1 << 30) if not args.dry else (1 << 16)  # bf16 elements: 2 GiB on the GPU
    src = torch.randn(n, device=device).to(torch.bfloat16)
    dst = torch.empty_like(src)
    stream_rows = []
    for block, unroll, warps in ((4096, 4, 8), (8192, 2, 8), (2048, 8, 4), (4096, 1, 4), (8192, 4, 8), (16384, 1, 8),
                                 (1024, 16, 4), (8192, 1, 8)) if not args.dry else ((1024, 2, 4),):
        if left() < 40:
            break
        grid = n // (block * unroll)
        part = torch.empty(grid, device=device, dtype=torch.float32)
        try:
            launch = lambda: read_stream[(grid,)](src, part, BLOCK=block, UNROLL=unroll, num_warps=warps)  # noqa
            t = timer(launch)
            te = timer.eager(launch)
        except Exception as exc:
            log(out, f"read {block}x{unroll} w{warps}: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        record(out, kernel="read_stream", config=[block, unroll, warps], time_ns=t, eager_ns=te, gb_per_s=2 * n / t)
        log(out, f"read stream {block}x{unroll} w{warps}: {2 * n / t:.0f} GB/s graph, {2 * n / te:.0f} eager")
        stream_rows.append(((block, unroll, warps), t))
    if stream_rows:
        (block, unroll, warps), t = min(stream_rows, key=lambda r: r[1])
        best["read"] = {"config": [block, unroll, warps], "gb_per_s": 2 * n / t}
        summary.append((f"read stream {block}x{unroll} w{warps}", "2 GiB", t, 2 * n / t))
        grid = n // (block * unroll)
        half = n // 2
        grid_c = half // (block * unroll)
        for name, launch, nb in (
            ("write_stream", lambda: write_stream[(grid,)](dst, 0.25, BLOCK=block, UNROLL=unroll, num_warps=warps),
             2 * n),
            ("copy_stream", lambda: copy_stream[(grid_c,)](src[:half], dst[:half], BLOCK=block, UNROLL=unroll,
                                                              num_warps=warps), 4 * half),
            ("torch.sum", lambda: torch.sum(src, dtype=torch.float32), 2 * n),
            ("copy_ (1 GiB)", lambda: dst[:half].copy_(src[:half]), 4 * half),
            ("torch.add(src, 0, out=dst) (1 GiB)", lambda: torch.add(src[:half], 0, out=dst[:half]), 4 * half),
        ):
            if left() < 25:
                break
            try:
                t, te = timer(launch), timer.eager(launch)
            except Exception as exc:
                log(out, f"{name}: {type(exc).__name__}: {str(exc)[:160]}")
                continue
            record(out, kernel=name, time_ns=t, eager_ns=te, gb_per_s=nb / t, eager_gb_per_s=nb / te)
            log(out, f"{name}: {nb / t:.0f} GB/s graph, {nb / te:.0f} GB/s eager")
            summary.append((name, "graph / eager", t, nb / t))
    (out / "best.json").write_text(json.dumps(best, indent=1))

    # 4. ncu on the best configurations (a process of its own; clocks as found)
    if not args.dry and not args.no_ncu and left() > 35 and "splitkv-dense" in best:
        cfg = json.dumps({k: best[k]["config"] for k in best if k.startswith(("splitkv", "mla"))})
        env = {**os.environ, "TUNE_BEST": cfg}
        metrics = ",".join(("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__cycles_elapsed.avg.per_second",
                            "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
                            "launch__occupancy_limit_registers", "launch__grid_size", "lts__t_sector_hit_rate.pct",
                            "smsp__inst_executed.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
                            "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
                            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"))
        cmd = ["ncu", "--clock-control", "none", "--metrics", metrics, "--csv", "-k",
               "regex:splitkv_partial|mla_partial|cudnn|flash|fmha|sm90", "--launch-skip", "0", "--launch-count", "8",
               sys.executable, __file__, "--out", str(out / "ncu-child"), "--ncu-child"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=max(20, left() - 10), env=env)
            (out / "ncu.csv").write_text(res.stdout)
            log(out, f"ncu rc {res.returncode}; {len(res.stdout.splitlines())} lines; stderr {res.stderr[-300:]}")
        except Exception as exc:
            log(out, f"ncu: {type(exc).__name__}: {exc}")

    log(out, "SUMMARY (graph replays, median per launch)")
    for name, shape, t, gbs in summary:
        log(out, f"  {name:70s} {shape:14s} {t / 1e3:10.1f} us {gbs:8.0f} GB/s")
    return 0


def candidates(torch, timer, out, args, left, summary) -> None:
    """triton-splitkv's setup candidates (CANDIDATES, CANDIDATES_PAGED) timed on the dense cache and on pages of 16
    laid out in three page orders, and which one its prepare() picks: does the paged rate follow the page order?"""
    from harness.inputs import paged_cache
    from kernels_under_test.decode import SPLITKV_CANDIDATES, SPLITKV_CANDIDATES_PAGED

    splitkv = kernel_factory("triton-splitkv")

    device = "cpu" if args.dry else "cuda"
    D = dict(batch=2, hq=8, hkv=2, d=64, s_kv=256) if args.dry else dict(batch=16, hq=32, hkv=8, d=128, s_kv=32768)
    dense, k, v = decode_inputs(torch, page=None, device=device, **D)
    nbytes = dense.shape.bytes_moved(item=2, out_item=2)
    layouts = [("dense", dense)]
    paged, _, _ = decode_inputs(torch, page=16 if not args.dry else 4, device=device, **D)
    for seed in (1, 2, 3):  # the same logical cache in three page orders
        extra = paged_cache(paged.shape, k, v, generator=torch.Generator().manual_seed(seed))
        layouts.append((f"page16 order {seed}", dataclasses.replace(paged, **extra)))
    for label, x in layouts:
        if left() < 15:
            break
        cands = SPLITKV_CANDIDATES_PAGED if x.shape.paged else SPLITKV_CANDIDATES
        times = []
        for cfg in cands:
            t = timer(splitkv(x, config=cfg))
            times.append(t)
            record(out, kernel="triton-splitkv", shape=label, config=cfg, time_ns=t, gb_per_s=nbytes / t)
            log(out, f"candidate {label} {cfg}: {t / 1e3:.1f} us {nbytes / t:.0f} GB/s")
        picked = splitkv(x) if not args.dry else None
        t = timer(picked) if picked is not None else min(times)
        log(out, f"prepare() on {label} picks {getattr(picked, 'config', None)}: {t / 1e3:.1f} us")
        summary.append(("splitkv picked", label, t, nbytes / t))


def extra_parts(torch, timer, out, args, left, summary, parts) -> None:
    """The copy stream's tilings, with and without evict-first loads (the copy at the read's tiling ran 3.88 TB/s
    against eager copy_'s 4.22), and more splits for MLA's TP slice (Hq 16)."""
    import triton
    import triton.language as tl

    from kernels_under_test.decode import MLA_CONFIG_NARROW

    mla = kernel_factory("triton-mla")

    @triton.jit
    def copy_plain(src_ptr, dst_ptr, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
        base = tl.program_id(0).to(tl.int64) * (BLOCK * UNROLL)
        offs = tl.arange(0, BLOCK)
        for u in tl.static_range(UNROLL):
            tl.store(dst_ptr + base + u * BLOCK + offs, tl.load(src_ptr + base + u * BLOCK + offs))

    device = "cpu" if args.dry else "cuda"
    if "copy" in parts:
        half = (1 << 29) if not args.dry else (1 << 15)  # 1 GiB of bf16
        src = torch.randn(half, device=device).to(torch.bfloat16)
        dst = torch.empty_like(src)
        t = timer(lambda: dst.copy_(src))
        te = timer.eager(lambda: dst.copy_(src))
        log(out, f"copy_ 1 GiB: {4 * half / t:.0f} GB/s graph (memcpy node), {4 * half / te:.0f} eager")
        record(out, kernel="copy_", time_ns=t, eager_ns=te)
        best = None
        for kern, evict in ((stream_kernel("copy"), True), (copy_plain, False)):
            for block, unroll, warps in ((4096, 1, 4), (16384, 1, 8), (8192, 1, 8), (2048, 1, 4), (1024, 4, 4),
                                         (2048, 2, 4), (4096, 2, 8), (8192, 2, 8)) if not args.dry else ((1024, 1, 4),):
                if left() < 30:
                    break
                grid = half // (block * unroll)
                launch = lambda: kern[(grid,)](src, dst, BLOCK=block, UNROLL=unroll, num_warps=warps)  # noqa
                try:
                    tg, tq = timer(launch), timer.eager(launch)
                except Exception as exc:
                    log(out, f"copy {block}x{unroll} w{warps} evict {evict}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                record(out, kernel="copy_stream", config=[block, unroll, warps, evict], time_ns=tg, eager_ns=tq)
                log(out, f"copy stream {block}x{unroll} w{warps} evict-first {evict}: {4 * half / tg:.0f} GB/s graph, "
                         f"{4 * half / tq:.0f} eager ({te / tg - 1:+.1%} vs eager copy_ as rate)")
                if best is None or tg < best[1]:
                    best = ((block, unroll, warps, evict), tg)
        if best:
            summary.append((f"copy stream {best[0]}", "1 GiB", best[1], 4 * half / best[1]))
            summary.append(("eager copy_", "1 GiB", te, 4 * half / te))
        del src, dst
    if "mla16" in parts:
        x, k, v = decode_inputs(torch, hq=16, page=64, device=device, mla=True,
                                **(dict(batch=2, hkv=1, d=576, s_kv=64) if args.dry else
                                   dict(batch=16, hkv=1, d=576, s_kv=16384)))
        ref = reference(torch, x, k, v)
        nb, fl = x.shape.bytes_moved(item=2, out_item=2), x.shape.flops
        rows = []
        for cfg in (dict(block_n=32, num_stages=2), dict(block_n=64, num_stages=2), dict(block_n=32, num_stages=3)):
            for c in (2, 3, 4, 6, 8):
                if left() < 20:
                    break
                r = try_config(torch, timer, out, kernel="triton-mla", prepare=mla, x=x, ref=ref,
                               config={**MLA_CONFIG_NARROW, **cfg, "ctas_per_sm": c, "max_splits": 128},
                               label="mla Hq16 page64", nbytes=nb, flops=fl)
                if r and r["time_ns"]:
                    rows.append(r)
        if rows:
            top = min(rows, key=lambda r: r["time_ns"])
            summary.append((f"mla {json.dumps(top['config'])}", "Hq16", top["time_ns"], top["gb_per_s"]))


def ncu_child() -> int:
    """Under ncu: one launch of each best configuration and of cuDNN SDPA (the ncu regex keeps only those)."""
    import torch

    best = json.loads(os.environ["TUNE_BEST"])
    splitkv, mla = kernel_factory("triton-splitkv"), kernel_factory("triton-mla")

    D = dict(batch=16, hq=32, hkv=8, d=128, s_kv=32768)
    dense, k, v = decode_inputs(torch, page=None, device="cuda", **D)
    cudnn_launch(torch, dense, k, v, "CUDNN_ATTENTION")()
    if "splitkv-dense" in best:
        splitkv(dense, config=best["splitkv-dense"])()
    if "splitkv-page16" in best:
        paged, _, _ = decode_inputs(torch, page=16, device="cuda", **D)
        splitkv(paged, config=best["splitkv-page16"])()
    if "mla-128" in best:
        x, _, _ = decode_inputs(torch, hq=128, page=64, device="cuda", mla=True, batch=16, hkv=1, d=576, s_kv=16384)
        mla(x, config=best["mla-128"])()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(ncu_child() if "--ncu-child" in sys.argv else main())
