"""The Triton attention forward shared by `triton-bf16`, `triton-fp8-exact` and `triton-fp8-lean`.

This module imports triton at the top, so the kernel modules import it only inside `prepare()`
(registration never needs triton). One jit kernel serves the three ways of forming P (constexpr MODE),
so the loop structure, masking, GQA indexing and lazy rescale are the same code in all three and a
difference in speed or error can only come from P:

- MODE_BF16: p = exp2(s - m) rounded to the V dtype for the PV product (FlashAttention-2).
- MODE_EXACT: p = exp2(s - m + o + sigma) rounded to e4m3 by the hardware conversion (inline PTX,
  see `_e4m3_codes`; in the Triton interpreter it is emulated, see `_triton_interpreter`).
- MODE_LEAN: the e4m3 code of p from one FMA (see triton_fp8.py for the derivation).

Both FP8 modes scale each key block of p by 2^(o + sigma) before rounding and remove the factor with
one fp32 multiply of that block's PV product. Every mode sums the ROUNDED p (what multiplies V) into
the row sum l, so the weights sum to one.

K and V arrive through TMA descriptors (host-side `TensorDescriptor`, built once in setup) when the
rows are 16-byte multiples on sm_90+, else through masked pointer loads; Q is loaded once per program.

Scores are base 2: qk_scale = softmax scale * log2(e) * (q and k descales), so exp2 replaces exp.
The causal loop is split into blocks that need no mask (all keys before the query block) and the
diagonal blocks, so only the latter pay for the mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

from kernels_under_test._triton_interpreter import fix_interpreter, interpreting

try:
    import triton.profiler.language as pl  # Proton scopes; compiled in only when PROTON is set
except ImportError:  # pragma: no cover - a Triton without Proton: PROTON=True then fails to compile
    pl = None

__all__ = ["Config", "MODE_BF16", "MODE_EXACT", "MODE_LEAN", "P_BLOCK", "attention_launch", "split_qk_dim", "tma_possible"]

MODE_BF16, MODE_EXACT, MODE_LEAN = 0, 1, 2
P_BLOCK = 64  # keys per power-of-two P scaling block in the FP8 modes (the protocol's 64)
OMAX = tl.constexpr(100.0)  # cap on a block's offset o: 2^-(o + sigma) must stay a normal fp32 number
MAGIC = tl.constexpr(8388608.0)  # 2^23: adding it leaves round-to-nearest(y) in the low mantissa bits


@dataclass(frozen=True, kw_only=True)
class Config:
    """Launch parameters of one kernel for one head dim. FP8 modes need block_n == 64 (the P block)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    rescale_branch: bool = False  # BF16 only: skip acc *= alpha when no row of the tile moved its max
    use_tma: bool = True  # K/V through TMA descriptors where possible (sm_90+, 16-byte aligned rows)
    pack_p: bool = False  # BF16 only: round p two at a time (one cvt.rn.bf16x2.f32) instead of one F2F each


@triton.jit
def _e4m3_bits_to_f32_scaled(bits):
    # e4m3 bits 0EEEEMMM moved up by 20 land in an fp32's low exponent and top mantissa bits: the result
    # is the e4m3 value times 2^-120, normals and subnormals alike, with integer ops instead of a cvt.
    # Bits 12 and up of `bits` leave the register in the shift, so they may hold anything.
    return (bits << 20).to(tl.float32, bitcast=True)


@triton.jit
def _e4m3_codes(x):
    # The e4m3 codes (uint8) of fp32 x, by the hardware conversion (round to nearest even, saturating),
    # four to a 32-bit register. Not `x.to(tl.float8e4nv)` plus a bitcast: that leaves each pair of codes
    # in a 16-bit register with two readers (the PV operand and the row sum), and ptxas 12.8 (triton 3.6)
    # then reads half of the row sum's pairs at the loop head, one trip early: the previous block's P,
    # and on the first trip registers nothing wrote (garbage bytes, sign-extended and shifted into an
    # fp32 exponent, can be huge, -inf or NaN in l: the NaN triton-fp8-exact gave on the H200). ptxas
    # 13.4 (triton 3.9) segfaults on the same PTX.
    # tests/kernels/test_triton_sass.py checks the SASS for such loop-head reads.
    return tl.inline_asm_elementwise(
        "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; "
        "mov.b32 $0, {lo, hi}; }",
        "=r,r,r,r,r", [x], dtype=tl.uint8, is_pure=True, pack=4,
    )


