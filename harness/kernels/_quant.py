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

# P's e4m3 forms live with the other low-precision numerics; these names stay here for the FP8 kernels.
from harness.numerics import P_MODES, P_SCALES, e4m3_code_values, lean_p_codes, quantize_p, quantize_p_scaled

__all__ = ["E4M3_MAX", "P_MODES", "P_SCALES", "pow2_scale", "quantize_e4m3_pow2", "dequantize", "lean_p_codes",
           "e4m3_code_values", "quantize_p", "quantize_p_scaled"]

E4M3_MAX = 448.0  # largest finite e4m3fn value (0x7E); 0x7F is NaN, there is no infinity


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
