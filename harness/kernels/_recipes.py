"""Kernels that declare a low-precision recipe (`Kernel.extra["recipe"]`: a bundled name, a
`harness.numerics.Recipe`, or the dict of one): the gate's reference and `bench error`'s stages for them.

The gate's reference is the recipe's fp64 emulation on the kernel's own inputs (the recipe quantizes them as the
kernel declares it does), with the allowance `harness.numerics.attend(bounds=...)` derives: against the exact row
max (the recipe's p_max "exact") only what fp32 arithmetic can move, so a kernel of the wrong block size, a scale
rounded the wrong way or a rotation applied to one side fails although FP4's own rounding is far larger; against
a running max, twice the format's rounding of each P. Its SNR limit is the emulation's own SNR against exact
attention on the quantized inputs less 6 dB (a correct kernel adds at most as much error again as its numerics
declare), at most the FP8 gate's 30 dB.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace

from harness.errors import UnsupportedInputError
from harness.kernels._reference import Emulation
from harness.kernels._tolerance import declared_tolerance
from harness.numerics import attend, operands, parse_recipe

__all__ = ["declared_recipe", "dense_only", "emulate_recipe", "recipe_tolerance", "RECIPE_SNR_MARGIN_DB"]

RECIPE_SNR_MARGIN_DB = 6.0


def declared_recipe(kernel):
    """The kernel's declared `harness.numerics.Recipe`, or None."""
    spec = kernel.extra.get("recipe")
    return None if spec is None else parse_recipe(spec)


def dense_only(kernel, inputs) -> None:
    features = inputs.shape.features()
    if features:
        raise UnsupportedInputError(
            f"Kernel {kernel.name!r} declares a low-precision recipe, which the gate and bench error emulate for dense "
            f"self-attention only, not for {', '.join(sorted(features))}.")


def recipe_tolerance(em):
    """The gate's limits for a recipe's emulation `em` (module doc)."""
    rms_ref = float(em.exact.pow(2).mean().sqrt())
    rms_d = float((em.out - em.exact).pow(2).mean().sqrt())
    own = 20 * math.log10(rms_ref / rms_d) if rms_d > 0 and rms_ref > 0 else math.inf
    return replace(declared_tolerance(), name="recipe", min_snr_db=min(30.0, own - RECIPE_SNR_MARGIN_DB))


def emulate_recipe(kernel, inputs, recipe=None):
    """The gate's reference for a recipe kernel on `inputs`: an `Emulation` carrying its own limits."""
    import torch

    recipe = recipe or declared_recipe(kernel)
    dense_only(kernel, inputs)
    ops = operands(recipe, inputs.q, inputs.k, inputs.v, dtype=torch.float64, envelope=True)
    a = attend(recipe, ops, scale=inputs.scale, causal=inputs.shape.causal, bounds=recipe.p_max)
    em = Emulation(numerics=recipe, out=a.out, exact=a.exact, p_spread=a.spread, p_bound=a.bound,
                   accumulation=a.accumulation)
    return dataclasses.replace(em, tolerance=recipe_tolerance(em))
