"""Low-precision numerics: element formats, scaled quantization, recipes of quantized attention and their emulation."""

from harness.numerics._emulate import STAGES, U32, Attended, Operands, attend, hadamard, operands, stage_outputs
from harness.numerics._formats import (
                                       E8M0_MAX_EXP,
                                       E8M0_MIN_EXP,
                                       ELEMENT_FORMATS,
                                       ElementFormat,
                                       codes,
                                       e8m0_exponent,
                                       element_format,
                                       grid,
                                       round_to,
                                       unit_roundoff,
)
from harness.numerics._lean import P_MODES, P_SCALES, e4m3_code_values, lean_p_codes, quantize_p, quantize_p_scaled
from harness.numerics._recipe import RECIPES, ZYFA_P, Recipe, mutated, parse_recipe
from harness.numerics._scaled import PRESETS, SCALES, OperandFormat, parse_format, quantize

__all__ = ["E8M0_MAX_EXP", "E8M0_MIN_EXP", "ELEMENT_FORMATS", "ElementFormat", "codes", "e8m0_exponent",
           "element_format", "grid", "round_to", "unit_roundoff", "PRESETS", "SCALES", "OperandFormat",
           "parse_format", "quantize", "P_MODES", "P_SCALES", "e4m3_code_values", "lean_p_codes",
           "quantize_p", "quantize_p_scaled", "STAGES", "U32", "Attended", "Operands", "attend", "hadamard",
           "operands", "stage_outputs", "RECIPES", "ZYFA_P", "Recipe", "mutated", "parse_recipe"]
