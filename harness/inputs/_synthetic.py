from __future__ import annotations

from harness.errors import InputError

__all__ = ["SYNTHETIC_SOURCES", "synthesize"]

SYNTHETIC_SOURCES = {
    "gaussian:STD": "normal values with standard deviation STD (the kernel-benchmark custom is 0.1)",
    "zeros": "all zeros: the fewest switching bits, the highest clock",
    "constant:VALUE": "every element VALUE",
    "randbits": "uniform random bit patterns restricted to finite values of the dtype",
}


def synthesize(source: str, shape: tuple[int, ...], *, dtype, device, generator):
    """One tensor of a synthetic distribution, drawn on the CPU in fp32 for device-independent values."""
    import torch

    kind, _, arg = source.partition(":")
    if kind == "gaussian":
        try:
            std = float(arg) if arg else 1.0
        except ValueError:
            raise InputError(f"Input source {source!r}: the standard deviation {arg!r} is not a number.") from None
        t = torch.randn(shape, generator=generator, dtype=torch.float32) * std
    elif kind == "zeros":
        t = torch.zeros(shape, dtype=torch.float32)
    elif kind == "constant":
        try:
            t = torch.full(shape, float(arg), dtype=torch.float32)
        except ValueError:
            raise InputError(f"Input source {source!r}: the constant {arg!r} is not a number.") from None
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
    else:
        known = "; ".join(f"{k}: {v}" for k, v in SYNTHETIC_SOURCES.items())
        raise InputError(
            f"Unknown input source {source!r}. Synthetic sources are {known}; captured activations are "
            f"'capture:PATH' (see `bench capture`)."
        )
    return t.to(device=device, dtype=dtype)
