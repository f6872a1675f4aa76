"""The element formats of low-precision attention, written from their definitions, and rounding to them.

A format of 1 sign, E exponent and M mantissa bits with exponent bias b holds, for each code (e, m):
e = 0: m 2^(1 - b - M) (subnormal; zero for m = 0); e >= 1: 2^(e - b) (1 + m 2^-M) (normal), except the codes
each format reserves:

| format | E, M, b | reserved codes | largest finite | source |
|---|---|---|---|---|
| e4m3 | 4, 3, 7 | S.1111.111 is NaN; no infinity | 448 | OCP 8-bit floating point (OFP8) rev. 1.0, "E4M3" |
| e5m2 | 5, 2, 15 | S.11111.00 is Inf, S.11111.{01,10,11} NaN | 57344 | OFP8 rev. 1.0, "E5M2" (IEEE-like) |
| e2m1 | 2, 1, 1 | none: no Inf, no NaN | 6 | OCP Microscaling (MX) v1.0, sec. 5.3.3 "FP4 (E2M1)" |

and the scale format E8M0 (OCP MX v1.0, sec. 5.4.1): an unsigned exponent, 2^(e - 127) for e = 0..254,
e = 255 NaN; no zero, no sign.

Rounding (`round_to`) is round-to-nearest, ties to the even code (the code whose last mantissa bit is 0), which
both specs name as the conversion's rounding. Where a spec leaves a choice, this module chose (docs/numerics.md "Low-precision
numerics" says so to users):
- finite values beyond the largest finite value SATURATE to it (the OFP8 spec's saturating conversion mode, and the
  only behaviour e2m1 can have, having neither Inf nor NaN; the OCP MX conversion of sec. 6.3 clamps likewise);
- a non-finite value stays non-finite: NaN -> NaN, and +-Inf -> NaN in e4m3 and e2m1 (no Inf there; for e2m1 a
  code-level NaN does not exist, so the emulation carries the NaN in its fp64 value, which is what a kernel's
  NaN check must see), +-Inf -> +-Inf in e5m2: a NaN in the inputs is never turned into a finite number.
- the sign of zero is kept (-0.001 rounds to -0 in e2m1); it changes no sum.

>>> import torch
>>> round_to(torch.tensor([0.2, 0.25, 0.75, 2.5, 5.0, 7.0, -100.0], dtype=torch.float64), "e2m1").tolist()
[0.0, 0.0, 1.0, 2.0, 4.0, 6.0, -6.0]
>>> grid("e2m1")
[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["ElementFormat", "ELEMENT_FORMATS", "element_format", "grid", "codes", "round_to", "unit_roundoff",
           "e8m0_exponent", "E8M0_MIN_EXP", "E8M0_MAX_EXP"]

E8M0_MIN_EXP, E8M0_MAX_EXP = -127, 127  # 2^-127 .. 2^127; code 255 is NaN


@dataclass(frozen=True)
class ElementFormat:
    """A sign-exponent-mantissa format: `ebits`, `mbits`, `bias`; `inf_nan`: which codes of the top exponent are
    not finite ("fn": only the all-ones code is NaN, as e4m3; "ieee": the whole top exponent, as e5m2; "none")."""

    name: str
    ebits: int
    mbits: int
    bias: int
    inf_nan: str

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade."""
        return 1 - self.bias

    @property
    def max_finite(self) -> float:
        return max(v for v, _ in _positive_codes(self))

    @property
    def emax(self) -> int:
        """Exponent of the largest normal binade (OCP MX's emax_elem: 8 for e4m3, 15 for e5m2, 2 for e2m1)."""
        return math.frexp(self.max_finite)[1] - 1

    @property
    def has_inf(self) -> bool:
        return self.inf_nan == "ieee"


ELEMENT_FORMATS = {
    "e4m3": ElementFormat("e4m3", 4, 3, 7, "fn"),
    "e5m2": ElementFormat("e5m2", 5, 2, 15, "ieee"),
    "e2m1": ElementFormat("e2m1", 2, 1, 1, "none"),
}


