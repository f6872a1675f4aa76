"""The Gluon (Triton's tile-level dialect) FP8 attention forward behind `gluon-fp8-lean`, sm_90 only.

Imports triton's Gluon at the top, so `gluon_fp8` imports this module only inside `prepare()`.

Why Gluon: triton 3.6's Hopper code waits for every wgmma right after issuing it (the `tl.dot` of
`_triton_common` and `_triton_fp8_pipe`), so inside a warpgroup the tensor cores idle while softmax
forms P. Here the schedule is written out: `warpgroup_mma(..., is_async=True)` issues a product and
`warpgroup_mma_wait(n)` waits until at most n are in flight, so the loop (FlashAttention-3's
intra-warpgroup pipelining) runs, for key block j,

    issue QK(j) ; rescale acc ; issue PV(j-1) (P(j-1) from registers, acc as its C operand)
    wait for QK(j) only ; softmax(j) -> P(j)  (PV(j-1) still in flight) ; wait for PV(j-1)
    refill the ring slot of block j-1 by TMA

K and V^T tiles come through a ring of NUM_STAGES shared-memory slots filled by TMA, each slot with
one mbarrier for K and one for V (QK waits for K only).

SUM_MMA (`gluon-fp8-lean-summma`): the row sum of the rounded P is a third wgmma, P (the same registers
as PV's A operand) times an [8, 64] shared tile of e4m3 ones, into a FRESH [BLOCK_M, 8] fp32 accumulator
each block (use_acc=False); after the wait one FFMA a row, l = l g + block sum, keeps l in acc's units, so
the descale cancels at the end. It replaces the per-score shift and add of the row sum (sm_90 SASS, triton
3.6, d=128 causal: 424 instructions an unmasked trip against 497; FADD 124 against 232 in the whole kernel).
Why not the running sum as the wgmma's C operand (the first version): an FP8 wgmma adds its products to C
in about 13 fraction bits aligned to the largest term (C included) and truncates, so once l is ~2^13 times
one P code (8192 near-uniform keys) every new code is cut to nothing: at S=16384 causal, gaussian:0.1 the
long rows' l came out up to ~45 % low, SNR 17.8 dB (docs/experiments/summma-row-sum.md).

FRESH_PV (`gluon-fp8-lean-summma-fresh`): the PV product the same way, into a zeroed [BLOCK_M, DV] accumulator
each block, then acc = acc g + block in one FFMA (the multiply by g it replaces). The running acc as PV's C
operand swamps too on real activations: their values keep one sign per channel over many keys (SmolLM2
layer 0: |mean(v)| / rms(v) up to 0.98), so acc grows like n, not like sqrt(n) as on Gaussian inputs. On the
H200 that kernel missed its declared numerics by 3.77 x (SNR 29.9 dB) on SmolLM2 layer 0 at S=8192; a CPU
emulation of the truncation reproduced it (3.85 x, 29.8 dB) and, per block, 0.25 x and 49.5 dB
(docs/experiments/pv-accumulator-swamping.md). The cost is a second live [BLOCK_M, DV] fp32 tile while PV(j-1)
is in flight: ahead-of-time for sm_90 (triton 3.9) 148 against 125 registers at d=64, 218 against 162 at d=128,
no spills. SageAttention2 answers the same FP22-accumulator limit with a two-level accumulation.

What the SASS shows (triton 3.6, ptxas 12.8): the order is in the PTX (wait_group 1 after the two
issues, wait_group 0 after softmax), but ptxas schedules the PV wait (WARPGROUP.DEPBAR.LE gsb0, 0x0)
right after the row max, and most of softmax (the FMA, the 2^23 add, the clamp, the row sum) after it,
so within a warpgroup PV(j-1) overlaps the row max only; QK(j) does overlap the acc rescale and the P
layout conversion. The TMA refills also bring BAR.SYNCs into the loop (Gluon's membar pass).
Measured on the H200 (burst, S=16384 H=32 d=128 causal, gaussian:0.1, docs/experiments/fp8-kernel-tuning.md): 64 rows
of 4 warps, 3 stages 3.523 ms against triton-fp8-lean-accmma 3.469 ms; 128 rows of 8 warps 4.752 ms (164
registers: one CTA an SM).

P is lean P exactly as `_triton_fp8_pipe._fp8_p` (MODE 2) forms it: same FMA, same 2^23 rounding, same
O_CAP, same row sum of the rounded codes; acc is kept in units of the pending block's descale as in
`stage_acc_in_mma`, so PV accumulates inside the wgmma. The causal diagonal blocks (and the last
partial block of a non-causal row) are the same loop body with the mask compiled in (MASKED).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

__all__ = ["O_CAP", "attn_fwd"]

# triton 3.6 (the H200's) names the TMA load async_copy_global_to_shared; 3.9 renamed it async_load
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

MAGIC = gl.constexpr(8388608.0)  # 2^23: adding it leaves round-to-nearest(y) in the low mantissa bits
O_CAP = gl.constexpr(24.0)  # as _triton_fp8_pipe.O_CAP: acc carries 2^(o + sigma) of the pending block


@gluon.jit
def _pow2_int(e):
    # 2^e for an integer-valued fp32 tensor e in [-126, 127], exactly.
    return ((e.to(gl.int32) + 127) << 23).to(gl.float32, bitcast=True)


@gluon.jit
def _lean_p(qk, m_i, qk_scale, TAU: gl.constexpr, SIGMA: gl.constexpr, BETA: gl.constexpr):
    # (e4m3 P, row sum of the rounded P, descale 2^-(o + sigma), alpha, new row reference): the
    # arithmetic of _triton_fp8_pipe._fp8_p, MODE 2 (see triton_fp8.py for the derivation).
    m_blk = gl.max(qk, 1) * qk_scale
    up = m_blk > m_i + TAU
    m_new = gl.where(up, gl.maximum(m_i, m_blk), m_i)
    alpha = gl.exp2(m_i - m_new)
    o = gl.minimum(gl.maximum(gl.floor(m_new - m_blk), 0.0), O_CAP)
    c0 = 8.0 * (SIGMA + 7.0 + o - m_new) - BETA
    z = gl.maximum(gl.fma(qk, qk_scale * 8.0, gl.expand_dims(c0, 1)) + MAGIC, MAGIC)
    bits = z.to(gl.int32, bitcast=True)
    p8 = bits.to(gl.int8).to(gl.float8e4nv, bitcast=True)
    # e4m3 bits moved up by 20 are the e4m3 value times 2^-120 as an fp32 (0x4B000000 leaves the register)
    row_sum = gl.sum((bits << 20).to(gl.float32, bitcast=True), 1) * _pow2_int(120.0 - SIGMA - o)
    return p8, row_sum, _pow2_int(-SIGMA - o), alpha, m_new


@gluon.jit
def _mask(qk, start_n, offs_m, S, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    offs_n = start_n + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_layout))
    valid = gl.expand_dims(offs_n, 0) < S
    if CAUSAL:
        valid = valid & (gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0))
    return gl.where(valid, qk, float("-inf"))


@gluon.jit
def _load_block(k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, j, n_blocks, k_row0, v_row0,
                BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    # TMA of key block j into ring slot j % NUM_STAGES (skipped past the last block).
    s = j % NUM_STAGES
    pred = j < n_blocks
    mbarrier.expect(k_bar.index(s), k_desc.block_type.nbytes, pred=pred)
    _tma_load(k_desc, [k_row0 + j * BLOCK_N, 0], k_bar.index(s), k_smem.index(s), pred=pred)
    mbarrier.expect(v_bar.index(s), v_desc.block_type.nbytes, pred=pred)
    _tma_load(v_desc, [v_row0, j * BLOCK_N], v_bar.index(s), v_smem.index(s), pred=pred)


@gluon.jit
def _blocks(lo, hi, acc, l_i, m_i, p8, d, g, q_smem, k_desc, v_desc, k_smem, v_smem, k_bar, v_bar,
            n_blocks, k_row0, v_row0, qk_scale, offs_m, S, ones_smem,
            MASKED: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
            NUM_STAGES: gl.constexpr, TAU: gl.constexpr, SIGMA: gl.constexpr, BETA: gl.constexpr,
            s_layout: gl.constexpr, o_layout: gl.constexpr, SUM_MMA: gl.constexpr, l_layout: gl.constexpr,
            FRESH_PV: gl.constexpr):
    # Key blocks lo..hi-1; on entry P(lo-1) (p8, its descale d) is formed and its PV is pending, acc in
    # units of descale d_prev, g = alpha d_prev / d the factor to bring acc to d's units. With SUM_MMA,
    # l_i is the [BLOCK_M, 8] accumulator of P times a tile of ones (every column the row sum), in acc's
    # units and rescaled with it; without, the [BLOCK_M] row sum in true units. FRESH_PV: PV(j-1) into a zeroed
    # tile, acc = acc g + it after the wait (acc is never the wgmma's C operand).
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    zero_l = gl.zeros([BLOCK_M, 8], gl.float32, l_layout)
    zero_o = gl.zeros(acc.shape, gl.float32, o_layout)
    for j in range(lo, hi):
        s = j % NUM_STAGES
        sp = (j - 1) % NUM_STAGES
        mbarrier.wait(k_bar.index(s), (j // NUM_STAGES) & 1)
        qk_tok = warpgroup_mma(q_smem, k_smem.index(s).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        mbarrier.wait(v_bar.index(sp), ((j - 1) // NUM_STAGES) & 1)
        g_o = gl.expand_dims(gl.convert_layout(g, row_o), 1)
        pa = gl.convert_layout(p8, p_layout)
        if FRESH_PV:
            acc_tok = warpgroup_mma(pa, v_smem.index(sp).permute((1, 0)), zero_o, use_acc=False, is_async=True)
        else:
            acc = acc * g_o
            acc_tok = warpgroup_mma(pa, v_smem.index(sp).permute((1, 0)), acc, is_async=True)
        if SUM_MMA:
            # the block's sum in a fresh accumulator (use_acc=False), added to l_i in fp32 after the wait
            g_l = gl.expand_dims(gl.convert_layout(g, gl.SliceLayout(1, l_layout)), 1)
            pl_ = gl.convert_layout(p8, gl.DotOperandLayout(operand_index=0, parent=l_layout, k_width=4))
            l_tok = warpgroup_mma(pl_, ones_smem.permute((1, 0)), zero_l, use_acc=False, is_async=True)
            qk = warpgroup_mma_wait(2, deps=(qk_tok, ))  # QK(j) is the oldest group: PV(j-1) may still run
        else:
            qk = warpgroup_mma_wait(1, deps=(qk_tok, ))  # QK(j) is the older group: PV(j-1) may still run
        if MASKED:
            qk = _mask(qk, j * BLOCK_N, offs_m, S, CAUSAL, BLOCK_N, s_layout)
        p8, row_sum, d_new, alpha, m_i = _lean_p(qk, m_i, qk_scale, TAU, SIGMA, BETA)
        if SUM_MMA:
            pv, l_blk = warpgroup_mma_wait(0, deps=(acc_tok, l_tok))
            l_i = gl.fma(l_i, g_l, l_blk)
        else:
            l_i = l_i * alpha + row_sum
            pv = warpgroup_mma_wait(0, deps=(acc_tok, ))
        if FRESH_PV:
            acc = gl.fma(acc, g_o, pv)
        else:
            acc = pv
        # QK(j-1) and PV(j-1) are done with slot sp: refill it with block j-1+NUM_STAGES.
        _load_block(k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, j - 1 + NUM_STAGES, n_blocks, k_row0, v_row0,
                    BLOCK_N, NUM_STAGES)
        g = alpha * (d / d_new)
        d = d_new
    return acc, l_i, m_i, p8, d, g


@gluon.jit
def attn_fwd(q_desc, k_desc, v_desc, Out, qk_scale, out_scale, stride_ob, stride_oh, stride_om, HQ, GROUP, S,
             HEAD_D: gl.constexpr, DV: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             CAUSAL: gl.constexpr, NUM_STAGES: gl.constexpr, TAU: gl.constexpr, SIGMA: gl.constexpr,
             BETA: gl.constexpr, SUM_MMA: gl.constexpr, FRESH_PV: gl.constexpr, num_warps: gl.constexpr):
    # q_desc: [B*HQ*S, HEAD_D] fp8 rows; k_desc: [B*HKV*S, HEAD_D]; v_desc: V^T, [B*HKV*DV, S] (K-major
    # for the fp8 wgmma's B operand). Rows of a tile past this head's S belong to the next head (finite,
    # masked) or lie past the tensor (TMA zero-fills); the output store is masked.
    gl.static_assert(BLOCK_M == 16 * num_warps, "one warp per 16 rows: warps_per_cta = [num_warps, 1]")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 32])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, DV, 32])
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, 8, 32])

    pid_m = gl.program_id(0)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m  # longest rows first, the short ones fill the last wave
    bh = gl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    kv_head = b * (HQ // GROUP) + h // GROUP  # GQA: the shared KV head, never a repeated copy
    start_m = pid_m * BLOCK_M
    k_row0 = kv_head * S
    v_row0 = kv_head * DV
    if CAUSAL:
        n_full = start_m // BLOCK_N  # blocks before the query tile: no mask
        n_blocks = gl.cdiv(gl.minimum(start_m + BLOCK_M, S), BLOCK_N)
    else:
        n_full = S // BLOCK_N
        n_blocks = gl.cdiv(S, BLOCK_N)

    q_smem = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_M, HEAD_D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(gl.float8e4nv, [NUM_STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(gl.float8e4nv, [NUM_STAGES, DV, BLOCK_N], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bar = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bar = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    # SUM_MMA: B operand of the row-sum product, 8 columns of e4m3 ones, K-major ([8, BLOCK_N], keys contiguous)
    ones_smem = gl.allocate_shared_memory(
        gl.float8e4nv, [8, BLOCK_N], gl.NVMMASharedLayout.get_default_for([8, BLOCK_N], gl.float8e4nv))
    if SUM_MMA:
        ones_layout: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])
        ones_smem.store(gl.full([8, BLOCK_N], 0x38, gl.int8, ones_layout).to(gl.float8e4nv, bitcast=True))  # 1.0
        fence_async_shared()
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_bar.index(i), count=1)
        mbarrier.init(v_bar.index(i), count=1)

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    _tma_load(q_desc, [bh * S + start_m, 0], q_bar, q_smem)
    for i in gl.static_range(NUM_STAGES):
        _load_block(k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, i, n_blocks, k_row0, v_row0, BLOCK_N, NUM_STAGES)

    offs_m = start_m + gl.arange(0, BLOCK_M, row_s)
    m_i = gl.full([BLOCK_M], -1.0e30, gl.float32, row_s)  # finite: a fully masked row never sees -inf - -inf
    acc = gl.zeros([BLOCK_M, DV], gl.float32, o_layout)

    # Block 0 (masked: a no-op where it needs none, once a CTA): P(0) formed, its PV left for the loop.
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bar.index(0), 0)
    qk = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout),
                       use_acc=False)
    qk = _mask(qk, 0, offs_m, S, CAUSAL, BLOCK_N, s_layout)
    p8, l_i, d, alpha, m_i = _lean_p(qk, m_i, qk_scale, TAU, SIGMA, BETA)
    g = alpha / d  # acc is zero: any finite factor
    if SUM_MMA:
        l_i = gl.zeros([BLOCK_M, 8], gl.float32, l_layout)

    first_masked = gl.maximum(n_full, 1)
    acc, l_i, m_i, p8, d, g = _blocks(1, first_masked, acc, l_i, m_i, p8, d, g, q_smem, k_desc, v_desc, k_smem,
                                      v_smem, k_bar, v_bar, n_blocks, k_row0, v_row0, qk_scale, offs_m, S, ones_smem,
                                      False, CAUSAL, BLOCK_M, BLOCK_N, NUM_STAGES, TAU, SIGMA, BETA, s_layout,
                                      o_layout, SUM_MMA, l_layout, FRESH_PV)
    acc, l_i, m_i, p8, d, g = _blocks(first_masked, n_blocks, acc, l_i, m_i, p8, d, g, q_smem, k_desc, v_desc,
                                      k_smem, v_smem, k_bar, v_bar, n_blocks, k_row0, v_row0, qk_scale, offs_m, S,
                                      ones_smem, True, CAUSAL, BLOCK_M, BLOCK_N, NUM_STAGES, TAU, SIGMA, BETA,
                                      s_layout, o_layout, SUM_MMA, l_layout, FRESH_PV)

    # PV of the last block, then back to true units.
    last = n_blocks - 1
    sl = last % NUM_STAGES
    mbarrier.wait(v_bar.index(sl), (last // NUM_STAGES) & 1)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    g_o = gl.expand_dims(gl.convert_layout(g, row_o), 1)
    if FRESH_PV:
        pv = warpgroup_mma(gl.convert_layout(p8, p_layout), v_smem.index(sl).permute((1, 0)),
                           gl.zeros([BLOCK_M, DV], gl.float32, o_layout), use_acc=False)
        acc = gl.fma(acc, g_o, pv)
    else:
        acc = warpgroup_mma(gl.convert_layout(p8, p_layout), v_smem.index(sl).permute((1, 0)), acc * g_o)
    if SUM_MMA:
        g_l = gl.expand_dims(gl.convert_layout(g, gl.SliceLayout(1, l_layout)), 1)
        pl_ = gl.convert_layout(p8, gl.DotOperandLayout(operand_index=0, parent=l_layout, k_width=4))
        l_blk = warpgroup_mma(pl_, ones_smem.permute((1, 0)), gl.zeros([BLOCK_M, 8], gl.float32, l_layout),
                              use_acc=False)
        l_i = gl.fma(l_i, g_l, l_blk)
        scale = gl.convert_layout(out_scale / gl.max(l_i, 1), row_o)  # acc and l in the same units: d cancels
    else:
        scale = gl.convert_layout(d * (out_scale / l_i), row_o)
    out = acc * gl.expand_dims(scale, 1)

    mbarrier.invalidate(q_bar)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(k_bar.index(i))
        mbarrier.invalidate(v_bar.index(i))

    offs_mo = start_m + gl.arange(0, BLOCK_M, row_o)
    offs_d = gl.arange(0, DV, gl.SliceLayout(0, o_layout))
    o_ptrs = (Out + b.to(gl.int64) * stride_ob + h.to(gl.int64) * stride_oh
              + gl.expand_dims(offs_mo, 1) * stride_om + gl.expand_dims(offs_d, 0))
    gl.store(o_ptrs, out.to(gl.bfloat16), mask=gl.expand_dims(offs_mo, 1) < S)
