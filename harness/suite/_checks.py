"""Checks every option of the suite layer shares: a seed torch can take, and sizes and times above 0."""

from __future__ import annotations

import math

from harness.errors import ConfigError

__all__ = ["SEED_LIMIT", "check_seed", "positive"]


# Seeds torch's generators take (and the gate adds 7919 to one): 64-bit signed, with room to spare.
SEED_LIMIT = 2**62


def check_seed(seed: int) -> int:
    """--seed as torch's generators can take it, refused by flag otherwise (2**70 was an internal error)."""
    if not -SEED_LIMIT < int(seed) < SEED_LIMIT:
        raise ConfigError(f"--seed {seed}: a seed must lie within +-2**62 (torch's generators are 64-bit). Pick a "
                          f"smaller one.")
    return int(seed)


def positive(value, flag: str, *, allow_zero: bool = False):
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{flag} {value!r}: must be a finite number of seconds, milliseconds or items, as the "
                          f"option says. Leave the option out for its default.")
    if value < 0 or (value == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{flag} {value!r}: must be {need}. Leave the option out for its default.")
    return value
