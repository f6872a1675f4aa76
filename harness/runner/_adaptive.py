"""Adaptive repeats inside one run: each kernel x input until its own interval is as narrow as `until_ci` asks.

Stein's two-stage rule (harness.analysis._interval): the protocol's `repeats` are the pilot; from each kernel's
pilot spread of log time the run takes as many repeats as the narrowest interval needs, at most `max_repeats`.
The number depends on the pilots alone, so the level of every interval computed with the pilot's spread holds.
The target is each kernel's own geometric-mean interval; `bench nightly` sets it from its gate so that tonight's
side of the comparison with the baseline resolves the gate.

>>> more = own_precision(type("P", (), {"until_ci": 0.01, "max_repeats": 6, "repeats": 3})())
>>> rows = [{"kernel": "k", "repeat": i, "time_ns": t, "status": "ok"} for i, t in enumerate((100.0, 104.0, 96.0))]
>>> more(3, rows), more(6, rows)
(True, False)
"""

from __future__ import annotations

import math
from typing import Callable

from harness.analysis import stein_total

__all__ = ["own_precision"]


def own_precision(protocol) -> Callable[[int, list], bool] | None:
    """The run loop's `more_repeats` for a protocol with `until_ci` (None without it)."""
    target = protocol.until_ci
    if target is None:
        return None

    def more(rep: int, rows: list) -> bool:
        need = protocol.repeats
        kernels: dict[tuple, list] = {}  # per configuration and kernel: a group interleaves several inputs
        for r in rows:
            if r.get("status") in ("ok", "unsettled") and r.get("time_ns"):
                kernels.setdefault((r.get("config_index"), r["kernel"]), []).append(r)
        for timed in kernels.values():
            pilot = [math.log(r["time_ns"]) for r in sorted(timed, key=lambda r: r["repeat"])[:protocol.repeats]]
            if len(pilot) >= 2:
                need = max(need, stein_total(pilot, target=target, cap=protocol.max_repeats))
        return rep < need

    return more