@triton.jit
def _round_pairs(p, BF16: tl.constexpr):
    # (p rounded to bf16/fp16 for the PV product, the same rounded values in fp32 for the row sum), two
    # elements per conversion (F2FP.*.PACK_AB). `p.to(tl.bfloat16)` compiles to one F2F per element on
    # sm_90, which competes with MUFU.EX2 for the same quarter-rate unit; this halves those conversions.
    # The results stay in 32-bit registers (see _e4m3_codes for what 16-bit ones can do to ptxas).
    if BF16:
        return tl.inline_asm_elementwise(
            "cvt.rn.bf16x2.f32 $0, $4, $3; shl.b32 $1, $0, 16; and.b32 $2, $0, 0xffff0000;",
            "=r,=r,=r,r,r", [p], dtype=(tl.bfloat16, tl.float32), is_pure=True, pack=2,
        )
    else:
        return tl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; cvt.rn.f16x2.f32 $0, $4, $3; mov.b32 {lo, hi}, $0; cvt.f32.f16 $1, lo; "
            "cvt.f32.f16 $2, hi; }",
            "=r,=r,=r,r,r", [p], dtype=(tl.float16, tl.float32), is_pure=True, pack=2,
        )


@triton.jit
def _pow2_int(e):
    # 2^e for an integer-valued fp32 tensor e in [-126, 127], exactly (ex2.approx need not be exact).
    return ((e.to(tl.int32) + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _load(ptrs, mask, MASKED: tl.constexpr):
    if MASKED:
        return tl.load(ptrs, mask=mask, other=0.0)
    else:
        return tl.load(ptrs)


@triton.jit
def _load_kv(K, K2, V, k_base, v_base, start_n, stride_kn, stride_vn, stride_vd, S,
             DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr, BLOCK_N: tl.constexpr,
             MASKED: tl.constexpr, USE_TMA: tl.constexpr, V_T: tl.constexpr):
    # K block [BLOCK_N, DQK_LO] (+ [BLOCK_N, DQK_HI]) and V block [BLOCK_N, DV]. With TMA the bases are
    # row offsets into 2D views; rows past this head's S belong to the next head (finite values that the
    # score mask and p = 0 discard) or past the tensor (zero-filled), so TMA loads need no mask.
    if USE_TMA:
        k = K.load([k_base + start_n, 0])
        k2 = k
        if DQK_HI > 0:
            k2 = K2.load([k_base + start_n, DQK_LO])
        if V_T:
            v = tl.trans(V.load([v_base, start_n]))
        else:
            v = V.load([v_base + start_n, 0])
    else:
        offs_n = start_n + tl.arange(0, BLOCK_N)
        offs_dl = tl.arange(0, DQK_LO)
        offs_v = tl.arange(0, DV)
        kmask = offs_n[:, None] < S
        k = _load(k_base + offs_n[:, None] * stride_kn + offs_dl[None, :], kmask, MASKED)
        k2 = k
        if DQK_HI > 0:
            offs_dh = DQK_LO + tl.arange(0, DQK_HI)
            k2 = _load(k_base + offs_n[:, None] * stride_kn + offs_dh[None, :], kmask, MASKED)
        v = _load(v_base + offs_n[:, None] * stride_vn + offs_v[None, :] * stride_vd, kmask, MASKED)
    return k, k2, v


@triton.jit
def _stage(
    acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale, lo, hi, offs_m, S,
    DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr, TAU: tl.constexpr,
    SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr, USE_TMA: tl.constexpr,
    V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr,
):
    # PROTON brackets the stages of each key block in Proton scopes for an intra-kernel timeline
    # (harness.profiling record_proton_trace); without it no scope code is generated. wgmma is
    # asynchronous: "qk" and "pv" end where the result is first needed, so they include the wait.
    offs_nb = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_nb
        if PROTON:
            pl.enter_scope("load_kv")
        k, k2, v = _load_kv(K, K2, V, k_base, v_base, start_n, stride_kn, stride_vn, stride_vd, S,
                            DQK_LO, DQK_HI, DV, BLOCK_N, MASKED, USE_TMA, V_T)
        if PROTON:
            pl.exit_scope("load_kv")
            pl.enter_scope("qk")
        qk = tl.dot(q_lo, tl.trans(k))
        if DQK_HI > 0:
            # dqk = 192 is not a power of two: a second product over the last 64 dims (no padding to 256)
            qk = tl.dot(q_hi, tl.trans(k2), qk)
        if PROTON:
            pl.exit_scope("qk")
            pl.enter_scope("softmax")
        if MASKED:
            valid = offs_n[None, :] < S
            if CAUSAL:
                valid = valid & (offs_m[:, None] >= offs_n[None, :])
            qk = tl.where(valid, qk, float("-inf"))

        # Lazy rescale: move a row's reference max only when the block beats it by more than TAU
        # (base-2 units); otherwise p may reach 2^TAU, which both bf16 and e4m3 (scaled by 2^SIGMA) hold.
        m_blk = tl.max(qk, 1) * qk_scale
        up = m_blk > m_i + TAU
        m_new = tl.where(up, tl.maximum(m_i, m_blk), m_i)
        alpha = tl.math.exp2(m_i - m_new)
        m_i = m_new

        if MODE == 0:
            # Sum the p that multiplies V (rounded to bf16), so the weights sum to one: with the stale max
            # of lazy rescale the largest p is not 1 and its rounding would otherwise bias peaked rows.
            if PACK_P:
                p, p32 = _round_pairs(tl.math.exp2(qk * qk_scale - m_new[:, None]), v.dtype == tl.bfloat16)
                l_i = l_i * alpha + tl.sum(p32, 1)
            else:
                p = tl.math.exp2(qk * qk_scale - m_new[:, None]).to(v.dtype)
                l_i = l_i * alpha + tl.sum(p.to(tl.float32), 1)
            if RESCALE_BRANCH:
                if tl.max(up.to(tl.int32), 0) > 0:
                    acc = acc * alpha[:, None]
            else:
                acc = acc * alpha[:, None]
            if PROTON:
                pl.exit_scope("softmax")
                pl.enter_scope("pv")
            acc = tl.dot(p, v, acc)
            if PROTON:
                pl.exit_scope("pv")
        else:
            # o = whole binades from this block's max down to the row reference (0 when the reference is
            # stale and the block is above it): the block's largest p lands in (1/2, 2^TAU] before SIGMA.
            o = tl.minimum(tl.maximum(tl.floor(m_new - m_blk), 0.0), OMAX)
            if MODE == 1:
                codes = _e4m3_codes(tl.math.exp2(qk * qk_scale - (m_new - o - SIGMA)[:, None]))
                bits = codes.to(tl.int32)
                p8 = codes.to(tl.float8e4nv, bitcast=True)
            else:
                # y = 8(x + o + SIGMA + 7) - BETA with x = s - m: ONE FMA per element. Adding 2^23 is the
                # float-to-int conversion: the fp32 ulp there is 1, so the add rounds y to nearest and
                # leaves the integer in the low mantissa bits; the max with 2^23 sends y < 0 to code 0.
                # z's bits are 0x4B000000 + code: the int8 truncation keeps the code, and the row sum's
                # << 20 shifts 0x4B000000 out of the register, so no & 0xFF is needed (one op less each).
                c0 = 8.0 * (SIGMA + 7.0 + o - m_new) - BETA
                z = tl.maximum(tl.fma(qk, qk_scale * 8.0, c0[:, None]) + MAGIC, MAGIC)
                bits = z.to(tl.int32, bitcast=True)
                p8 = bits.to(tl.int8).to(tl.float8e4nv, bitcast=True)
            # Row sum of the rounded p (what multiplies V), so the weights sum to one.
            l_i = l_i * alpha + tl.sum(_e4m3_bits_to_f32_scaled(bits), 1) * _pow2_int(120.0 - SIGMA - o)
            if PROTON:
                pl.exit_scope("softmax")
                pl.enter_scope("pv")
            acc = acc * alpha[:, None] + tl.dot(p8, v) * _pow2_int(-SIGMA - o)[:, None]
            if PROTON:
                pl.exit_scope("pv")
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(
    Q, K, K2, V, Out, qk_scale, out_scale,
    stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_om,
    HQ, GROUP, S,
    DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr,
    TAU: tl.constexpr, SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr,
    USE_TMA: tl.constexpr, V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr,
    BULK: tl.constexpr,
):
    # BULK: the jit function that runs the blocks needing no mask (`_stage`, or a variant of the same
    # signature such as _triton_fp8_pipe.stage_pipelined); the diagonal blocks always run `_stage`.
    pid_m = tl.program_id(0)
    if CAUSAL:
        # Longest rows first, so the short ones fill the tail of the last wave.
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    hk = h // GROUP  # GQA: index the shared KV head, never a repeated copy
    q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
    if USE_TMA:
        kv_head = b * (HQ // GROUP) + hk
        k_base = kv_head * S
        v_base = kv_head * DV if V_T else kv_head * S
    else:
        k_base = K + b.to(tl.int64) * stride_kb + hk.to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vb + hk.to(tl.int64) * stride_vh
    o_base = Out + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_dl = tl.arange(0, DQK_LO)
    q_lo = tl.load(q_base + offs_m[:, None] * stride_qm + offs_dl[None, :], mask=offs_m[:, None] < S, other=0.0)
    q_hi = q_lo
    if DQK_HI > 0:
        offs_dh = DQK_LO + tl.arange(0, DQK_HI)
        q_hi = tl.load(q_base + offs_m[:, None] * stride_qm + offs_dh[None, :], mask=offs_m[:, None] < S, other=0.0)

    # A finite start for m: a row whose first block were fully masked would otherwise compute -inf - -inf.
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV], tl.float32)
    if CAUSAL:
        full_end = (start_m // BLOCK_N) * BLOCK_N  # every key before this precedes every query row
        end = tl.minimum(start_m + BLOCK_M, S)
    else:
        full_end = (S // BLOCK_N) * BLOCK_N
        end = S
    acc, l_i, m_i = BULK(
        acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale, 0, full_end,
        offs_m, S, DQK_LO, DQK_HI, DV, BLOCK_N, False, CAUSAL, MODE, TAU, SIGMA, BETA, RESCALE_BRANCH, USE_TMA, V_T,
        PACK_P, PROTON,
    )
    acc, l_i, m_i = _stage(
        acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale, full_end, end,
        offs_m, S, DQK_LO, DQK_HI, DV, BLOCK_N, True, CAUSAL, MODE, TAU, SIGMA, BETA, RESCALE_BRANCH, USE_TMA, V_T,
        PACK_P, PROTON,
    )
    out = acc * (out_scale / l_i)[:, None]
    offs_v = tl.arange(0, DV)
    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_v[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < S)


def split_qk_dim(dqk: int) -> tuple[int, int]:
    """dqk as a power of two plus a power-of-two remainder (192 = 128 + 64), or raise ValueError."""
    lo = 1 << (dqk.bit_length() - 1)
    hi = dqk - lo
    if dqk < 16 or (hi and (hi & (hi - 1) or hi < 16)):
        raise ValueError(f"head dim {dqk} is not a power of two >= 16, nor one plus a power of two >= 16")
    return lo, hi


def _constexprs(*, mode, causal, dqk, dv, config, tau, sigma, beta, use_tma, v_transposed, proton=False, bulk=None):
    lo, hi = split_qk_dim(dqk)
    return dict(
        BULK=_stage if bulk is None else bulk,
        DQK_LO=lo, DQK_HI=hi, DV=dv, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=bool(causal),
        MODE=mode, TAU=float(tau), SIGMA=float(sigma), BETA=float(beta), RESCALE_BRANCH=bool(config.rescale_branch),
        USE_TMA=bool(use_tma), V_T=bool(v_transposed), PACK_P=bool(config.pack_p), PROTON=bool(proton),
    )


def tma_possible(q, k, v, *, v_transposed: bool) -> bool:
    """TMA needs contiguous, 16-byte aligned K and V whose rows are 16-byte multiples (an fp8 V^T row is S
    bytes), sm_90+."""
    import torch

    if not (k.is_contiguous() and v.is_contiguous()):
        return False
    if q.is_cuda and (getattr(torch.version, "hip", None) or torch.cuda.get_device_capability(q.device) < (9, 0)):
        return False
    # and 16-byte aligned bases: a capture loaded on the CPU is a view into its file at any offset
    return all(t.shape[-1] * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0 for t in (k, v))


def _descriptors(k, v, *, bn, dqk_lo, dqk_hi, v_transposed):
    from triton.tools.tensor_descriptor import TensorDescriptor

    k2d = k.reshape(-1, k.shape[-1])
    v2d = v.reshape(-1, v.shape[-1])
    kd = TensorDescriptor.from_tensor(k2d, [bn, dqk_lo])
    kd2 = TensorDescriptor.from_tensor(k2d, [bn, dqk_hi]) if dqk_hi else kd
    vd = TensorDescriptor.from_tensor(v2d, [v.shape[-2], bn] if v_transposed else [bn, v.shape[-1]])
    return kd, kd2, vd


def attention_launch(
    *, mode: int, q, k, v, out, qk_scale: float, out_scale: float, causal: bool, config: Config,
    tau: float, sigma: float = 0.0, beta: float = 0.0, v_transposed: bool = False, proton: bool = False, bulk=None,
):
    """A zero-argument closure launching the kernel once into `out` (q [B,Hq,S,dqk], k [B,Hkv,S,dqk]).

    `proton` compiles the variant with Proton scopes (load_kv, qk, softmax, pv) for timelines; never timed.
    `bulk` is the jit function for the blocks that need no mask (default `_stage`; see `_attn_fwd`).

    v is [B,Hkv,S,dv], or [B,Hkv,dv,S] when `v_transposed` (the K-major layout Hopper's FP8 wgmma wants
    for its B operand). Everything that does not change between launches is bound here, once.
    """
    if interpreting():  # its conversions and inline PTX need correcting (see _triton_interpreter)
        fix_interpreter()
    if mode != MODE_BF16 and config.block_n != P_BLOCK:
        raise ValueError(f"FP8 kernels scale P per {P_BLOCK}-key block, so block_n must be {P_BLOCK}")
    if mode != MODE_BF16 and config.pack_p:
        raise ValueError("pack_p applies to the BF16 kernel only (FP8 P is converted four at a time already)")
    B, HQ, S, dqk = q.shape
    dv = v.shape[-2] if v_transposed else v.shape[-1]
    for name, t in (("q", q), ("k", k), ("out", out)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dim")
    svn, svd = (v.stride(3), v.stride(2)) if v_transposed else (v.stride(2), v.stride(3))
    use_tma = config.use_tma and tma_possible(q, k, v, v_transposed=v_transposed)
    lo, hi = split_qk_dim(dqk)
    kk, kk2, vv = (k, k, v)
    if use_tma:
        kk, kk2, vv = _descriptors(k, v, bn=config.block_n, dqk_lo=lo, dqk_hi=hi, v_transposed=v_transposed)
    args = (
        q, kk, kk2, vv, out, float(qk_scale), float(out_scale),
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), svn, svd, out.stride(0), out.stride(1), out.stride(2),
        HQ, HQ // k.shape[1], S,
    )
    kw = _constexprs(mode=mode, causal=causal, dqk=dqk, dv=dv, config=config, tau=tau, sigma=sigma, beta=beta,
                     use_tma=use_tma, v_transposed=v_transposed, proton=proton, bulk=bulk)
    if proton and pl is None:
        raise ValueError("proton=True needs triton.profiler (Proton), which this Triton lacks")
    grid = (triton.cdiv(S, config.block_m), B * HQ)
    kernel = _attn_fwd[grid]

    def launch():
        kernel(*args, **kw, num_warps=config.num_warps, num_stages=config.num_stages)
        return out

    return launch
