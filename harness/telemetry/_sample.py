from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

__all__ = ["Sample", "Sampler", "SAMPLE_FIELDS"]


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One telemetry reading. Units are in the names; None means "not available from this backend".

    `t_ns` is the host's `time.monotonic_ns()` when the reading was taken (for buffered readings, the
    driver's timestamp mapped onto that clock). `source` says which path produced it: "poll" (the
    sampler thread's periodic read), "power_buffer" (NVML's driver-side power samples), "gpm" (NVML GPM
    utilisation over the interval ending at t_ns), "replay", "drain" (a failed drain), "stale" (amdsmi
    returned the same firmware reading again: no values, kept so the timeline shows it). A failed read is a Sample with `error` set
    and every value None, so gaps are visible rather than silently skipped.
    """

    t_ns: int
    source: str = "poll"
    # Clock of record: the SM clock; on chiplet GPUs the slowest chiplet; on a CPU the mean core frequency.
    sm_clock_mhz: float | None = None
    chiplet_clocks_mhz: tuple[float, ...] | None = None
    mem_clock_mhz: float | None = None
    power_w: float | None = None  # instantaneous board power
    power_avg_w: float | None = None  # the driver's averaged power (1 s window on NVIDIA Ampere+)
    energy_j: float | None = None  # cumulative energy counter (NVML: read every 0.1 s, None in between)
    temp_c: float | None = None
    mem_temp_c: float | None = None
    reasons: int | None = None  # vendor limiter / clock-event bitmask
    reason_names: str | None = None  # decoded, "|"-joined
    power_limited_ns: int | None = None  # cumulative time the power limit held the clock down
    thermal_limited_ns: int | None = None  # cumulative time a thermal limit held the clock down
    sm_util_pct: float | None = None
    tensor_util_pct: float | None = None
    fp32_util_pct: float | None = None
    error: str | None = None


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Sample))


@runtime_checkable
class Sampler(Protocol):
    """A telemetry backend. Created cheaply; touches the vendor library only in `open()`.

    The sampler thread calls `read()` at a fixed period from one thread, and `drain()` at a slower
    period for readings the driver buffers itself. `describe()` says what works and what does not,
    in words a user can act on (used by `bench doctor` and stored with each run).
    """

    name: str

    def open(self) -> None: ...

    def read(self) -> Sample: ...

    def drain(self) -> list[Sample]: ...

    def describe(self) -> dict[str, str]: ...

    def close(self) -> None: ...
