"""Two schedules of the FP8 kernels' unmasked key blocks, each a drop-in for `_triton_common._stage`
(same signature: `_attn_fwd` runs one as its BULK stage; the diagonal blocks keep `_stage`).

Why: in `_stage` each block runs QK, then softmax, then PV, each wgmma waited for before the vector
work that reads it; on the H200 the FP8 kernels keep the tensor pipe 33 % busy with softmax at 44-51 %
of a block (Proton), and lean P is bound by instruction issue (69 %).

- `stage_pipelined` (FlashAttention-3's intra-warpgroup pipelining, by hand): iteration j issues QK(j)
  and PV(j-1) (P of block j-1, formed in the previous trip, carried), then forms P(j), so that PV(j-1)
  could run under the softmax. Compiled for sm_90 by triton 3.6 the order is there but the overlap is
  not: Triton waits for each wgmma right after issuing it (warp_group_dot_wait pendings = 0 for both
  products in the TTGIR), and the carried P goes through shared memory (16 STS and 40 PRMT more a
  block). What it saves is stage_acc_in_mma's FFMA; the GPU says whether the order helps.
- `stage_acc_in_mma`: `_stage`'s order, with the PV product accumulating inside the wgmma.

Both keep acc in units of the pending block's descale d = 2^-(o + sigma) (acc times 2^(o + sigma)), so
acc * g, g = alpha d_old / d_new, is the wgmma's C operand and the loop touches acc once a block (one
FMUL per element) where `_stage` computes acc * alpha + PV * d (FMUL and FFMA, PV into a zeroed
accumulator): the same terms, rounded in another order. P is formed exactly as `_stage` forms it
(`_fp8_p`), except that o is capped at O_CAP. FP8 modes only (MODE 1 exact, 2 lean); no Proton scopes.

V of block j-1 is loaded again in iteration j rather than carried: a loaded tile carried across the loop
would leave Triton's load pipeliner (TMA into rotating shared buffers feeding the wgmma) for registers.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels_under_test._triton_common import (
    MAGIC,
    _e4m3_bits_to_f32_scaled,
    _e4m3_codes,
    _load_kv,
    _pow2_int,
)

__all__ = ["O_CAP", "stage_acc_in_mma", "stage_pipelined"]

# Cap on a block's offset o here (the plain stage: 100). acc carries the factor 2^(o + sigma) of the
# pending block, and acc (up to S x 448 x 2^tau in true units) times 2^(100 + 6) would overflow fp32. With
# 24, a block more than 24 binades below its row's reference keeps its P only down to 2^-(24 + 15) of the
# row's weight; the rest flushes to code 0. Nothing measurable: the gate's limit is 0.03.
O_CAP = tl.constexpr(24.0)


@triton.jit
def _fp8_p(qk, m_i, qk_scale, MODE: tl.constexpr, TAU: tl.constexpr, SIGMA: tl.constexpr, BETA: tl.constexpr,
           OCAP: tl.constexpr):
    # P of one key block exactly as _stage forms it (see there and triton_fp8.py for the derivation):
    # (e4m3 P, row sum of the rounded P, per-row descale 2^-(o + sigma), alpha, new row reference).
    m_blk = tl.max(qk, 1) * qk_scale
    up = m_blk > m_i + TAU
    m_new = tl.where(up, tl.maximum(m_i, m_blk), m_i)
    alpha = tl.math.exp2(m_i - m_new)
    o = tl.minimum(tl.maximum(tl.floor(m_new - m_blk), 0.0), OCAP)
    if MODE == 1:
        codes = _e4m3_codes(tl.math.exp2(qk * qk_scale - (m_new - o - SIGMA)[:, None]))
        bits = codes.to(tl.int32)
        p8 = codes.to(tl.float8e4nv, bitcast=True)
    else:
        c0 = 8.0 * (SIGMA + 7.0 + o - m_new) - BETA
        z = tl.maximum(tl.fma(qk, qk_scale * 8.0, c0[:, None]) + MAGIC, MAGIC)
        bits = z.to(tl.int32, bitcast=True)
        p8 = bits.to(tl.int8).to(tl.float8e4nv, bitcast=True)
    row_sum = tl.sum(_e4m3_bits_to_f32_scaled(bits), 1) * _pow2_int(120.0 - SIGMA - o)
    return p8, row_sum, _pow2_int(-SIGMA - o), alpha, m_new


@triton.jit
def _qk(q_lo, q_hi, k, k2, DQK_HI: tl.constexpr):
    qk = tl.dot(q_lo, tl.trans(k))
    if DQK_HI > 0:
        qk = tl.dot(q_hi, tl.trans(k2), qk)
    return qk


@triton.jit
def stage_pipelined(
    acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale, lo, hi, offs_m, S,
    DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr, TAU: tl.constexpr,
    SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr, USE_TMA: tl.constexpr,
    V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr,
):
    tl.static_assert(MODE != 0, "the pipelined stage forms FP8 P only")
    tl.static_assert(not MASKED, "the pipelined stage runs the blocks that need no mask")
    if hi > lo:
        # acc is kept in units of the pending block's descale d = 2^-(o + sigma) (times 2^(o + sigma)), so
        # each PV accumulates inside the wgmma (acc is its C operand) and the loop touches acc once a
        # block, with g = alpha d_old / d_new, at the head of the next trip: the only reader of a PV result
        # is then the next PV's operand, which lets Triton leave it in flight across the softmax.
        k, k2, _v = _load_kv(K, K2, V, k_base, v_base, lo, stride_kn, stride_vn, stride_vd, S,
                             DQK_LO, DQK_HI, DV, BLOCK_N, False, USE_TMA, V_T)
        p8, row_sum, d, alpha, m_i = _fp8_p(_qk(q_lo, q_hi, k, k2, DQK_HI), m_i, qk_scale, MODE, TAU, SIGMA, BETA,
                                            O_CAP)
        l_i = l_i * alpha + row_sum
        g = alpha / d  # acc arrives in true units
        for start_n in range(lo + BLOCK_N, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k, k2, _v = _load_kv(K, K2, V, k_base, v_base, start_n, stride_kn, stride_vn, stride_vd, S,
                                 DQK_LO, DQK_HI, DV, BLOCK_N, False, USE_TMA, V_T)
            _k, _k2, v_prev = _load_kv(K, K2, V, k_base, v_base, start_n - BLOCK_N, stride_kn, stride_vn, stride_vd,
                                       S, DQK_LO, DQK_HI, DV, BLOCK_N, False, USE_TMA, V_T)
            qk = _qk(q_lo, q_hi, k, k2, DQK_HI)  # block j
            acc = tl.dot(p8, v_prev, acc * g[:, None])  # block j-1, in flight while block j's P is formed
            p8, row_sum, d_new, alpha, m_i = _fp8_p(qk, m_i, qk_scale, MODE, TAU, SIGMA, BETA, O_CAP)
            l_i = l_i * alpha + row_sum
            g = alpha * (d / d_new)
            d = d_new
        _k, _k2, v_prev = _load_kv(K, K2, V, k_base, v_base, hi - BLOCK_N, stride_kn, stride_vn, stride_vd, S,
                                   DQK_LO, DQK_HI, DV, BLOCK_N, False, USE_TMA, V_T)
        acc = tl.dot(p8, v_prev, acc * g[:, None]) * d[:, None]  # back to true units for the diagonal blocks
    return acc, l_i, m_i


@triton.jit
def stage_acc_in_mma(
    acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale, lo, hi, offs_m, S,
    DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr, TAU: tl.constexpr,
    SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr, USE_TMA: tl.constexpr,
    V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr,
):
    # `_stage`'s order (QK, softmax, PV of the same block), with acc kept in units of the last block's
    # descale as in stage_pipelined: the PV product accumulates inside the wgmma (acc * g is its C
    # operand), one FMUL per accumulator element a block where `_stage` spends an FMUL and an FFMA
    # (acc * alpha + PV * d, the PV into a zeroed accumulator). P stays in registers (stage_pipelined
    # carries it across the trip, through shared memory).
    tl.static_assert(MODE != 0, "this stage forms FP8 P only")
    tl.static_assert(not MASKED, "this stage runs the blocks that need no mask")
    d = tl.full([acc.shape[0]], 1.0, tl.float32)  # acc arrives in true units
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k, k2, v = _load_kv(K, K2, V, k_base, v_base, start_n, stride_kn, stride_vn, stride_vd, S,
                            DQK_LO, DQK_HI, DV, BLOCK_N, False, USE_TMA, V_T)
        p8, row_sum, d_new, alpha, m_i = _fp8_p(_qk(q_lo, q_hi, k, k2, DQK_HI), m_i, qk_scale, MODE, TAU, SIGMA,
                                                BETA, O_CAP)
        l_i = l_i * alpha + row_sum
        acc = tl.dot(p8, v, acc * (alpha * (d / d_new))[:, None])
        d = d_new
    return acc * d[:, None], l_i, m_i
