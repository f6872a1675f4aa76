from __future__ import annotations

import math

from harness.errors import InputError
from harness.inputs._stress import STRESS_KINDS, stress

__all__ = ["SYNTHETIC_SOURCES", "synthesize", "parse_synthetic"]

# (kind, the name of its number or None when it takes none, what it draws): the one list of synthetic
# kinds, which both the parser and every listing of --input's sources read.
_KINDS = (
    ("gaussian", "STD", "normal values with standard deviation STD (the kernel-benchmark custom is 0.1)"),
    ("zeros", None, "all zeros: the fewest switching bits, the highest clock"),
    ("constant", "VALUE", "every element VALUE"),
    ("randbits", None, "uniform random bit patterns restricted to finite values of the dtype"),
)
_KINDS += tuple((kind, number, text) for kind, (number, _, text) in STRESS_KINDS.items())
_TAKES_NUMBER = {kind: number is not None for kind, number, _ in _KINDS}
_DEFAULT = {"gaussian": 1.0, **{kind: default for kind, (_, default, _) in STRESS_KINDS.items()}}
SYNTHETIC_SOURCES = {f"{kind}:{number}" if number else kind: text for kind, number, text in _KINDS}


def parse_synthetic(source: str, *, flag: str = "--input") -> tuple[str, float | None]:
    """(kind, its number) of a synthetic source, checked without allocating anything."""
    kind, _, arg = source.partition(":")
    if _TAKES_NUMBER.get(kind):
        what = {"gaussian": "standard deviation", "constant": "constant"}.get(kind, STRESS_KINDS.get(kind, ("",))[0])
        try:
            value = float(arg) if arg or kind == "constant" else _DEFAULT[kind]
        except ValueError:
            raise InputError(f"{flag} {source!r}: the {what} {arg!r} is not a number.") from None
        if kind == "gaussian" and not value >= 0:  # NaN too; a non-finite constant is refused per input, later
            raise InputError(f"{flag} {source!r}: the standard deviation must be >= 0.")
        if kind in STRESS_KINDS and not (math.isfinite(value) and value > (2 if kind == "heavytail" else 0)):
            raise InputError(f"{flag} {source!r}: {what} must be a finite number above "
                             f"{2 if kind == 'heavytail' else 0} (heavytail: NU > 2 has a variance to scale by).")
        return kind, value
    if kind in _TAKES_NUMBER and not arg:
        return kind, None
    known = "; ".join(f"{k}: {v}" for k, v in SYNTHETIC_SOURCES.items())
    raise InputError(
        f"{flag} {source!r} is not an input source. Synthetic sources are {known}; captured activations are "
        f"'capture:PATH' (see `bench capture`), or --model NAME."
    )


def synthesize(source: str, shape: tuple[int, ...], *, dtype, device, generator, role: str = "q", group: int = 1):
    """One tensor of a synthetic distribution, drawn on the CPU in fp32 for device-independent values. `role` ("q",
    "k" or "v") and `group` (query heads per KV head) matter to the stress sources only (harness.inputs._stress)."""
    import torch

    kind, value = parse_synthetic(source, flag="Input source")
    if kind in STRESS_KINDS:
        t = stress(kind, value, shape, role=role, group=group, generator=generator)
    elif kind == "gaussian":
        t = torch.randn(shape, generator=generator, dtype=torch.float32) * value
    elif kind == "zeros":
        t = torch.zeros(shape, dtype=torch.float32)
    elif kind == "constant":
        t = torch.full(shape, value, dtype=torch.float32)
    elif kind == "randbits":
        # Random bits in the target format, with non-finite patterns replaced: the most switching the
        # dtype allows without poisoning softmax.
        probe = torch.empty(0, dtype=dtype)
        nbytes = probe.element_size()
        int_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[nbytes]
        bits = torch.randint(
            torch.iinfo(int_dtype).min, torch.iinfo(int_dtype).max, shape, generator=generator, dtype=int_dtype
        )
        t = bits.view(dtype).to(torch.float32)
        t = torch.where(torch.isfinite(t), t, torch.zeros_like(t)).clamp(-1e4, 1e4)
    return t.to(device=device, dtype=dtype)