def element_format(name) -> ElementFormat:
    if isinstance(name, ElementFormat):
        return name
    try:
        return ELEMENT_FORMATS[name]
    except KeyError:
        raise ConfigError(f"Unknown element format {name!r}; the formats are {', '.join(ELEMENT_FORMATS)}.") from None


def _positive_codes(fmt: ElementFormat) -> list[tuple[float, int]]:
    """(value, code) of every non-negative finite code, from the bit layout alone (the brute-force definition)."""
    out = []
    top = (1 << fmt.ebits) - 1
    for e in range(top + 1):
        for m in range(1 << fmt.mbits):
            if fmt.inf_nan == "fn" and e == top and m == (1 << fmt.mbits) - 1:
                continue  # NaN
            if fmt.inf_nan == "ieee" and e == top:
                continue  # Inf and NaN
            value = m * 2.0 ** (1 - fmt.bias - fmt.mbits) if e == 0 else 2.0 ** (e - fmt.bias) * (1 + m / (1 << fmt.mbits))
            out.append((value, (e << fmt.mbits) | m))
    return out


def codes(fmt) -> list[tuple[float, int]]:
    """Every non-negative finite (value, code) of a format, ascending by value."""
    return sorted(_positive_codes(element_format(fmt)))


def grid(fmt) -> list[float]:
    """The non-negative finite values of a format, ascending."""
    return [v for v, _ in codes(fmt)]


def unit_roundoff(fmt) -> float:
    """The largest relative error of rounding a normal value to nearest: 2^-(M + 1)."""
    return 2.0 ** -(element_format(fmt).mbits + 1)


def round_to(x, fmt):
    """`x` (a float tensor, fp32 or fp64) rounded to the nearest value of `fmt`, ties to even, finite values beyond
    the largest saturating to it, non-finite values non-finite (module doc). Same dtype and shape as `x`.

    Exact in the tensor's own dtype: x / 2^(E - M) is a power-of-two scaling, `torch.round` rounds half to
    even, and every value of these formats is exact in fp32."""
    import torch

    f = element_format(fmt)
    a = x.abs()
    _, e = torch.frexp(a)  # a = mant 2^e, mant in [0.5, 1): the binade is e - 1 (0 for a = 0, caught by clamp)
    binade = torch.clamp(e - 1, min=f.emin)
    quantum = torch.ldexp(torch.ones_like(a), (binade - f.mbits).to(torch.int32))
    r = torch.round(a / quantum) * quantum
    r = torch.clamp(r, max=f.max_finite)
    out = torch.copysign(r, x)
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        keep_inf = torch.isinf(x) if f.has_inf else torch.zeros_like(bad)
        out = torch.where(bad & ~keep_inf, torch.full_like(x, math.nan), out)
        out = torch.where(keep_inf, x, out)
    return out


def e8m0_exponent(amax, fmt):
    """OCP MX v1.0 sec. 6.3: the shared exponent floor(log2(amax)) - emax_elem of a block whose largest magnitude
    is `amax`, clamped to E8M0's range [-127, 127]; amax = 0 gives -127 (the block is zeros under any scale).
    Returned as a float tensor of exponents; NaN where amax is NaN or Inf (E8M0's NaN code: the block decodes
    to NaN, as the spec's conversion gives for a block holding a NaN or Inf)."""
    import torch

    f = element_format(fmt)
    _, e = torch.frexp(amax)
    shared = (e - 1 - f.emax).to(amax.dtype)
    shared = torch.where(amax > 0, shared, torch.full_like(amax, float(E8M0_MIN_EXP)))
    shared = torch.clamp(shared, E8M0_MIN_EXP, E8M0_MAX_EXP)
    return torch.where(torch.isfinite(amax), shared, torch.full_like(amax, math.nan))
