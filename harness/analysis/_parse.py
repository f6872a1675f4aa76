"""The comparison commands' option values turned into domain values: a slowdown threshold, input and kernel pairs.

>>> parse_pairs(["gaussian:0.1=gaussian:1"]), parse_threshold("2%")
((('gaussian:0.1', 'gaussian:1'),), 0.02)
"""

from __future__ import annotations

import re
from typing import Sequence

from harness.errors import ConfigError

__all__ = ["parse_kernel_pairs", "parse_pairs", "parse_threshold", "parse_until_ci"]


def parse_threshold(text: str) -> float:
    """`2%` or `0.02` -> 0.02: the slowdown beyond which `bench compare` fails."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise ConfigError(f"--fail-on-slowdown {text!r} is not a percentage; write it like 2% (or 0.02).")
    value = float(m.group(1)) / (100 if m.group(2) else 1)
    if value >= 1 and not m.group(2):
        raise ConfigError(f"--fail-on-slowdown {text!r} reads as {value:.0%}; write 2% or 0.02 for two percent.")
    return value


def parse_pairs(items: Sequence[str], *, flag: str = "--pair-inputs", form: str = "A_LABEL=B_LABEL",
                example: str = "gaussian:0.1=gaussian:1") -> tuple[tuple[str, str], ...]:
    """`A=B` strings -> ((a, b), ...). Labels may contain ':' but not '='."""
    out = []
    for item in items:
        a, sep, b = item.partition("=")
        if not sep or not a or not b or "=" in b:
            raise ConfigError(f"{flag} {item!r} must be {form}, e.g. {example}.")
        out.append((a, b))
    return tuple(out)


def parse_kernel_pairs(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`--pair-kernels A_KERNEL=B_KERNEL` strings -> ((a, b), ...); a kernel against itself is refused."""
    pairs = parse_pairs(items, flag="--pair-kernels", form="A_KERNEL=B_KERNEL", example="sdpa-flash=sdpa-cudnn")
    for a, b in pairs:
        if a == b:
            raise ConfigError(f"--pair-kernels {a}={b} compares a kernel with itself; name two kernels of the run.")
    return pairs


def parse_until_ci(text: str, *, flag: str = "--until-ci") -> float | None:
    """`0.25%` -> 0.0025, `off` -> None: the target half-width of adaptive repeats."""
    if text.strip().lower() == "off":
        return None
    try:
        value = parse_threshold(text)
    except ConfigError:
        raise ConfigError(f"{flag} {text!r} is not a percentage; write it like 0.25% (or off for a fixed "
                          f"number of repeats).") from None
    if not value > 0:
        raise ConfigError(f"{flag} {text!r}: the target half-width must be above 0 (or off).")
    return value
