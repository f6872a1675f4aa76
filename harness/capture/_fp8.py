"""FP8 (e4m3) copies of inputs with one power-of-two scale per tensor, from its absolute maximum.

A power-of-two scale is exact in any binary format, so quantizing and descaling add no error beyond
the e4m3 rounding itself, and a kernel can fold the descale into the softmax scale.
"""

from __future__ import annotations

import math
from dataclasses import replace

from harness.errors import InputError

__all__ = ["E4M3_MAX", "e4m3_scale", "quantize_e4m3_pow2", "quantize_inputs_e4m3"]

E4M3_MAX = 448.0  # largest finite float8_e4m3fn


def e4m3_scale(absmax: float) -> float:
    """2^floor(log2(448 / absmax)): the largest power of two that keeps absmax * scale <= 448.

    >>> e4m3_scale(1.0), e4m3_scale(448.0), e4m3_scale(0.0)
    (256.0, 1.0, 1.0)
    """
    if not math.isfinite(absmax):
        raise InputError(
            f"Cannot scale a tensor with absolute maximum {absmax} to e4m3: it holds NaN or Inf. Recapture or "
            f"regenerate the inputs."
        )
    if absmax == 0.0:
        return 1.0
    # Clamped so the scale itself stays a normal fp32 number.
    return 2.0 ** max(-126, min(126, math.floor(math.log2(E4M3_MAX / absmax))))


def quantize_e4m3_pow2(t):
    """(e4m3 copy of t, descale): t ~= q_e4m3.float() * descale, descale a power of two.

    >>> import torch
    >>> q, descale = quantize_e4m3_pow2(torch.tensor([0.5, -3.0]))
    >>> descale, q.float().mul(descale).tolist()
    (0.0078125, [0.5, -3.0])
    """
    import torch

    absmax = float(t.detach().abs().max()) if t.numel() else 0.0
    scale = e4m3_scale(absmax)
    q = (t.detach().to(torch.float32) * scale).to(torch.float8_e4m3fn)
    return q, 1.0 / scale


def quantize_inputs_e4m3(inputs):
    """An AttentionInputs in e4m3; the descales are in provenance["descale"] (q, k, v)."""
    descales = {}
    tensors = {}
    for name in ("q", "k", "v"):
        tensors[name], descales[name] = quantize_e4m3_pow2(getattr(inputs, name))
    provenance = {**inputs.provenance, "descale": descales, "fp8_scaling": "per tensor, 2^floor(log2(448/absmax))"}
    return replace(inputs, **tensors, dtype="float8_e4m3fn", provenance=provenance)
