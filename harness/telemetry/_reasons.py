"""NVML clock-event reasons: the bitmask NVML reports for why the SM clock is below its maximum.

Several bits can be set at once. Which of them count as a *power* or a *thermal* limit is decided
here, once, so the report and the analysis never disagree:

- power: `sw_power_cap` (the board power limit) and `hw_power_brake` (an external power-brake signal).
- thermal: `sw_thermal` and `hw_thermal`.
- `hw_slowdown` is in neither set. NVML sets it whenever the hardware itself halves the clock, for a
  thermal trip, a power brake, or a fast over-current trigger; the first two have their own bits
  (which land in the sets above), so counting `hw_slowdown` too would double-count, and on its own it
  does not say which limit acted. It is reported by name and left unclassified.
- `gpu_idle`, `applications_clocks`, `sync_boost` and `display_clock` are not limits of the kind this
  harness cares about (idle is expected between runs; the others are settings).

>>> decode_nvml_reasons(0x24)
('sw_power_cap', 'sw_thermal')
>>> is_power_limited(0x4), is_thermal_limited(0x4)
(True, False)
"""

from __future__ import annotations

__all__ = [
    "NVML_REASONS",
    "POWER_REASONS",
    "THERMAL_REASONS",
    "decode_nvml_reasons",
    "is_power_limited",
    "is_thermal_limited",
    "join_reason_names",
]

NVML_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clock",
}

POWER_REASONS: frozenset[str] = frozenset({"sw_power_cap", "hw_power_brake"})
THERMAL_REASONS: frozenset[str] = frozenset({"sw_thermal", "hw_thermal"})

_POWER_MASK = sum(bit for bit, name in NVML_REASONS.items() if name in POWER_REASONS)
_THERMAL_MASK = sum(bit for bit, name in NVML_REASONS.items() if name in THERMAL_REASONS)


def decode_nvml_reasons(mask: int) -> tuple[str, ...]:
    """Names of the bits set in `mask`, lowest bit first; a bit this table does not know becomes
    `"unknown_0x..."` so a newer driver's reason is shown rather than dropped.

    >>> decode_nvml_reasons(0)
    ()
    >>> decode_nvml_reasons(0x201)
    ('gpu_idle', 'unknown_0x200')
    """
    if mask < 0:
        raise ValueError(f"a clock-event reason mask is never negative (got {mask})")
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(NVML_REASONS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return tuple(names)


def join_reason_names(mask: int) -> str:
    """The form stored in `Sample.reason_names`: names joined by "|"; "" when no reason is active."""
    return "|".join(decode_nvml_reasons(mask))


def is_power_limited(mask: int) -> bool:
    """True when a power limit (see `POWER_REASONS`) is holding the clock down."""
    return bool(mask & _POWER_MASK)


def is_thermal_limited(mask: int) -> bool:
    """True when a thermal limit (see `THERMAL_REASONS`) is holding the clock down."""
    return bool(mask & _THERMAL_MASK)
