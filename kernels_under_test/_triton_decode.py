"""The Triton split-KV (flash-decoding) kernel behind `triton-splitkv` (see kernels_under_test/decode.py).

Grid (B, Hkv, splits) for the partial pass: a program holds the GQA group of one KV head, all the group's
query heads times the sequence's queries in one tile of rows (row r: head g = r // S_q of the group, query
i = r % S_q), so each key is loaded once for the group. It walks the keys of its split in blocks of BLOCK_N;
in a paged cache each key's page comes from the page table (token t of sequence b at page_table[b, t // P],
offset t % P), so any page size works and the pages may lie anywhere. Scores are base 2 (softmax scale x
log2(e) folded into one multiply); masked keys (past the sequence, after the query's position, outside the
window) are -inf before the running max. Each split leaves its running max, row sum and unnormalised output;
the merge pass (grid total queries x Hq) rescales them to the common max and divides once.

Query i of a sequence with lq queries and L keys sits at position L - lq + i (the causal mask aligned to the
end of the cache). Offsets into K and V are int64: a large decode batch's cache is more than 2^31 elements.
This module imports triton at the top; kernels_under_test/decode.py imports it only in prepare().
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from harness.errors import UnsupportedInputError
from kernels_under_test._decode_configs import (
    SPLITKV_CANDIDATES,
    SPLITKV_CANDIDATES_PAGED,
    SPLITKV_CONFIG,
    SPLITKV_CONFIG_PAGED,
    SPLITKV_MAX_QUERIES,
)
from kernels_under_test._triton_interpreter import fix_interpreter
from kernels_under_test.triton_bf16 import interpreting

__all__ = ["prepare", "CANDIDATES", "CANDIDATES_PAGED", "CONFIG", "CONFIG_PAGED", "fastest", "split_plan"]

LOG2E = math.log2(math.e)
# The tuned configurations and the setup candidates: _decode_configs (no triton there, so decode.py exports them).
CONFIG, CONFIG_PAGED = SPLITKV_CONFIG, SPLITKV_CONFIG_PAGED
CANDIDATES, CANDIDATES_PAGED = SPLITKV_CANDIDATES, SPLITKV_CANDIDATES_PAGED


@triton.jit
def _softmax_step(s, t, t_ok, row_ok, pos, m_i, l_i, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """One block of scores `s` (log2 units) of keys `t` into the running softmax: the keys each query row may see
    (inside the split, causal to its position `pos`, within the window) kept, the rest -inf; returns (p, the
    rescale of what the rows held, the new row max, the new row sum). triton-splitkv's and triton-mla's."""
    ok = t_ok[None, :] & row_ok[:, None]
    if CAUSAL:
        ok = ok & (t[None, :] <= pos[:, None])
    if WINDOW > 0:
        ok = ok & (t[None, :] > pos[:, None] - WINDOW)
        if not CAUSAL:
            ok = ok & (t[None, :] < pos[:, None] + WINDOW)
    s = tl.where(ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def _splitkv_partial(
    Q, K, V, PageTable, KvLens, CuQ, CuKv, Acc, Mx, Ls,
    qk_scale, split_len, HQ,
    stride_qb, stride_qh, stride_qm, stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_pt,
    GROUP: tl.constexpr, SQ: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
    DV: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr, PACKED: tl.constexpr, CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr, HEADS_FIRST: tl.constexpr,
):
    if HEADS_FIRST:  # grid (Hkv, B, splits): the KV heads of one split side by side (one page row's 2 KB together)
        hkv = tl.program_id(0)
        b = tl.program_id(1)
    else:  # grid (B, Hkv, splits)
        b = tl.program_id(0)
        hkv = tl.program_id(1)
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
    row_ok = (g < GROUP) & (i < q_len)
    h = hkv * GROUP + g
    pos = kv_len - q_len + i
    offs_d = tl.arange(0, D)
    offs_v = tl.arange(0, DV)
    bb = b.to(tl.int64)
    q_ptrs = Q + bb * stride_qb + h[:, None] * stride_qh + (q_start + i)[:, None] * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    lo = split * split_len
    hi = tl.minimum(kv_len, lo + split_len)
    if WINDOW > 0:  # no query of the sequence sees a key before its first query's window
        first = tl.maximum(kv_len - q_len - WINDOW + 1, 0)
        lo = tl.maximum(lo, (first // BLOCK_N) * BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        t = start + tl.arange(0, BLOCK_N)
        t_ok = t < hi
        if PAGED:
            page = tl.load(PageTable + bb * stride_pt + t // PAGE, mask=t_ok, other=0).to(tl.int64)
            k_off = page * stride_kb + (t % PAGE) * stride_kt
            v_off = page * stride_vb + (t % PAGE) * stride_vt
        else:
            tt = (kv_start + t).to(tl.int64)
            k_off = bb * stride_kb + tt * stride_kt
            v_off = bb * stride_vb + tt * stride_vt
        k = tl.load(K + k_off[:, None] + hkv * stride_kh + offs_d[None, :], mask=t_ok[:, None], other=0.0)
        v = tl.load(V + v_off[:, None] + hkv * stride_vh + offs_v[None, :], mask=t_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        p, alpha, m_i, l_i = _softmax_step(s, t, t_ok, row_ok, pos, m_i, l_i, CAUSAL, WINDOW)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    rows = row0 + i
    stat = (rows * HQ + h) * ns + split
    tl.store(Mx + stat, m_i, mask=row_ok)
    tl.store(Ls + stat, l_i, mask=row_ok)
    tl.store(Acc + stat[:, None] * DV + offs_v[None, :], acc, mask=row_ok[:, None])


@triton.jit
def _splitkv_merge(
    Acc, Mx, Ls, Out, HQ, NS, stride_ob, stride_oh, stride_om,
    SQ: tl.constexpr, NS_P2: tl.constexpr, DV: tl.constexpr, PACKED: tl.constexpr,
):
    row = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.arange(0, NS_P2)
    ok = sp < NS
    stat = (row * HQ + h) * NS + sp
    m = tl.load(Mx + stat, mask=ok, other=float("-inf"))
    l = tl.load(Ls + stat, mask=ok, other=0.0)
    m_max = tl.max(m, 0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp2(m - m_max))
    offs_v = tl.arange(0, DV)
    acc = tl.load(Acc + stat[:, None] * DV + offs_v[None, :], mask=ok[:, None], other=0.0)
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    if PACKED:
        o_ptrs = Out + h * stride_oh + row * stride_om + offs_v
    else:
        o_ptrs = Out + (row // SQ) * stride_ob + h * stride_oh + (row % SQ) * stride_om + offs_v
    tl.store(o_ptrs, out.to(Out.dtype.element_ty))


def split_plan(max_len: int, programs: int, *, sm_count: int, block_n: int, max_splits: int,
               ctas_per_sm: int = 2) -> tuple[int, int]:
    """(splits, keys per split): enough splits that (B x Hkv x splits) programs fill the SMs `ctas_per_sm` times
    over, no more than the blocks of the longest sequence (or `max_splits`); each split a whole number of blocks.

    >>> split_plan(32768, 8, sm_count=132, block_n=64, max_splits=64)
    (32, 1024)
    >>> split_plan(100, 1024, sm_count=132, block_n=64, max_splits=64)
    (1, 128)
    """
    blocks = -(-max_len // block_n)
    want = max(1, min(-(-ctas_per_sm * sm_count // programs), blocks, max_splits))
    split_len = -(-blocks // want) * block_n
    return -(-max_len // split_len), split_len


def _pow2(n: int) -> bool:
    return n >= 16 and n & (n - 1) == 0


def fastest(launches, *, warm: int = 3, timed: int = 10):
    """The launch of `launches` (zero-argument closures computing the same output) that runs fastest on the GPU,
    each timed with CUDA events over `timed` launches after `warm`: setup, never part of a timed window."""
    import torch

    best = None
    for launch in launches:
        for _ in range(warm):
            launch()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(timed):
            launch()
        end.record()
        end.synchronize()
        if best is None or start.elapsed_time(end) < best[0]:
            best = (start.elapsed_time(end), launch)
    return best[1]


def prepare(inputs, *, config: dict | None = None):
    """Bind the inputs, the scratch buffers of the splits and the output; one partial and one merge launch. With no
    `config`, on a GPU, the fastest of CANDIDATES (CANDIDATES_PAGED) on these inputs (module docstring, CONFIG)."""
    s = inputs.shape
    if config is None and not interpreting() and inputs.q.is_cuda:
        launches = [_bind(inputs, c) for c in (CANDIDATES_PAGED if s.paged else CANDIDATES)]
        return fastest(launches)
    return _bind(inputs, {**(CONFIG_PAGED if s.paged else CONFIG), **(config or {})})


def _bind(inputs, cfg: dict):
    import torch

    if interpreting():
        fix_interpreter()
    s = inputs.shape
    cfg = {**CONFIG, **cfg}
    q, k, v = inputs.q, inputs.k, inputs.v
    if s.seq_len > SPLITKV_MAX_QUERIES:
        raise UnsupportedInputError(f"triton-splitkv is a decode kernel: at most {SPLITKV_MAX_QUERIES} queries per "
                                    f"sequence (S_q = {s.seq_len}); give --seq-len-q {SPLITKV_MAX_QUERIES} or fewer.")
    if not (_pow2(s.head_dim_qk) and _pow2(s.head_dim_v)):
        raise UnsupportedInputError(f"triton-splitkv needs power-of-two head dims >= 16 (dqk={s.head_dim_qk}, "
                                    f"dv={s.head_dim_v}).")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise UnsupportedInputError(f"triton-splitkv needs {name} contiguous in its last dim")
    dev = q.device
    group, sq = s.heads_q // s.heads_kv, s.seq_len
    block_m = max(16, triton.next_power_of_2(group * sq))
    sm = torch.cuda.get_device_properties(dev).multi_processor_count if q.is_cuda else 4
    ns, split_len = split_plan(max(s.kv_lengths()), s.batch * s.heads_kv, sm_count=sm, block_n=cfg["block_n"],
                               max_splits=cfg["max_splits"], ctas_per_sm=cfg["ctas_per_sm"])
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
    if s.paged:  # [pages, P, Hkv, d]: (page, token in page, head)
        ks, vs = (k.stride(0), k.stride(1), k.stride(2)), (v.stride(0), v.stride(1), v.stride(2))
    else:  # [B, Hkv, S, d] or packed [1, Hkv, T, d]: (batch, token, head)
        ks = (0 if s.packed else k.stride(0), k.stride(2), k.stride(1))
        vs = (0 if s.packed else v.stride(0), v.stride(2), v.stride(1))
    qs = (0 if s.packed else q.stride(0), q.stride(1), q.stride(2))
    heads_first = bool(cfg["heads_first"])
    partial = _splitkv_partial[(s.heads_kv, s.batch, ns) if heads_first else (s.batch, s.heads_kv, ns)]
    merge = _splitkv_merge[(rows, s.heads_q)]
    args = (q, k, v, page_table, kv_lens, cu_q, cu_kv, acc, mx, ls, float(inputs.scale * LOG2E), split_len, s.heads_q,
            *qs, *ks, *vs, page_table.stride(0) if s.paged else 0)
    consts = dict(GROUP=group, SQ=sq, BLOCK_M=block_m, BLOCK_N=cfg["block_n"], D=s.head_dim_qk, DV=s.head_dim_v,
                  PAGE=s.page_size or 1, PAGED=s.paged, PACKED=s.packed, CAUSAL=s.causal, WINDOW=s.window or 0,
                  HEADS_FIRST=heads_first)
    merge_args = (acc, mx, ls, out, s.heads_q, ns, 0 if s.packed else out.stride(0), out.stride(1), out.stride(2))
    merge_consts = dict(SQ=sq, NS_P2=max(2, triton.next_power_of_2(ns)), DV=s.head_dim_v, PACKED=s.packed)
    warps, stages = cfg["num_warps"], cfg["num_stages"]

    def launch():
        partial(*args, **consts, num_warps=warps, num_stages=stages)
        merge(*merge_args, **merge_consts, num_warps=1)
        return out

    launch.config = cfg  # what ran: the tuning script and tests read it
    if not interpreting():  # compile here, so no timed launch compiles
        launch()
    return launch
