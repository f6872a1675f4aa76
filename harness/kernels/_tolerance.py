"""The correctness gate's limits (`GateTolerance`): the protocol's per-format tolerances and those of the gate
by declared numerics. Below the gate, its references (`_recipes`) and `bench error` (`_error`), which all read them."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GateTolerance", "declared_tolerance", "gate_tolerance", "hoeffding_z", "DECLARED_DELTA"]


@dataclass(frozen=True, kw_only=True)
class GateTolerance:
    """Pass when max |diff| beyond the format's own rounding < `max_abs` and SNR >= `min_snr_db`.

    Two roundings no kernel in that format avoids are not held against it: the output's (`rounding`,
    the output format's unit roundoff u, times |ref|) and that of the probabilities fed to the PV product
    (`p_rounding` times P |V| per element: a relative error e in each p moves an output by at most e (P |V|)).
    P goes to the PV product in the operand format: bf16 for bf16 kernels (2^-8), e4m3 for FP8 ones
    (2^-4). Without that allowance a correct kernel fails on std-1 inputs in its first rows, where few
    keys carry weight: cuDNN's bf16 SDPA by 0.0078 against 2e-3, an FP8 kernel with exactly rounded P by
    0.045 against 0.03 on the H200. The raw max |diff| is kept beside the excess, and SNR, which is not
    relaxed, still judges the whole output.
    """

    name: str
    max_abs: float | None
    min_snr_db: float | None
    rounding: float
    p_rounding: float
    # Judged by declared numerics (`declared_tolerance`): limits on |diff| / its allowance per element and
    # on the RMS diff / the RMS the emulation's rounding gives; max_abs is then None.
    max_ratio: float | None = None
    rms_ratio: float | None = None


# A correct kernel rounds each P at most p_rel_error off, as the emulation does, but at its own points
# (its running row max): per key the two differ by at most twice the bound, and per element the sum of
# such independent bounded terms stays within z times their root-sum-square (Hoeffding) but for a chance
# of DECLARED_DELTA over the whole output.
DECLARED_DELTA = 1e-6
DECLARED_MAX_RATIO = 1.0
DECLARED_RMS_RATIO = 2.0


def declared_tolerance() -> GateTolerance:
    """The limits of the gate by declared numerics: every element within its allowance (ratio < 1), the
    RMS difference under twice the RMS of the emulation's rounding, SNR >= 30 dB against exact attention."""
    return GateTolerance(name="fp8-declared", max_abs=None, min_snr_db=30.0, rounding=2.0**-8, p_rounding=2.0**-4,
                         max_ratio=DECLARED_MAX_RATIO, rms_ratio=DECLARED_RMS_RATIO)


def hoeffding_z(n: int, delta: float = DECLARED_DELTA) -> float:
    """z with P(|a sum of independent terms within +-a_j| > z sqrt(sum a_j^2)) <= delta / n for each of n elements:
    sqrt(2 ln(2 n / delta)); 7.3 for 1.5e5 elements, 7.9 for 1.4e7.

    >>> round(hoeffding_z(10**7), 2)
    7.83
    """
    return math.sqrt(2.0 * math.log(2.0 * max(n, 1) / delta))


def gate_tolerance(kind: str) -> GateTolerance:
    """The protocol's tolerances: bf16 max |diff| < 2e-3; fp8 max |diff| < 0.03 and SNR >= 30 dB."""
    table = {
        "bf16": GateTolerance(name="bf16", max_abs=2e-3, min_snr_db=None, rounding=2.0**-8, p_rounding=2.0**-8),
        "fp16": GateTolerance(name="fp16", max_abs=1e-3, min_snr_db=None, rounding=2.0**-11, p_rounding=2.0**-11),
        # bf16 out, e4m3 P (3 mantissa bits: relative half-ulp 2^-4)
        "fp8": GateTolerance(name="fp8", max_abs=0.03, min_snr_db=30.0, rounding=2.0**-8, p_rounding=2.0**-4),
        "fp32": GateTolerance(name="fp32", max_abs=1e-4, min_snr_db=None, rounding=2.0**-24, p_rounding=2.0**-24),
        "fp64": GateTolerance(name="fp64", max_abs=1e-10, min_snr_db=None, rounding=2.0**-53, p_rounding=2.0**-53),
    }
    aliases = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "float32": "fp32", "float64": "fp64"}
    return table[aliases.get(kind, kind)]
