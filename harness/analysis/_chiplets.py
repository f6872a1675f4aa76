"""Per-chiplet clocks: how far apart the chiplets ran, and which one was slowest.

On a chiplet GPU (MI300/MI355X: eight XCDs) the slowest chiplet sets the kernel's time, so the clock of
record (`Sample.sm_clock_mhz`) is the minimum; this says how much slower that chiplet was than the
others, and whether it was always the same one. Pure: a function of the stored samples.
"""

from __future__ import annotations

from typing import Sequence

from harness.analysis._stats import median

__all__ = ["chiplet_spread"]


def chiplet_spread(samples: Sequence) -> dict:
    """Spread of `chiplet_clocks_mhz` over the poll samples given (pass one window's samples).

    - `chiplet_count`: the most chiplets any sample reported.
    - `chiplet_spread_mhz`: median over samples of (fastest - slowest chiplet).
    - `chiplet_spread_frac`: median of (fastest - slowest) / fastest.
    - `slowest_chiplet`: the position in `chiplet_clocks_mhz` that was slowest in most samples (ties
      within a sample go to the lower position, ties in the count too). Positions are XCD numbers where
      the backend skipped no slot in the middle (see `AmdsmiSampler`).
    - `slowest_chiplet_share`: the share of samples in which it was the slowest.
    - `chiplet_clocks_mhz`: the median clock of each position, in order.

    Every value is None when no error-free poll sample has two or more chiplet clocks (NVIDIA, the
    scalar-clock fallback, telemetry off).

    >>> from types import SimpleNamespace as S
    >>> r = chiplet_spread([S(source="poll", error=None, chiplet_clocks_mhz=(2400.0, 2310.0, 2390.0)),
    ...                     S(source="poll", error=None, chiplet_clocks_mhz=(2400.0, 2330.0, 2300.0))])
    >>> r["chiplet_spread_mhz"], r["slowest_chiplet"], r["slowest_chiplet_share"]
    (95.0, 1, 0.5)
    """
    rows = [tuple(s.chiplet_clocks_mhz) for s in samples
            if getattr(s, "source", "poll") in ("poll", "replay") and getattr(s, "error", None) is None
            and s.chiplet_clocks_mhz is not None and len(s.chiplet_clocks_mhz) >= 2]
    if not rows:
        return {"chiplet_count": None, "chiplet_spread_mhz": None, "chiplet_spread_frac": None, "slowest_chiplet": None,
                "slowest_chiplet_share": None, "chiplet_clocks_mhz": None}
    count = max(len(r) for r in rows)
    slowest = [min(range(len(r)), key=lambda i, r=r: (r[i], i)) for r in rows]
    tally = [slowest.count(i) for i in range(count)]
    top = max(range(count), key=lambda i: (tally[i], -i))
    return {
        "chiplet_count": count,
        "chiplet_spread_mhz": median([max(r) - min(r) for r in rows]),
        "chiplet_spread_frac": median([(max(r) - min(r)) / max(r) for r in rows if max(r) > 0]),
        "slowest_chiplet": top,
        "slowest_chiplet_share": tally[top] / len(rows),
        "chiplet_clocks_mhz": tuple(median([r[i] for r in rows if i < len(r)]) for i in range(count)),
    }
