"""FP8 quantization as the FP8 kernels do it: the inputs to e4m3 with one power-of-two scale per tensor
(protocol.md "FP8 input scales"), and the probabilities P to e4m3 before the PV product (exact rounding
or the lean code, per key block or per row; protocol.md "Lean P").

A power-of-two scale is exact in binary floating point, so dequantizing (value * descale) adds no
rounding of its own, and folding descales into the softmax scale or the output is exact too.

>>> import torch
>>> t8, descale = quantize_e4m3_pow2(torch.tensor([0.5, -3.0, 1.0]))
>>> descale, t8.float().tolist()
(0.0078125, [64.0, -384.0, 128.0])
"""

from __future__ import annotations

import math

from harness.errors import InputError

__all__ = ["E4M3_MAX", "P_MODES", "P_SCALES", "pow2_scale", "quantize_e4m3_pow2", "dequantize", "lean_p_codes",
           "e4m3_code_values", "quantize_p", "quantize_p_scaled"]

E4M3_MAX = 448.0  # largest finite e4m3fn value (0x7E); 0x7F is NaN, there is no infinity
P_MODES = ("exact", "lean", "bf16")  # how P is rounded for the PV product
P_SCALES = ("block", "row")  # one power-of-two scale of P per key block (offset o), or one per row (o = 0)


def pow2_scale(amax: float, *, fmt_max: float = E4M3_MAX) -> float:
    """2^floor(log2(fmt_max / amax)): the largest power of two that keeps amax within the format; 1 for 0."""
    if amax == 0.0:
        return 1.0  # an all-zero tensor quantizes to zeros under any scale; 1 keeps descale meaningful
    if not math.isfinite(amax):
        raise InputError(
            f"Cannot quantize a tensor whose absolute maximum is {amax}: it holds NaN or Inf. "
            f"Check the inputs with harness.inputs.check_finite before quantizing."
        )
    # frexp is exact (m in [0.5, 1)), unlike log2, which can land a hair below an exact power of two.
    _, exponent = math.frexp(fmt_max / amax)
    return math.ldexp(1.0, exponent - 1)


def quantize_e4m3_pow2(t):
    """(e4m3 tensor, descale) with t ~= e4m3.float() * descale, descale a power of two.

    The scale comes from the absolute maximum of the whole tensor (computed after RoPE, i.e. on the
    tensor the kernel is given), rounding is to nearest even, and amax * scale <= 448 so nothing saturates.
    """
    import torch

    amax = float(t.abs().max()) if t.numel() else 0.0
    scale = pow2_scale(amax)
    # fp32 holds every bf16/fp16 value times a power of two exactly, so the only rounding is to e4m3.
    t8 = (t.to(torch.float32) * scale).to(torch.float8_e4m3fn)
    return t8, 1.0 / scale


def dequantize(t8, descale: float, *, dtype=None):
    """The values an FP8 kernel actually multiplies: e4m3 * descale, exactly, in fp64 by default."""
    import torch

    return t8.to(dtype or torch.float64) * descale


def lean_p_codes(u, *, beta: float = 0.35, sigma: float = 6.0):
    """The lean-P e4m3 codes of 2^u * 2^sigma: round(8 (u + sigma + 7) - beta), clamped to [0, 126].

    `u` is base-2 score minus row max plus the block offset o (<= 0 with the exact row max). 126 is the
    largest finite e4m3fn code (448); 127 would be NaN.
    """
    import torch

    y = 8.0 * (u + sigma + 7.0) - beta
    return torch.clamp(torch.round(y), 0, 126).to(torch.uint8)


def e4m3_code_values(codes):
    """fp64 values of non-negative e4m3fn codes: 2^(E-7) (1 + F/8) for code 8E + F, E >= 1; F 2^-9 else."""
    import torch

    c = codes.to(torch.int64)
    e, f = c // 8, (c % 8).to(torch.float64)
    normal = torch.pow(2.0, (e - 7).to(torch.float64)) * (1.0 + f / 8.0)
    return torch.where(e > 0, normal, f * 2.0**-9)


def quantize_p_scaled(t, *, p_mode: str, block: int = 64, sigma: float = 6.0, beta: float = 0.35,
                      p_scale: str = "block", o_cap: float = 100.0):
    """(p, e): the probabilities as an FP8 kernel forms them, and the exponent e (= o + sigma) of the
    power-of-two scale each was stored under, so p = stored e4m3 value * 2^-e. Both fp64, shaped like t.

    `t` is [..., n] base-2 scores with -inf where masked; p is relative to the exact row max m (the
    largest p of a row is 1 before rounding). `p_scale="block"`: per `block` keys, o = clamp(floor(m -
    m_blk), 0, o_cap), the whole binades from the block max down to m, so every block's largest p is
    stored near 2^sigma; `"row"`: o = 0, one scale per row, and p far below the max lands in e4m3's
    subnormals or at 0. The stored value is e4m3(2^(t - m + o + sigma)) rounded to nearest even
    ("exact") or the lean code ("lean"). "bf16" is p = 2^(t - m) rounded to bf16 (e = 0), without blocks.
    """
    import torch

    if p_mode == "bf16":  # FlashAttention-2 style: p relative to the row max, rounded to bf16
        p = torch.exp2(t - t.amax(dim=-1, keepdim=True)).to(torch.bfloat16).to(torch.float64)
        return p, torch.zeros_like(p)
    if p_mode not in P_MODES:
        raise ValueError(f"unknown p_mode {p_mode!r}: use 'bf16', 'exact' or 'lean'")
    if p_scale not in P_SCALES:
        raise ValueError(f"unknown p_scale {p_scale!r}: use 'block' (one scale per key block) or 'row'")
    n = t.shape[-1]
    pad = (-n) % block
    tp = torch.nn.functional.pad(t, (0, pad), value=-math.inf) if pad else t
    blocks = tp.reshape(*tp.shape[:-1], -1, block)
    m = tp.amax(dim=-1, keepdim=True).unsqueeze(-1)  # [..., 1, 1]
    if p_scale == "block":
        m_blk = blocks.amax(dim=-1, keepdim=True)  # [..., nblk, 1]
        o = torch.clamp(torch.floor(m - m_blk), 0, o_cap)  # inf (fully masked block) -> o_cap: its p is 0 anyway
    else:
        o = torch.zeros_like(blocks[..., :1])
    u = blocks - m + o
    if p_mode == "exact":
        scaled = torch.exp2(u + sigma).to(torch.float8_e4m3fn).to(torch.float64)
    else:
        scaled = e4m3_code_values(lean_p_codes(u, beta=beta, sigma=sigma))
        scaled = torch.where(torch.isneginf(blocks), torch.zeros_like(scaled), scaled)
    e = (o + sigma).expand_as(scaled)
    p = scaled * torch.exp2(-e)
    return p.reshape(tp.shape)[..., :n], e.reshape(tp.shape)[..., :n]


def quantize_p(t, *, p_mode: str, block: int = 64, sigma: float = 6.0, beta: float = 0.35, p_scale: str = "block",
               o_cap: float = 100.0):
    """The probabilities alone of `quantize_p_scaled` (unnormalized, relative to the exact row max), fp64."""
    return quantize_p_scaled(t, p_mode=p_mode, block=block, sigma=sigma, beta=beta, p_scale=p_scale, o_cap=o_cap)[0]
