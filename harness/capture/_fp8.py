"""FP8 copies of captured inputs: per-tensor power-of-two scales computed after RoPE.

The quantization itself lives in `harness.kernels` (the kernels and the error analysis use the
same function); this module applies it to a whole AttentionInputs.
"""

from __future__ import annotations

from dataclasses import replace

from harness.kernels import E4M3_MAX, pow2_scale, quantize_e4m3_pow2

__all__ = ["E4M3_MAX", "e4m3_scale", "quantize_e4m3_pow2", "quantize_inputs_e4m3"]


def e4m3_scale(absmax: float) -> float:
    """2^floor(log2(448 / absmax)): the largest power of two that keeps absmax * scale <= 448.

    >>> e4m3_scale(1.0), e4m3_scale(448.0), e4m3_scale(0.0)
    (256.0, 1.0, 1.0)
    """
    return pow2_scale(absmax)


def quantize_inputs_e4m3(inputs):
    """An AttentionInputs in e4m3; the descales are in provenance["descale"] (q, k, v)."""
    descales = {}
    tensors = {}
    for name in ("q", "k", "v"):
        tensors[name], descales[name] = quantize_e4m3_pow2(getattr(inputs, name))
    provenance = {**inputs.provenance, "descale": descales, "fp8_scaling": "per tensor, 2^floor(log2(448/absmax))"}
    return replace(inputs, **tensors, dtype="float8_e4m3fn", provenance=provenance)
