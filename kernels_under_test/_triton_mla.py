"""The Triton MLA decode kernel behind `triton-mla` (see kernels_under_test/decode.py): DeepSeek-V2/V3 attention in
its absorbed form (`AttentionShape.latent_kv`, `--mla`).

Each token caches one latent vector of dqk = DV + DR dims (512 compressed KV + 64 RoPE key in DeepSeek); K is the
whole vector and V its first DV dims. So a program loads each latent tile ONCE, as two pieces of the same rows (the
DV latent dims and the DR RoPE dims), and uses it three times: scores = q_latent . c + q_rope . k_rope (both dots
in one pass, into one accumulator), then out += p . c with the very tile it scored. Reading V again (as a kernel
written for separate K and V would) doubles the bytes of a cache that is the whole cost of decode.

Grid (head blocks, B, splits): a program holds BLOCK_M rows = HB query heads x S_q queries (row r: head
hb * HB + r // S_q, query r % S_q) of one sequence and walks the keys of its split in blocks of BLOCK_N, through the
page table in a paged cache (token t of sequence b at page_table[b, t // P], offset t % P). The head blocks are the
fastest grid axis, so the blocks that read the same split of the same sequence run side by side and the second
finds the tile in L2: DRAM sees the latent cache once. Masks, the causal alignment to the end of the cache, the
window and the split merge are those of `_triton_decode` (whose merge kernel this module reuses).
This module imports triton at the top; kernels_under_test/decode.py imports it only in prepare().
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from harness.errors import UnsupportedInputError
from kernels_under_test._decode_configs import (
    MLA_CANDIDATES,
    MLA_CONFIG,
    MLA_CONFIG_NARROW,
    MLA_SPLIT_CHOICES,
    SPLITKV_MAX_QUERIES,
)
from kernels_under_test._triton_decode import LOG2E, _pow2, _softmax_step, _splitkv_merge, fastest
from kernels_under_test._triton_interpreter import fix_interpreter
from kernels_under_test.triton_bf16 import interpreting

__all__ = ["prepare", "CONFIG", "CONFIG_NARROW", "CANDIDATES", "mla_plan", "tma_fits", "block_rows"]

# The tuned configurations and split choices: _decode_configs (no triton there, so decode.py exports them).
CONFIG, CONFIG_NARROW, CANDIDATES, SPLIT_CHOICES = MLA_CONFIG, MLA_CONFIG_NARROW, MLA_CANDIDATES, MLA_SPLIT_CHOICES


@triton.jit
def _mla_tile(KV, KVD, KRD, PageTable, bb, kv_start, start, hi, stride_kb, stride_kt, stride_pt, offs_c, offs_r,
              BLOCK_N: tl.constexpr, DV: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr, TMA: tl.constexpr):
    """The latent tile of keys start.. start + BLOCK_N: (its DV latent dims, its DR RoPE dims)."""
    if TMA:
        # Bound only where every block is whole (`tma_fits`): each row is a token of the sequence, so no mask, and
        # a block lies in one page, so it is one box of the [rows, dqk] view of the cache. A descriptor load keeps
        # no per-element address or mask registers: the pointer path's (a 64-bit address per 16 bytes a thread
        # copies) are what pushed the 64-head tile into spills inside the loop.
        if PAGED:
            page = tl.load(PageTable + bb * stride_pt + start // PAGE)
            row = page * (stride_kb // stride_kt) + start % PAGE
        else:
            row = bb * (stride_kb // stride_kt) + kv_start + start
        row = row.to(tl.int32)
        c = KVD.load([row, 0])  # the latent tile: loaded once
        kr = KRD.load([row, DV])
    else:
        t = start + tl.arange(0, BLOCK_N)
        t_ok = t < hi
        if PAGED:
            page = tl.load(PageTable + bb * stride_pt + t // PAGE, mask=t_ok, other=0).to(tl.int64)
            kv_off = page * stride_kb + (t % PAGE) * stride_kt
        else:
            kv_off = bb * stride_kb + (kv_start + t).to(tl.int64) * stride_kt
        rows = KV + kv_off[:, None]
        c = tl.load(rows + offs_c[None, :], mask=t_ok[:, None], other=0.0)  # the latent tile: loaded once
        kr = tl.load(rows + offs_r[None, :], mask=t_ok[:, None], other=0.0)
    return c, kr


@triton.jit
def _mla_block(q_lat, q_rope, c, kr, start, hi, pos, row_ok, m_i, l_i, acc, qk_scale,
               BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """One block of keys into the running softmax (m_i, l_i) and output acc."""
    t = start + tl.arange(0, BLOCK_N)
    t_ok = t < hi
    s = tl.dot(q_rope, tl.trans(kr), acc=tl.dot(q_lat, tl.trans(c)))
    s = s * qk_scale
    p, alpha, m_new, l_i = _softmax_step(s, t, t_ok, row_ok, pos, m_i, l_i, CAUSAL, WINDOW)
    acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)  # V is the latent tile scored above
    return m_new, l_i, acc


@triton.jit
def _mla_partial(
    Q, KV, KVD, KRD, PageTable, KvLens, CuQ, CuKv, Acc, Mx, Ls,
    qk_scale, split_len, HQ,
    stride_qb, stride_qh, stride_qm, stride_kb, stride_kt, stride_pt,
    HB: tl.constexpr, SQ: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DV: tl.constexpr,
    DR: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr, PACKED: tl.constexpr, CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr, TMA: tl.constexpr,
):
    hblk = tl.program_id(0)
    b = tl.program_id(1)
    split = tl.program_id(2)
    ns = tl.num_programs(2)
    kv_len = tl.load(KvLens + b)
    if PACKED:
        q_start = tl.load(CuQ + b)
        q_len = tl.load(CuQ + b + 1) - q_start
        row0 = q_start
    else:
        q_start = 0
        q_len = SQ
        row0 = b * SQ
    if PACKED and not PAGED:
        kv_start = tl.load(CuKv + b)
    else:
        kv_start = 0
    r = tl.arange(0, BLOCK_M)
    g = r // SQ
    i = r % SQ
    h = hblk * HB + g
    row_ok = (g < HB) & (h < HQ) & (i < q_len)
    pos = kv_len - q_len + i
    offs_c = tl.arange(0, DV)  # the latent dims: K's first DV and all of V
    offs_r = DV + tl.arange(0, DR)  # the RoPE dims: K only
    bb = b.to(tl.int64)
    q_rows = Q + bb * stride_qb + h[:, None] * stride_qh + (q_start + i)[:, None] * stride_qm
    q_lat = tl.load(q_rows + offs_c[None, :], mask=row_ok[:, None], other=0.0)
    q_rope = tl.load(q_rows + offs_r[None, :], mask=row_ok[:, None], other=0.0)
    lo = split * split_len
    hi = tl.minimum(kv_len, lo + split_len)
    if WINDOW > 0:
        first = tl.maximum(kv_len - q_len - WINDOW + 1, 0)
        lo = tl.maximum(lo, (first // BLOCK_N) * BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        c, kr = _mla_tile(KV, KVD, KRD, PageTable, bb, kv_start, start, hi, stride_kb, stride_kt, stride_pt, offs_c,
                          offs_r, BLOCK_N, DV, PAGE, PAGED, TMA)
        m_i, l_i, acc = _mla_block(q_lat, q_rope, c, kr, start, hi, pos, row_ok, m_i, l_i, acc, qk_scale, BLOCK_N,
                                   CAUSAL, WINDOW)
    out_rows = row0 + i
    stat = (out_rows * HQ + h) * ns + split
    tl.store(Mx + stat, m_i, mask=row_ok)
    tl.store(Ls + stat, l_i, mask=row_ok)
    tl.store(Acc + stat[:, None] * DV + offs_c[None, :], acc, mask=row_ok[:, None])


def mla_plan(max_len: int, programs: int, *, sm_count: int, ctas_per_sm: int, block_n: int,
             max_splits: int) -> tuple[int, int]:
    """(splits, keys per split): splits enough that (head blocks x B x splits) programs fill `ctas_per_sm`
    programs on every SM (no more than the blocks of the longest sequence or `max_splits`), rounded down so the
    last wave is not a sliver; each split a whole number of blocks.

    >>> mla_plan(16384, 32, sm_count=132, ctas_per_sm=1, block_n=32, max_splits=64)
    (4, 4096)
    >>> mla_plan(40, 64, sm_count=132, ctas_per_sm=1, block_n=16, max_splits=64)
    (2, 32)
    """
    blocks = -(-max_len // block_n)
    want = max(1, min(sm_count * ctas_per_sm // programs, blocks, max_splits))
    split_len = -(-blocks // want) * block_n
    return -(-max_len // split_len), split_len


def block_rows(block_h: int, seq_len: int, heads_q: int) -> tuple[int, int]:
    """(query heads per program, BLOCK_M: its rows, heads x queries, a power of two >= 16 for tl.dot)."""
    hb = max(1, min(block_h // seq_len, heads_q))
    return hb, max(16, triton.next_power_of_2(hb * seq_len))


def tma_fits(inputs, *, block_n: int) -> bool:
    """Whether the latent blocks can come through TMA descriptors: sm_90+, a contiguous cache with 16-byte aligned
    rows (a capture loaded on the CPU may be a view at any offset), and every block whole: each sequence a whole
    number of blocks, each block inside one page. A descriptor has no mask: a block cut by the sequence's end
    would bring the rows past it (a page's unused slots hold anything, NaN included, and p = 0 times NaN is NaN),
    so a cache with a partial block keeps the masked pointer loads."""
    import torch

    k, s = inputs.k, inputs.shape
    if not k.is_contiguous() or k.data_ptr() % 16 or (k.shape[-1] * k.element_size()) % 16:
        return False
    if (s.page_size and s.page_size % block_n) or any(n % block_n for n in s.kv_lengths()):
        return False
    return not k.is_cuda or (not getattr(torch.version, "hip", None)
                             and torch.cuda.get_device_capability(k.device) >= (9, 0))


def prepare(inputs, *, config: dict | None = None):
    """Bind the inputs, the split scratch buffers and the output; one partial and one merge launch. With no `config`,
    on a GPU, the fastest of CANDIDATES at each split count of SPLIT_CHOICES on these inputs."""
    s = inputs.shape
    width = "wide" if s.heads_q * s.seq_len >= 64 else "narrow"
    if config is None and not interpreting() and inputs.q.is_cuda:
        return fastest([_bind(inputs, dict(base, ctas_per_sm=c)) for base in CANDIDATES[width]
                        for c in SPLIT_CHOICES[width]])
    return _bind(inputs, {**(CONFIG if width == "wide" else CONFIG_NARROW), **(config or {})})


def _bind(inputs, cfg: dict):
    import torch

    if interpreting():
        fix_interpreter()
    s = inputs.shape
    q, k, v = inputs.q, inputs.k, inputs.v
    if not s.latent_kv:
        raise UnsupportedInputError("triton-mla computes MLA's absorbed form only (--mla: one latent KV head whose "
                                    "first dv dims are V); this input has separate K and V. Use triton-splitkv.")
    dr = s.head_dim_qk - s.head_dim_v
    if s.heads_kv != 1 or not (_pow2(s.head_dim_v) and _pow2(dr)):
        raise UnsupportedInputError(f"triton-mla needs one latent KV head and power-of-two latent and RoPE dims >= 16 "
                                    f"(Hkv={s.heads_kv}, dv={s.head_dim_v}, dqk - dv={dr}).")
    if s.seq_len > SPLITKV_MAX_QUERIES:
        raise UnsupportedInputError(f"triton-mla is a decode kernel: at most {SPLITKV_MAX_QUERIES} queries per "
                                    f"sequence (S_q = {s.seq_len}); give --seq-len-q {SPLITKV_MAX_QUERIES} or fewer.")
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.data_ptr() != k.data_ptr() or v.stride() != k.stride():
        raise UnsupportedInputError("triton-mla reads V from the latent cache: v must be the first dv dims of k "
                                    "(a view), both contiguous in the last dim.")
    dev = q.device
    sq = s.seq_len
    hb, block_m = block_rows(cfg["block_h"], sq, s.heads_q)
    hblocks = -(-s.heads_q // hb)
    sm = torch.cuda.get_device_properties(dev).multi_processor_count if q.is_cuda else 4
    ns, split_len = mla_plan(max(s.kv_lengths()), hblocks * s.batch, sm_count=sm, ctas_per_sm=cfg["ctas_per_sm"],
                             block_n=cfg["block_n"], max_splits=cfg["max_splits"])
    rows = s.q_shape()[2] if s.packed else s.batch * sq
    ints = dict(dtype=torch.int32, device=dev)
    kv_lens = inputs.kv_lens if inputs.kv_lens is not None else torch.full((s.batch,), s.seq_len_kv, **ints)
    none = torch.zeros(1, **ints)
    page_table = inputs.page_table if s.paged else none
    cu_q = inputs.cu_seqlens_q if s.packed else none
    cu_kv = inputs.cu_seqlens_kv if s.packed else none
    acc = torch.empty((rows, s.heads_q, ns, s.head_dim_v), dtype=torch.float32, device=dev)
    mx = torch.empty((rows, s.heads_q, ns), dtype=torch.float32, device=dev)
    ls = torch.empty_like(mx)
    out = torch.empty(s.out_shape(), dtype=q.dtype, device=dev)
    if s.paged:  # [pages, P, 1, dqk]: (page, token in page)
        ks = (k.stride(0), k.stride(1))
    else:  # [B, 1, S, dqk] or packed [1, 1, T, dqk]: (batch, token)
        ks = (0 if s.packed else k.stride(0), k.stride(2))
    qs = (0 if s.packed else q.stride(0), q.stride(1), q.stride(2))
    partial = _mla_partial[(hblocks, s.batch, ns)]
    merge = _splitkv_merge[(rows, s.heads_q)]
    tma = cfg.get("tma", False) and tma_fits(inputs, block_n=cfg["block_n"])
    kvd = krd = k  # unused without TMA
    if tma:
        k2d = k.reshape(-1, k.shape[-1])  # [tokens (pages x P in a pool), dqk]: a block is one box of rows
        kvd = TensorDescriptor.from_tensor(k2d, [cfg["block_n"], s.head_dim_v])
        krd = TensorDescriptor.from_tensor(k2d, [cfg["block_n"], dr])
    args = (q, k, kvd, krd, page_table, kv_lens, cu_q, cu_kv, acc, mx, ls, float(inputs.scale * LOG2E), split_len,
            s.heads_q, *qs, *ks, page_table.stride(0) if s.paged else 0)
    consts = dict(HB=hb, SQ=sq, BLOCK_M=block_m, BLOCK_N=cfg["block_n"], DV=s.head_dim_v, DR=dr,
                  PAGE=s.page_size or 1, PAGED=s.paged, PACKED=s.packed, CAUSAL=s.causal, WINDOW=s.window or 0,
                  TMA=tma)
    merge_args = (acc, mx, ls, out, s.heads_q, ns, 0 if s.packed else out.stride(0), out.stride(1), out.stride(2))
    merge_consts = dict(SQ=sq, NS_P2=max(2, triton.next_power_of_2(ns)), DV=s.head_dim_v, PACKED=s.packed)
    warps, stages = cfg["num_warps"], cfg["num_stages"]

    def launch():
        partial(*args, **consts, num_warps=warps, num_stages=stages)
        merge(*merge_args, **merge_consts, num_warps=4)
        return out

    launch.config = dict(cfg, tma=tma)  # what ran: TMA asked for may not fit this cache
    if not interpreting():  # compile here, so no timed launch compiles
        launch()
    return launch
