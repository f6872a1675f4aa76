"""Triton loops for the FMA and MUFU (exp2) peaks, and the streams of the memory peaks (read, write, copy).
Imports triton at the top, so `_peaks` imports it lazily.

Both loops keep their values moving (a chaotic map), because a value that settles to a fixed point
toggles no bits and would show a clock a real kernel never sees (the GEMM peaks move 16 % with their
operands on the H200). Each thread runs CHAINS independent chains over its elements, so latency hides.

- FMA: x <- x * x + c with c = -1.9 (the quadratic map, bounded in [-2, 2] and chaotic there): one FFMA.
- exp2: x <- |2 * 2^x - 3| on [0, 1] (a tent-like map, slope up to 2.8): one MUFU.EX2 per step plus one
  FFMA and a free |.|; the FMA pipe has 8x MUFU's rate, so the MUFU stays the bound.

The memory streams are SM kernels, never `copy_`: a device-to-device `copy_` captured in a CUDA graph becomes a
memcpy node served by a copy engine (2.7 TB/s on the H200 against 4.2 for the same copy eager), so a graph-timed
`copy_` measures the copy engine, not what a kernel can stream. Each program moves UNROLL tiles of BLOCK elements
with every load issued before the first use (16-byte vectors: BLOCK / (32 x warps) >= 8 bf16 per thread), one tile
after another along the buffer (the tilings: `_peaks._STREAMS`), and enough programs (tens of thousands) that every
SM holds several at once:
- read: sums its tiles in fp32 and stores one float per program (so nothing is dead code), loads marked
  evict-first (streamed, not kept in L2);
- write: stores a pattern that varies with the address (i & 1023), never a constant a memory system might
  compress;
- copy: loads its tiles (plain loads: evict-first ones cost a copy 2-9 % on the H200) and stores them elsewhere.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["BLOCK", "CHAINS", "NUM_WARPS", "copy_stream", "exp2_loop", "fma_loop", "read_stream",
           "write_stream"]

BLOCK = 1024
CHAINS = 4
NUM_WARPS = 4


@triton.jit
def _ex2(x):
    # ex2.approx.ftz is one MUFU.EX2; tl.math.exp2 without ftz adds denormal fix-ups around it.
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def fma_loop(out_ptr, c, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = (offs % 997).to(tl.float32) * 0.001
    x1 = x0 + 0.25
    x2 = x0 - 0.5
    x3 = x0 + 0.75
    for _ in range(ITERS):
        x0 = tl.fma(x0, x0, c)
        x1 = tl.fma(x1, x1, c)
        x2 = tl.fma(x2, x2, c)
        x3 = tl.fma(x3, x3, c)
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


@triton.jit
def exp2_loop(out_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = (offs % 991).to(tl.float32) * 0.001
    x1 = 1.0 - x0
    x2 = x0 * 0.5
    x3 = 0.5 + x0 * 0.5
    for _ in range(ITERS):
        x0 = tl.abs(tl.fma(_ex2(x0), 2.0, -3.0))
        x1 = tl.abs(tl.fma(_ex2(x1), 2.0, -3.0))
        x2 = tl.abs(tl.fma(_ex2(x2), 2.0, -3.0))
        x3 = tl.abs(tl.fma(_ex2(x3), 2.0, -3.0))
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


@triton.jit
def read_stream(src_ptr, out_ptr, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * UNROLL)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for u in tl.static_range(UNROLL):
        acc += tl.load(src_ptr + base + u * BLOCK + offs, eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, 0))


@triton.jit
def write_stream(dst_ptr, value, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * UNROLL)
    offs = tl.arange(0, BLOCK)
    pattern = ((offs & 1023).to(tl.float32) * value).to(dst_ptr.dtype.element_ty)
    for u in tl.static_range(UNROLL):
        tl.store(dst_ptr + base + u * BLOCK + offs, pattern)


@triton.jit
def copy_stream(src_ptr, dst_ptr, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * UNROLL)
    offs = tl.arange(0, BLOCK)
    for u in tl.static_range(UNROLL):
        x = tl.load(src_ptr + base + u * BLOCK + offs)  # not evict-first: that cost the copy 2-9 % (H200)
        tl.store(dst_ptr + base + u * BLOCK + offs, x)
