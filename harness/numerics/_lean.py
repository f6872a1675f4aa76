"""P in e4m3 as ZYFA's FP8 kernels form it (protocol.md "Lean P"): per key block a power-of-two offset o from the
block max down to the row max, P = p 2^(o + sigma) stored in e4m3, rounded exactly ("exact") or by the one-FMA code
("lean"). The harness's FP8 kernels and the ZYFA recipe of `harness.numerics` share these functions.

>>> import torch
>>> lean_p_codes(torch.tensor([0.0, -1.0, -20.0], dtype=torch.float64)).tolist()
[104, 96, 0]
"""

from __future__ import annotations

import math

__all__ = ["P_MODES", "P_SCALES", "lean_p_codes", "e4m3_code_values", "quantize_p_scaled", "quantize_p"]

P_MODES = ("exact", "lean", "bf16")  # how P is rounded for the PV product
P_SCALES = ("block", "row")  # one power-of-two scale of P per key block (offset o), or one per row (o = 0)


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
                      p_scale: str = "block", o_cap: float = 100.0, offsets_from=None):
    """(p, e): the probabilities as an FP8 kernel forms them, and the exponent e (= o + sigma) of the
    power-of-two scale each was stored under, so p = stored e4m3 value * 2^-e. Both fp64, shaped like t.

    `t` is [..., n] base-2 scores with -inf where masked; p is relative to the exact row max m (the
    largest p of a row is 1 before rounding). `p_scale="block"`: per `block` keys, o = clamp(floor(m -
    m_blk), 0, o_cap), the whole binades from the block max down to m, so every block's largest p is
    stored near 2^sigma; `"row"`: o = 0, one scale per row, and p far below the max lands in e4m3's
    subnormals or at 0. The stored value is e4m3(2^(t - m + o + sigma)) rounded to nearest even
    ("exact") or the lean code ("lean"). "bf16" is p = 2^(t - m) rounded to bf16 (e = 0), without blocks.
    `offsets_from`: scores shaped like t whose row and block maxima set m and o instead of t's own (the gate's
    bound of where a kernel computing t in fp32 can land, harness.numerics._emulate).
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
    ref = blocks if offsets_from is None else (
        torch.nn.functional.pad(offsets_from, (0, pad), value=-math.inf) if pad else offsets_from).reshape(blocks.shape)
    m = ref.amax(dim=(-2, -1), keepdim=True)  # [..., 1, 1]
    if p_scale == "block":
        m_blk = ref.amax(dim=-1, keepdim=True)  # [..., nblk, 1]
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
