"""From raw chunks, telemetry samples and probe readings to the numbers of one measurement.

Pure functions: every figure the harness prints for a measurement is computed here from rows that
are stored beside it, so it can be recomputed from the Parquet files.
"""

from __future__ import annotations

from typing import Sequence

from harness.analysis._chiplets import chiplet_spread
from harness.analysis._stats import cv, median
from harness.telemetry import (
    AMD_POWER_REASONS,
    AMD_THERMAL_REASONS,
    POWER_REASONS as _NVML_POWER,
    THERMAL_REASONS as _NVML_THERMAL,
)

__all__ = ["summarize_window", "samples_in", "chunk_clock", "POWER_REASONS", "THERMAL_REASONS"]

# NVML's names and amdsmi's, as harness.telemetry decides them (decided there once, not copied here).
POWER_REASONS: frozenset[str] = _NVML_POWER | AMD_POWER_REASONS
THERMAL_REASONS: frozenset[str] = _NVML_THERMAL | AMD_THERMAL_REASONS


def samples_in(samples: Sequence, t0: int, t1: int) -> list:
    return [s for s in samples if t0 <= s.t_ns <= t1]


def _poll(samples):
    return [s for s in samples if s.source in ("poll", "replay") and s.error is None]


def chunk_clock(samples: Sequence, t0: int, t1: int) -> float | None:
    return median([s.sm_clock_mhz for s in _poll(samples_in(samples, t0, t1)) if s.sm_clock_mhz is not None])


def _counter_delta(samples, attr: str):
    """Difference of a cumulative counter between the first and last sample that has it."""
    vals = [(s.t_ns, getattr(s, attr)) for s in samples if getattr(s, attr) is not None]
    if len(vals) < 2:
        return None, None
    (t0, v0), (t1, v1) = vals[0], vals[-1]
    return v1 - v0, t1 - t0


def summarize_window(
    *,
    window_chunks: Sequence,
    samples: Sequence,
    probes: Sequence,
    flops_per_launch: float | None,
    sm_count: int | None,
) -> dict:
    """Measurement figures over the timed window. Chunks have t_start_ns, t_end_ns, device_ns, launches.
    `flops_per_launch` None (a model's forward: no one attention shape's FLOPs) leaves the FLOP figures None."""
    if not window_chunks:
        raise ValueError("a window needs at least one chunk")
    t0 = window_chunks[0].t_start_ns
    t1 = window_chunks[-1].t_end_ns
    device_ns = sum(c.device_ns for c in window_chunks)
    launches = sum(c.launches for c in window_chunks)
    time_ns = device_ns / launches
    per_chunk = [c.device_ns / c.launches for c in window_chunks]
    inside = samples_in(samples, t0, t1)
    polls = _poll(inside)
    sm_clock = median([s.sm_clock_mhz for s in polls if s.sm_clock_mhz is not None])
    powers = [s.power_w for s in inside if s.error is None and s.power_w is not None]
    power = sum(powers) / len(powers) if powers else None
    energy, energy_span = _counter_delta(polls, "energy_j")
    pl_ns, pl_span = _counter_delta(polls, "power_limited_ns")
    th_ns, th_span = _counter_delta(polls, "thermal_limited_ns")
    masks = [s.reasons for s in polls if s.reasons is not None]
    mask_or = 0
    for m in masks:
        mask_or |= m
    names: dict[str, int] = {}
    for s in polls:
        for n in (s.reason_names or "").split("|"):
            if n:
                names[n] = names.get(n, 0) + 1
    reason_names = "|".join(f"{n}:{c / len(polls):.2f}" for n, c in sorted(names.items(), key=lambda kv: -kv[1])) if polls else None
    if pl_ns is None and polls and masks:
        # Without the cumulative counter, the share of samples showing a power reason is the estimate.
        pl_frac = sum(1 for s in polls if set((s.reason_names or "").split("|")) & POWER_REASONS) / len(polls)
    else:
        pl_frac = pl_ns / pl_span if pl_ns is not None and pl_span else None
    th_frac = th_ns / th_span if th_ns is not None and th_span else None
    # The driver advances these counters in steps, so a fully limited window can read a little over 1.
    pl_frac = min(pl_frac, 1.0) if pl_frac is not None else None
    th_frac = min(th_frac, 1.0) if th_frac is not None else None
    inband = median([p.clock_mhz for p in probes if t0 <= p.t_ns <= t1])
    gpm = [s for s in inside if s.source == "gpm" and s.error is None]
    cyc_nvml = time_ns * sm_clock * 1e-3 if sm_clock else None
    cyc_inband = time_ns * inband * 1e-3 if inband else None
    cycles, clock_used = (cyc_inband, "inband") if cyc_inband else ((cyc_nvml, "nvml") if cyc_nvml else (None, "none"))
    seconds = device_ns * 1e-9
    tflops = flops_per_launch / time_ns * 1e-3 if flops_per_launch is not None else None
    if energy is not None and energy_span:
        # The counter is read at poll times, not at the window's edges: scale its rate to the window.
        energy = energy * (t1 - t0) / energy_span
    energy_per_launch = energy / launches if energy is not None and energy > 0 else None
    return {
        "window_start_ns": t0,
        "window_end_ns": t1,
        "window_s": (t1 - t0) * 1e-9,
        "window_launches": launches,
        "time_ns": time_ns,
        "chunk_time_cv": cv(per_chunk),
        "duty_cycle": device_ns / (t1 - t0) if t1 > t0 else None,
        "sm_clock_mhz": sm_clock,
        "inband_clock_mhz": inband,
        "inband_to_nvml": inband / sm_clock if inband and sm_clock else None,
        "cycles_clock": clock_used,
        "cycles_per_launch": cycles,
        "cycles_per_launch_nvml": cyc_nvml,
        "cycles_per_launch_inband": cyc_inband,
        "power_w": power,
        "energy_j": energy,
        "energy_per_launch_j": energy_per_launch,
        "energy_per_launch_from_power_j": power * seconds / launches if power is not None else None,
        "temp_max_c": max((s.temp_c for s in polls if s.temp_c is not None), default=None),
        "power_limited_frac": pl_frac,
        "thermal_limited_frac": th_frac,
        "reasons_mask": mask_or if masks else None,
        "reason_names": reason_names,
        "tflops": tflops,
        "tflop_per_j": tflops / power if power and tflops is not None else None,
        "flop_per_cycle_per_sm": (flops_per_launch / cycles / sm_count
                                  if cycles and sm_count and flops_per_launch is not None else None),
        "sm_util_pct": median([s.sm_util_pct for s in gpm]),
        "tensor_util_pct": median([s.tensor_util_pct for s in gpm]),
        "fp32_util_pct": median([s.fp32_util_pct for s in gpm]),
        "samples_in_window": len(inside),
        "sample_errors_in_window": sum(1 for s in inside if s.error is not None),
        "probes_in_window": sum(1 for p in probes if t0 <= p.t_ns <= t1),
        **{k: v for k, v in chiplet_spread(polls).items() if k != "chiplet_clocks_mhz"},
    }
