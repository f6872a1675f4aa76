"""Scaled quantization of one operand: element format, where the scales sit, and how each scale is made.

An `OperandFormat` names
- `element`: e4m3, e5m2 or e2m1 (harness.numerics._formats);
- `granularity` along the operand's contraction axis (the axis its MMA sums over: the head dim for Q and K,
  the keys for V and P): "tensor" (one scale for the whole tensor), "row" (one per vector along that axis:
  per token for Q and K, per channel for V, per query row for P) or `block` elements (one per block of the axis);
- `scale`: how a granule's scale is made from its absolute maximum amax:
  "pow2": 2^floor(log2(max / amax)), the largest power of two keeping amax in range (exact to apply; the harness's
  FP8 kernels' per-tensor scale); "fp32": max / amax in fp32 (amax lands on the largest value exactly);
  "e8m0": the OCP MX shared exponent, 2^(floor(log2 amax) - emax_elem) as an E8M0 value (MXFP8, MXFP4; values
  above the largest element saturate, as the spec's conversion does); "nvfp4": NVIDIA's two-level scale: a
  per-tensor fp32 encode scale s = 448 * 6 / amax_tensor, and per block the E4M3 decode scale
  e4m3(amax_block / 6 * s), elements e2m1(x * s / scale_block) (TensorRT-LLM's fp4Quantize and the NVFP4
  descriptions; a block whose E4M3 scale rounds to 0 quantizes to zeros: FA4's "zero-scale blocks");
- `static`: a fixed amax (a calibrated scale, or P's known maximum of 1) instead of the data's own, per call.
  (P is formed a block of query rows at a time, as a kernel forms it: a dynamic "tensor" scale of P is that of the
  rows formed together; the bundled recipes' P scales are static or per block.)

`quantize` returns the values the kernel multiplies, element x scale, in the input's dtype (fp64 for the
emulation, fp32 for the bundled emulated kernels), so an exact product of them is the exact product the
hardware forms before accumulating.

>>> import torch
>>> x = torch.tensor([[0.1, -0.7, 3.0, 0.0]], dtype=torch.float64)
>>> quantize(x, parse_format("mxfp4:4"), axis=-1).tolist()
[[0.0, -0.75, 3.0, 0.0]]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.numerics._formats import e8m0_exponent, element_format, round_to

__all__ = ["OperandFormat", "parse_format", "quantize", "PRESETS", "SCALES"]

SCALES = ("pow2", "fp32", "e8m0", "nvfp4")
NVFP4_BLOCK_MAX = 448.0  # the E4M3 block scale's range the per-tensor scale maps amax_tensor / 6 onto


@dataclass(frozen=True, kw_only=True)
class OperandFormat:
    element: str
    granularity: str | int = "tensor"  # "tensor", "row", or a block length along the contraction axis
    scale: str = "pow2"
    static: float | None = None

    def __post_init__(self) -> None:
        element_format(self.element)
        if self.scale not in SCALES:
            raise ConfigError(f"Unknown scale {self.scale!r}: one of {', '.join(SCALES)}.")
        g = self.granularity
        if not (g in ("tensor", "row") or (isinstance(g, int) and g > 0)):
            raise ConfigError(f"Granularity {g!r}: 'tensor', 'row' or a positive block length.")
        if self.scale in ("e8m0", "nvfp4") and not isinstance(g, int):
            raise ConfigError(f"A {self.scale} scale is a per-block scale: give a block length, not {g!r}.")
        if self.scale == "nvfp4" and self.element != "e2m1":
            raise ConfigError("The nvfp4 two-level scale holds e2m1 elements.")
        if self.static is not None and not (self.static > 0 and math.isfinite(self.static)):
            raise ConfigError(f"A static amax must be positive and finite, not {self.static!r}.")

    def describe(self) -> str:
        for name, f in PRESETS.items():
            if f == OperandFormat(element=self.element, granularity=self.granularity, scale=self.scale):
                base = name if self.granularity == _PRESET_BLOCK[name] else f"{name}:{self.granularity}"
                break
        else:
            gran = self.granularity if isinstance(self.granularity, str) else f"block{self.granularity}"
            base = f"{self.element}:{gran}:{self.scale}"
        return base + (f"@{self.static:g}" if self.static is not None else "")

    @property
    def block(self) -> int | None:
        return self.granularity if isinstance(self.granularity, int) else None


PRESETS = {
    "mxfp8": OperandFormat(element="e4m3", granularity=32, scale="e8m0"),
    "mxfp8e5": OperandFormat(element="e5m2", granularity=32, scale="e8m0"),
    "mxfp4": OperandFormat(element="e2m1", granularity=32, scale="e8m0"),
    "nvfp4": OperandFormat(element="e2m1", granularity=16, scale="nvfp4"),
}
_PRESET_BLOCK = {k: v.granularity for k, v in PRESETS.items()}
_SPEC = re.compile(r"^(?P<base>[a-z0-9]+)(?::(?P<gran>tensor|row|block\d+|\d+))?(?::(?P<scale>[a-z0-9]+))?"
                   r"(?:@(?P<static>[0-9.eE+-]+))?$")


def parse_format(spec: str | OperandFormat) -> OperandFormat:
    """An operand format from its text: a preset (mxfp8, mxfp8e5, mxfp4, nvfp4; `:N` changes the block length) or
    ELEMENT[:tensor|row|blockN[:pow2|fp32|e8m0]], each optionally `@AMAX` for a static scale.

    >>> parse_format("e4m3:row:fp32").describe(), parse_format("nvfp4@1").describe()
    ('e4m3:row:fp32', 'nvfp4@1')
    """
    if isinstance(spec, OperandFormat):
        return spec
    m = _SPEC.match(spec.strip().lower())
    if m is None:
        raise ConfigError(f"Operand format {spec!r}: write a preset ({', '.join(PRESETS)}), or "
                          f"ELEMENT[:tensor|row|blockN[:{'|'.join(SCALES[:3])}]][@AMAX], e.g. e4m3:row:fp32.")
    base, gran, scale, static = m["base"], m["gran"], m["scale"], m["static"]
    granularity = None if gran is None else (gran if gran in ("tensor", "row") else int(gran.removeprefix("block")))
    try:
        static = None if static is None else float(static)
    except ValueError:
        raise ConfigError(f"Operand format {spec!r}: the static amax {static!r} is not a number.") from None
    if base in PRESETS:
        if scale is not None:
            raise ConfigError(f"Operand format {spec!r}: the preset {base} fixes its scale.")
        p = PRESETS[base]
        return OperandFormat(element=p.element, granularity=p.granularity if granularity is None else granularity,
                             scale=p.scale, static=static)
    return OperandFormat(element=base, granularity="tensor" if granularity is None else granularity,
                         scale=scale or "pow2", static=static)


def _granules(x, fmt: OperandFormat, axis: int):
    """x moved so the contraction axis is last and cut into [..., n_granules, length], and how to undo it."""
    import torch

    x = x.movedim(axis, -1)
    n = x.shape[-1]
    if fmt.granularity == "tensor":
        flat = x.reshape(1, -1)
        return flat, lambda y: y.reshape(x.shape).movedim(-1, axis)
    length = n if fmt.granularity == "row" else fmt.granularity
    pad = (-n) % length
    xp = torch.nn.functional.pad(x, (0, pad)) if pad else x
    g = xp.reshape(*xp.shape[:-1], -1, length)
    return g, lambda y: y.reshape(xp.shape)[..., :n].movedim(-1, axis)


def quantize(x, fmt: OperandFormat | str, *, axis: int = -1, amax_from=None):
    """The values a kernel multiplies for operand `x` in format `fmt`, granules along `axis` (module doc).

    `amax_from`: a tensor shaped like `x` whose granule maxima set the scales instead of x's own (the gate's
    bound of where a kernel computing the operand in another precision can land; see harness.numerics.
    _emulate). A NaN in a granule makes that granule NaN (its amax is NaN)."""
    import torch

    fmt = parse_format(fmt)
    f = element_format(fmt.element)
    g, back = _granules(x, fmt, axis)
    src = g if amax_from is None else _granules(amax_from, fmt, axis)[0]
    amax = src.abs().amax(dim=-1, keepdim=True)
    amax = amax.masked_fill(torch.isnan(src).any(-1, keepdim=True), math.nan)
    if fmt.static is not None and fmt.scale != "nvfp4":  # nvfp4: static is the per-tensor amax, blocks stay dynamic
        amax = torch.full_like(amax, fmt.static)
    if fmt.scale == "nvfp4":
        out = _nvfp4(g, amax, fmt, src_all=(src if amax_from is not None else g))
        return back(out)
    # A kernel holds the operand in fp32 registers (bf16 inputs are exact there; a rotated or smoothed operand is
    # rounded to fp32 first) and scales it in fp32: so does the emulation, then rounds to the element format.
    v = g.to(torch.float32)
    bad = ~torch.isfinite(amax)
    if fmt.scale == "e8m0":
        descale = torch.exp2(e8m0_exponent(amax, f))  # values stored as x / 2^X, multiplied back by 2^X
        return back((round_to(v / descale.to(torch.float32), f).to(x.dtype) * descale.to(x.dtype)))
    if fmt.scale == "pow2":
        _, e = torch.frexp(f.max_finite / amax)  # 2^floor(log2(max / amax)), exact (frexp, not log2)
        scale = torch.ldexp(torch.ones_like(amax), (e - 1).to(torch.int32))
    else:  # fp32: max / amax computed in fp32, as a kernel computes it (a true division: torch's scalar / tensor
        # multiplies by a reciprocal, which is not correctly rounded)
        a32 = amax.to(torch.float32)
        scale = torch.full_like(a32, f.max_finite).div(a32).to(amax.dtype)
    scale = torch.where(amax > 0, scale, torch.ones_like(scale))  # an all-zero granule: zeros under any scale
    scale = torch.where(bad, torch.full_like(scale, math.nan), scale)  # a NaN or Inf in it: the granule is NaN
    s32 = scale.to(torch.float32)
    return back(round_to(v * s32, f).to(x.dtype) / scale.to(x.dtype))


def _nvfp4(g, amax_block, fmt: OperandFormat, *, src_all):
    """NVFP4 (module doc): fp32 arithmetic as the kernels do it, then the values in g's dtype."""
    import torch

    f32 = torch.float32
    if fmt.static is not None:
        amax_t = torch.tensor(fmt.static, dtype=f32, device=g.device)
    else:
        amax_t = src_all.abs().amax().to(f32)
        if bool(torch.isnan(src_all).any()):
            amax_t = torch.tensor(math.nan, dtype=f32, device=g.device)
    # true divisions in fp32 (torch's scalar / tensor multiplies by a reciprocal, which is not correctly rounded)
    s_enc = torch.where(amax_t > 0, torch.full_like(amax_t, NVFP4_BLOCK_MAX * 6.0).div(amax_t), torch.ones_like(amax_t))
    a32 = amax_block.to(f32)
    s_dec = round_to(a32.div(torch.full_like(a32, 6.0)) * s_enc, "e4m3")  # the stored E4M3 block scale, <= 448
    # elements: e2m1(x * s_enc / s_dec) (TensorRT-LLM: x * reciprocal(s_dec * reciprocal(s_enc))); 0 where s_dec = 0
    enc = torch.where(s_dec > 0, s_enc / s_dec, torch.zeros_like(s_dec))
    q = round_to((g.to(f32) * enc), "e2m1").to(g.dtype)
    return q * s_dec.to(g.dtype) / s_enc.to(g.dtype)

