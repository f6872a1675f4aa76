"""The references a kernel is judged against, all in fp64.

- `reference_attention`: exact attention on the given tensors (for an FP8 kernel, its quantized inputs), the
  causal mask aligned to the end of the keys, with an optional sliding window;
- `workload_reference`: the same for any workload, one sequence at a time (paged, varlen, decode).
- `emulate_declared`: attention computed the way an FP8 kernel DECLARES it computes (`Numerics`): e4m3
  q, k, v, P rounded to e4m3 as declared (exactly or by the lean code, per key block or per row),
  normalized by the sum of the rounded P, plus the size of that emulation's own rounding per output
  element, from which the gate builds its limits (harness.kernels._gate).

Why the second one: on real activations a few keys carry most of a row's weight (SmolLM2 layer 15: an
attention sink with ~45 % of the mass), so the e4m3 rounding of those few P moves outputs by far more
than any allowance sized on Gaussian inputs, and a correct FP8 kernel failed a max |diff| limit that a
broken one could meet elsewhere. Against its own declared numerics a correct kernel differs only where
it rounds P at other points (its running row max, lazy rescale), by its fp32 / MMA accumulation and
by its bf16 output, and each of those is bounded by what the emulation computes here.

>>> import torch
>>> q = k = v = torch.eye(4, dtype=torch.float64)[None, None]
>>> em = emulate_declared(Numerics(p_mode="exact"), q, k, v, scale=1.0, causal=True)
>>> float(em.out[0, 0, 0, 0]), bool((em.out - em.exact).abs().max() < 0.05)
(1.0, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.inputs import sequences
from harness.kernels._quant import quantize_p_scaled

__all__ = ["reference_attention", "workload_reference", "Numerics", "Emulation", "declared_numerics", "emulate_declared", "score_blocks",
           "P_FLOOR", "MMA_REL_ERROR"]

# The largest error of one stored P below the normal range, in units of the scaled P (2^e p): exact
# rounding to nearest loses at most half e4m3's subnormal step (2^-9 / 2); the lean code maps its whole
# subnormal range (2^u < 2^-6) onto codes 0..7 by the chord and sends u < -7 to code 0, at most 2^-7 off.
P_FLOOR = {"exact": 2.0**-10, "lean": 2.0**-7}
# One FP8 MMA of Hopper (wgmma, k = 32) keeps about 13-14 bits when it adds its products (DeepSeek-V3
# technical report, sec. 3.3.2: "around 14 bits"); a 64-key block is two such MMAs: 2 x 2^-13.
MMA_REL_ERROR = 2.0**-12


@dataclass(frozen=True, kw_only=True)
class Numerics:
    """What an FP8 attention kernel declares it computes (from `Kernel.extra`, `declared_numerics`).

    quant: the inputs' quantization ("e4m3-pow2": e4m3, one power-of-two scale per tensor).
    p_mode: "exact" (P rounded to nearest e4m3) or "lean" (the one-FMA code, protocol.md "Lean P").
    p_scale: "block" (each `p_block`-key block scaled by 2^(o + sigma) so its largest p sits near 2^sigma)
        or "row" (one scale per row: o = 0).
    p_rel_error: the bound on one stored P's relative error in the normal range (2^-4 for exact rounding,
        0.075 for lean P).
    mma_rel_error: relative error of one MMA's accumulation, of the sum of the absolute products (0 for exact
        fp32 products): the QK scores (so each P) and the PV products of each key block.
    acc_in_mma: the running PV accumulator is the MMA's C operand (it passes through that accumulation
        once per key block); row_sum_mma: the row sum of P is formed by an MMA with a tile of ones.
    out_rounding: unit roundoff of the output format (2^-8 for bf16 out).
    """

    quant: str = "e4m3-pow2"
    p_mode: str
    p_scale: str = "block"
    p_block: int = 64
    sigma: float = 6.0
    beta: float = 0.35
    o_cap: float = 100.0
    p_rel_error: float = 2.0**-4
    mma_rel_error: float = 0.0
    acc_in_mma: bool = False
    row_sum_mma: bool = False
    out_rounding: float = 2.0**-8

    def __post_init__(self) -> None:
        if self.p_mode not in ("exact", "lean"):
            raise ValueError(f"declared p_mode {self.p_mode!r}: an FP8 kernel rounds P 'exact' or 'lean'")
        if self.p_scale not in ("block", "row"):
            raise ValueError(f"declared p_scale {self.p_scale!r}: 'block' or 'row'")

    def describe(self) -> str:
        scale = f"per {self.p_block}-key block" if self.p_scale == "block" else "per row"
        return (f"e4m3 q, k, v; P {self.p_mode} e4m3 {scale} (sigma {self.sigma:g}, within "
                f"{self.p_rel_error:.3g} each), sum of rounded P")


def declared_numerics(kernel) -> Numerics | None:
    """The numerics an FP8 kernel declares in `kernel.extra`, or None where it declares none to emulate
    (a BF16 kernel, or FP8 inputs without a declared P rounding: the gate then judges it by format)."""
    extra = kernel.extra
    if extra.get("quant") is None or extra.get("p_mode") not in ("exact", "lean"):
        return None
    p_mode = extra["p_mode"]
    return Numerics(
        quant=extra["quant"], p_mode=p_mode, p_scale=extra.get("p_scale", "block"),
        p_block=int(extra.get("p_block", 64)), sigma=float(extra.get("sigma", 6.0)),
        beta=float(extra.get("beta", 0.35)), o_cap=float(extra.get("o_cap", 100.0)),
        p_rel_error=max(2.0**-4 if p_mode == "exact" else 0.075, float(extra.get("p_rel_error") or 0.0)),
        mma_rel_error=float(extra.get("mma_rel_error", 0.0)), acc_in_mma=bool(extra.get("acc_in_mma", False)),
        row_sum_mma=extra.get("row_sum") == "wgmma",
        out_rounding=2.0**-8 if kernel.output_dtype in (None, "bfloat16") else 2.0**-11,
    )


def reference_attention(q, k, v, *, scale: float, causal: bool, block_rows: int = 1024, out_dtype=None,
                        window: int | None = None, abs_v: bool = False):
    """Attention in fp64 on exactly the given tensors (any dtype, upcast), on their device.

    q [B, Hq, S_q, dqk], k [B, Hkv, S_kv, dqk], v [B, Hkv, S_kv, dv], S_q <= S_kv: query i sits at position
    S_kv - S_q + i (the causal mask aligned to the end of the keys, FlashAttention's bottom-right convention;
    for S_q = S_kv the usual lower triangle). `window` W: a query sees its own position and the W - 1 before it
    (and, not causal, the W - 1 after it). GQA is handled by mapping each query head to its KV head. Rows are
    processed in blocks so the score matrix of a 16K-token call never needs to exist whole, and only the keys a
    block can see are read. Returns fp64 unless `out_dtype`. `abs_v`: also P |V| (fp64), per element the most a
    relative error of 1 in every probability can move it (the gate's allowance for rounding P), as (out, P |V|).
    """
    import torch

    B, Hq, S, _ = q.shape
    Hkv, S_kv = k.shape[1], k.shape[2]
    group = Hq // Hkv
    off = S_kv - S
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=torch.float64, device=q.device)
    out_abs = torch.empty_like(out) if abs_v else None
    kd = k.to(torch.float64)
    vd = v.to(torch.float64)
    for h in range(Hq):
        kh = kd[:, h // group]  # [B, S_kv, d]
        vh = vd[:, h // group]
        for r0 in range(0, S, block_rows):
            r1 = min(S, r0 + block_rows)
            qh = q[:, h, r0:r1].to(torch.float64)
            lo = max(0, off + r0 - window + 1) if window else 0
            hi = off + r1 if causal else (min(S_kv, off + r1 - 1 + window) if window else S_kv)
            scores = torch.matmul(qh, kh[:, lo:hi].transpose(-1, -2)) * scale
            if causal or window:
                pos = torch.arange(off + r0, off + r1, device=q.device)[:, None]
                cols = torch.arange(lo, hi, device=q.device)[None, :]
                hidden = cols > pos if causal else torch.zeros_like(cols > pos)
                if window:
                    hidden = hidden | (cols <= pos - window)
                    if not causal:
                        hidden = hidden | (cols >= pos + window)
                scores = scores.masked_fill(hidden, float("-inf"))
            p = torch.softmax(scores, dim=-1)
            out[:, h, r0:r1] = torch.matmul(p, vh[:, lo:hi])
            if abs_v:
                out_abs[:, h, r0:r1] = torch.matmul(p, vh[:, lo:hi].abs())
    out = out if out_dtype is None else out.to(out_dtype)
    return (out, out_abs) if abs_v else out


def workload_reference(inputs, q=None, k=None, v=None, *, out_dtype=None, abs_v: bool = False):
    """fp64 attention of any workload (`AttentionShape`: decode, window, paged, varlen) on `inputs` (or on
    `q`, `k`, `v` laid out like them), one sequence at a time: each sequence's keys gathered from its pages or
    its packed rows (`harness.inputs.sequences`), then `reference_attention` with the window. Only one
    sequence is ever upcast to fp64. Dense self-attention without a window is `reference_attention` itself.
    `abs_v`: (out, P |V|) as `reference_attention` gives them."""
    import torch

    s = inputs.shape
    q, k, v = (inputs.q if q is None else q), (inputs.k if k is None else k), (inputs.v if v is None else v)
    if not s.features():
        return reference_attention(q, k, v, scale=inputs.scale, causal=s.causal, out_dtype=out_dtype, abs_v=abs_v)
    out = torch.empty(s.out_shape(), dtype=torch.float64, device=q.device)
    out_abs = torch.empty_like(out) if abs_v else None
    for seq in sequences(inputs, q, k, v):
        got = reference_attention(seq.q, seq.k, seq.v, scale=inputs.scale, causal=s.causal, window=s.window,
                                  abs_v=abs_v)
        if abs_v:
            out[seq.rows], out_abs[seq.rows] = got
        else:
            out[seq.rows] = got
    out = out if out_dtype is None else out.to(out_dtype)
    return (out, out_abs) if abs_v else out


def score_blocks(q, k, v, *, scale: float, causal: bool, block_rows: int = 256):
    """(h, r0, r1, t, v) per query head and block of rows: t the base-2 scores (fp64, -inf where the
    causal mask hides a key) of rows r0:r1 against the keys they may see, v those keys' values (fp64).
    q [B,Hq,S,dqk], k [B,Hkv,S,dqk], v [B,Hkv,S,dv]; query head h reads KV head h // (Hq/Hkv)."""
    import torch

    S, Hq = q.shape[2], q.shape[1]
    group = Hq // k.shape[1]
    c = scale * math.log2(math.e)
    for h in range(Hq):
        kh = k[:, h // group].to(torch.float64)
        vh = v[:, h // group].to(torch.float64)
        for r0 in range(0, S, block_rows):
            r1 = min(S, r0 + block_rows)
            kv_end = r1 if causal else S
            t = torch.matmul(q[:, h, r0:r1].to(torch.float64), kh[:, :kv_end].transpose(-1, -2)) * c
            if causal:
                rows = torch.arange(r0, r1, device=q.device)[:, None]
                cols = torch.arange(0, kv_end, device=q.device)[None, :]
                t = t.masked_fill(cols > rows, -math.inf)
            yield h, r0, r1, t, vh[:, :kv_end]


@dataclass(frozen=True, kw_only=True, eq=False)
class Emulation:
    """An FP8 kernel's declared numerics, emulated in fp64 on its quantized inputs, [B, Hq, S, dv] each.

    out: attention with P rounded as declared, divided by the sum of the rounded P.
    exact: exact attention on the same quantized inputs (the protocol's fp64 reference).
    p_spread: sqrt(sum_j w_j^2 (v_j - out)^2) / sum_j P_j per element, w_j the bound on one P's error
        (p_rel_error p_j, or the subnormal floor): the scale of what rounding P moves the element by.
    p_bound: sqrt(sum_j w_j) sqrt(sum_j w_j (v_j - out)^2) / sum_j P_j, at least sum_j w_j |v_j - out| /
        sum_j P_j (Cauchy-Schwarz): the most rounding P can move the element by, however few keys it has.
    accumulation: bound on the MMA accumulation's share of the element (0 for exact fp32 products).
    numerics: what was emulated (a `Numerics`, or a `harness.numerics.Recipe`: its `describe()` and
    `out_rounding` are what the gate reads); tolerance: the gate's limits where they differ from the FP8
    ones (a recipe's SNR limit follows its own error), else None.
    """

    numerics: object
    out: object
    exact: object
    p_spread: object
    p_bound: object
    accumulation: object
    tolerance: object = None


def emulate_declared(numerics: Numerics, q, k, v, *, scale: float, causal: bool, block_rows: int | None = None,
                     spread: bool = True) -> Emulation:
    """Emulate `numerics` in fp64 on q [B,Hq,S,dqk], k [B,Hkv,S,dqk], v [B,Hkv,S,dv] (already quantized:
    the values the kernel multiplies), on their device; GQA by head index; the softmax `scale` is applied
    in base 2 as the kernels do. With the exact row max and fp64 sums, so it is the rounding of P alone.
    `spread=False` skips the per-element rounding scales (the P emulation alone, for `bench error`).
    `block_rows` (default 1024 rows on a GPU, 256 on the CPU) bounds the fp64 temporaries: about ten
    [block_rows, S] arrays, 0.7 GB at S = 8192 on a GPU."""
    import torch

    if block_rows is None:
        block_rows = 1024 if q.is_cuda else 256

    B, Hq, S, _ = q.shape
    dv = v.shape[-1]
    f64 = dict(dtype=torch.float64, device=q.device)
    out, exact = torch.empty((B, Hq, S, dv), **f64), torch.empty((B, Hq, S, dv), **f64)
    p_spread = torch.zeros((B, Hq, S, dv), **f64) if spread else None
    p_bound = torch.zeros((B, Hq, S, dv), **f64) if spread else None
    acc = torch.zeros((B, Hq, S, dv), **f64) if spread else None
    u, floor = numerics.p_rel_error, P_FLOOR[numerics.p_mode]
    for h, r0, r1, t, vb in score_blocks(q, k, v, scale=scale, causal=causal, block_rows=block_rows):
        p_exact = torch.exp2(t - t.amax(dim=-1, keepdim=True))
        exact[:, h, r0:r1] = torch.matmul(p_exact, vb) / p_exact.sum(-1, keepdim=True)
        p, e = quantize_p_scaled(t, p_mode=numerics.p_mode, block=numerics.p_block, sigma=numerics.sigma,
                                 beta=numerics.beta, p_scale=numerics.p_scale, o_cap=numerics.o_cap)
        norm = p.sum(-1, keepdim=True)
        o = torch.matmul(p, vb) / norm
        out[:, h, r0:r1] = o
        if not spread:
            continue
        # Two roundings of one key (the kernel's, at its own reference max, and this one) differ by at
        # most 2 w; a kernel whose block offset is one binade smaller has twice the floor, hence 2 floor.
        rel = u
        if numerics.mma_rel_error:
            # The QK MMA's accumulation moves a base-2 score by up to mma sum_i |q_i k_i| c, so p by ln 2 times that.
            g = q.shape[1] // k.shape[1]
            qk_abs = torch.matmul(q[:, h, r0:r1].to(torch.float64).abs(),
                                  k[:, h // g, : t.shape[-1]].to(torch.float64).abs().transpose(-1, -2))
            rel = u + math.log(2.0) * numerics.mma_rel_error * scale * math.log2(math.e) * qk_abs
        w = torch.where(torch.isneginf(t), torch.zeros_like(t), rel * p_exact + 2 * floor * torch.exp2(-e))
        v2 = vb * vb
        # sum_j a_j (v_j - o)^2 = a @ v^2 - 2 o (a @ v) + o^2 sum a, in fp64 (no cancellation that matters:
        # the terms are of the size of v^2, 52 bits against the 8 that rounding P leaves)
        for a, into in ((w * w, None), (w, p_bound)):
            s2 = (torch.matmul(a, v2) - 2 * o * torch.matmul(a, vb) + o * o * a.sum(-1, keepdim=True)).clamp_min(0)
            if into is None:
                p_spread[:, h, r0:r1] = s2.sqrt() / norm
            else:
                into[:, h, r0:r1] = (s2 * a.sum(-1, keepdim=True)).sqrt() / norm
        if numerics.mma_rel_error:
            mma = numerics.mma_rel_error
            a = mma * torch.matmul(p, vb.abs()) / norm
            if numerics.acc_in_mma:  # the running output passes once through each block's MMA
                blocks = ((~torch.isneginf(t)).sum(-1, keepdim=True) + numerics.p_block - 1) // numerics.p_block
                a = a + mma * blocks * o.abs()
            if numerics.row_sum_mma:  # the row sum's error scales the whole row
                a = a + mma * o.abs()
            acc[:, h, r0:r1] = a
    return Emulation(numerics=numerics, out=out, exact=exact, p_spread=p_spread, p_bound=p_bound,
                     accumulation=acc)
