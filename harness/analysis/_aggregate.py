"""Repeats of one kernel on one input, reduced to the figures of the final table (median and range)."""

from __future__ import annotations

from typing import Iterable

from harness.analysis._stats import median

__all__ = ["aggregate_repeats", "MEDIAN_FIELDS"]

SHAPE_FIELDS = ("dtype", "batch", "heads_q", "heads_kv", "seq_len", "seq_len_kv", "head_dim_qk", "head_dim_v", "causal",
                "window", "page_size", "varlen", "bytes_per_launch", "flops_per_launch")
GATE_FIELDS = ("gate_max_abs_diff", "gate_snr_db", "gate_max_ratio", "gate_rms_ratio", "gate_reference")
MEDIAN_FIELDS = (
    "sm_clock_mhz", "inband_clock_mhz", "inband_to_nvml", "cycles_per_launch", "cycles_per_launch_nvml",
    "cycles_per_launch_inband", "power_w", "energy_per_launch_j", "energy_per_launch_from_power_j", "tflops",
    "tflop_per_j", "flop_per_cycle_per_sm", "power_limited_frac", "thermal_limited_frac", "settled_after_s",
    "duty_cycle", "temp_max_c", "tensor_util_pct", "sm_util_pct", "chiplet_spread_mhz", "chiplet_spread_frac",
)


def aggregate_repeats(rows: Iterable[dict]) -> list[dict]:
    """One dict per (input, kernel) in first-seen order: timed repeats reduced, failures carried through."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["config_index"], r["input_label"], r["kernel"]), []).append(r)
    out = []
    for (config_index, label, kernel), rs in groups.items():
        timed = [r for r in rs if r.get("status") in ("ok", "unsettled") and r.get("time_ns")]
        agg = {"config_index": config_index, "input_label": label, "kernel": kernel, "repeats": len(timed),
               "unsettled": sum(1 for r in timed if r["status"] == "unsettled"),
               "errors": [r["error"] for r in rs if r.get("status") not in ("ok", "unsettled") and r.get("error")],
               # What the figures are of (one configuration: every row of the group has the same), and the
               # gate's numbers (one gate per kernel x input; on a failed gate's row too).
               **{f: rs[0].get(f) for f in SHAPE_FIELDS},
               **{f: next((r.get(f) for r in rs if r.get(f) is not None), None) for f in GATE_FIELDS},
               # Each timed repeat's own time, in repeat order: the medians above, and any interval, come from these.
               "repeat_times_ns": [r["time_ns"] for r in sorted(timed, key=lambda r: r.get("repeat") or 0)]}
        if timed:
            times = [r["time_ns"] for r in timed]
            med = median(times)
            agg.update({
                "time_ns": med, "time_min_ns": min(times), "time_max_ns": max(times),
                # One repeat has no range: "-", never a 0.00 % that reads as perfectly repeatable.
                "time_range_frac": (max(times) - min(times)) / med if med and len(times) > 1 else None,
                "cycles_clock": timed[0].get("cycles_clock"),
                # the workload's least traffic (AttentionShape.bytes_moved) over the median time: bytes/ns = GB/s
                "gb_per_s": agg["bytes_per_launch"] / med if agg.get("bytes_per_launch") and med else None,
            })
            for f in MEDIAN_FIELDS:
                agg[f] = median([r.get(f) for r in timed if r.get(f) is not None])
            names = {}
            for r in timed:
                for part in (r.get("reason_names") or "").split("|"):
                    if part:
                        n, _, share = part.partition(":")
                        names[n] = max(names.get(n, 0.0), float(share or 1))
            slowest = [r.get("slowest_chiplet") for r in timed if r.get("slowest_chiplet") is not None]
            agg["slowest_chiplet"] = max(set(slowest), key=slowest.count) if slowest else None
            agg["limiters"] = ", ".join(n for n, s in sorted(names.items(), key=lambda kv: -kv[1]) if s >= 0.5 and n != "gpu_idle")
        out.append(agg)
    return out
