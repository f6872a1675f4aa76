"""What a burst timing would have reported against the sustained time, per kernel x input.

Reads the run summary's burst vs sustained comparison (A = burst, B = sustained): time B/A > 1 means the
sustained time is longer, so a burst number flatters the kernel by 1 - burst / sustained.
"""

from __future__ import annotations

__all__ = ["burst_gap_rows"]


def burst_gap_rows(summary) -> list[dict]:
    """One dict per kernel x input with both timings: burst and sustained ms, the clocks, and
    `burst_faster_frac` (0.10: a burst timing would have reported 10 % less time than sustained)."""
    cmp = getattr(summary, "burst_vs_sustained", None)
    if cmp is None:
        return []
    out = []
    for r in cmp.rows:
        frac = 1 - r.time_a_ns / r.time_b_ns
        out.append({
            "kernel": r.kernel, "input_label": r.input_a, "burst_ms": r.time_a_ns * 1e-6,
            "sustained_ms": r.time_b_ns * 1e-6, "burst_faster_frac": frac, "repeats_burst": r.repeats_a,
            "repeats_sustained": r.repeats_b, "clock_burst_mhz": r.clock_a_mhz, "clock_sustained_mhz": r.clock_b_mhz,
            "clock_source": r.clock_source,
            "sentence": (f"{r.kernel} on {r.input_a}: a burst timing would have reported "
                         f"{abs(frac) * 100:.1f} % {'faster' if frac >= 0 else 'slower'} than sustained "
                         f"({r.time_a_ns * 1e-6:.4f} vs {r.time_b_ns * 1e-6:.4f} ms)."),
        })
    return out
