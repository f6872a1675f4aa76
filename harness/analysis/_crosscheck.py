"""Which clock makes cycles invariant: ncu's counted cycles against sustained time x each clock.

ncu counts `sm__cycles_elapsed.max` per launch (one warm launch, clocks as found). The sustained window
gives time per launch and two clocks: the in-band probe's (SM cycles counted per ns) and NVML's SM clock.
Cycles per launch do not depend on the clock a kernel ran at when the clock is the one the SMs count, so
time x that clock should equal ncu's count even though ncu's launch ran at another clock. On the H200 the
in-band product does (within ~2 %) and the NVML product reads ~9-13 % high: NVML's SM clock overstates the
clock the SMs run at under load. Pure functions of stored rows; the report and the JSON export call them.

>>> rows = clock_crosscheck([{"kernel": "k", "input_label": "x", "status": "ok", "time_ns": 4e6,
...     "inband_clock_mhz": 1500.0, "sm_clock_mhz": 1650.0}],
...     [{"kernel": "k", "input_label": "x", "achieved_cycles": 6.0e6, "sm_clock_mhz": 1700.0}])
>>> round(rows[0]["inband_vs_ncu"], 3), round(rows[0]["nvml_vs_ncu"], 3), crosscheck_verdict(rows)[0]
(1.0, 1.1, 'inband')
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis._compare import SUSTAINED_STATUSES
from harness.analysis._decompose import geomean

__all__ = ["CROSSCHECK_TOLERANCE", "clock_crosscheck", "crosscheck_verdict"]

CROSSCHECK_TOLERANCE = 0.03  # a clock "makes cycles invariant" when its product is within 3 % of ncu's count


def clock_crosscheck(measurements: Sequence[dict], traces: Sequence[dict]) -> list[dict]:
    """One dict per kernel x input with an ncu trace and sustained rows: ncu cycles, time x in-band, time x NVML,
    their ratios to ncu (1.0 = the same count) and the clocks involved (geometric means over repeats)."""
    out = []
    for t in traces:
        ncu = t.get("achieved_cycles")
        rows = [m for m in measurements if m["kernel"] == t["kernel"] and m["input_label"] == t["input_label"]
                and m.get("status") in SUSTAINED_STATUSES and m.get("time_ns")]
        if not ncu or not rows:
            continue
        time_ns = geomean([m["time_ns"] for m in rows])
        inband = [m["inband_clock_mhz"] for m in rows if m.get("inband_clock_mhz")]
        nvml = [m["sm_clock_mhz"] for m in rows if m.get("sm_clock_mhz")]
        c_in = time_ns * geomean(inband) * 1e-3 if len(inband) == len(rows) else None
        c_nv = time_ns * geomean(nvml) * 1e-3 if len(nvml) == len(rows) else None
        out.append({
            "kernel": t["kernel"], "input_label": t["input_label"], "ncu_cycles": ncu,
            "ncu_clock_mhz": t.get("sm_clock_mhz"), "time_ns": time_ns, "repeats": len(rows),
            "inband_clock_mhz": geomean(inband) if c_in else None, "nvml_clock_mhz": geomean(nvml) if c_nv else None,
            "cycles_inband": c_in, "cycles_nvml": c_nv,
            "inband_vs_ncu": c_in / ncu if c_in else None, "nvml_vs_ncu": c_nv / ncu if c_nv else None,
        })
    return out


def crosscheck_verdict(rows: Sequence[dict], *, tolerance: float = CROSSCHECK_TOLERANCE) -> tuple[str, str]:
    """("inband" | "nvml" | "neither" | "none", one sentence) for the rows of `clock_crosscheck`."""
    if not rows:
        return "none", "No kernel has both an ncu trace and sustained rows: nothing to cross-check."

    def fits(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return bool(vals) and len(vals) == len(rows) and all(abs(v - 1) <= tolerance for v in vals), vals

    ok_in, v_in = fits("inband_vs_ncu")
    ok_nv, v_nv = fits("nvml_vs_ncu")
    span = lambda vs: f"{(min(vs) - 1) * 100:+.1f} to {(max(vs) - 1) * 100:+.1f} %"
    clocks = [r["ncu_clock_mhz"] for r in rows if r.get("ncu_clock_mhz")] + [
        r["inband_clock_mhz"] for r in rows if r.get("inband_clock_mhz")]
    over = f" over {min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else ""
    text = (f"time x in-band clock vs ncu's counted cycles: {span(v_in)}" if v_in else "no in-band readings") + (
        f"; time x NVML clock: {span(v_nv)}" if v_nv else "; no NVML readings") + f" ({len(rows)} kernel(s){over}). "
    if ok_in and not ok_nv:
        return "inband", text + (f"The in-band clock makes cycles invariant (within {tolerance:.0%}); NVML's SM "
                                 f"clock reads above the clock the SMs count under load, so time x NVML overstates "
                                 f"cycles. The decomposition uses the in-band clock.")
    if ok_nv and not ok_in:
        return "nvml", text + f"NVML's clock makes cycles invariant here (within {tolerance:.0%}); the in-band one does not."
    if ok_in and ok_nv:
        return "inband", text + "Both clocks agree with ncu within the tolerance; the gap between them is small here."
    return "neither", text + (f"Neither product stays within {tolerance:.0%} of ncu: the profiled launch may differ "
                              f"from the sustained ones (shape, input, a kernel that changes with the clock).")
