"""What the pytest plugin prints: each test's line in the `sustained` summary, and `--sustained-compare-fail`: each
test's repeats against the saved benchmark's, judged by the one interval procedure
(`harness.analysis.comparison_row`) and gate (`gate_outcome`), and rendered as `bench compare` renders a row.

The rows are what the sustained fixture stores in pytest-benchmark's `extra_info["repeats_rows"]` (one dict per
repeat: time, clocks, power, limiter fields).
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis import (
    Comparison,
    comparison_row,
    gate_outcome,
    limiter_label,
    median,
    row_sentence,
    rule_for,
    run_caveats,
)

__all__ = ["REPEAT_FIELDS", "fixture_extra_info", "saved_commit_text", "saved_comparison", "summary_line"]

# What --sustained-compare-fail (and `bench compare`) judge: one row per repeat, in repeat order, in extra_info.
REPEAT_FIELDS = ("repeat", "status", "time_ns", "inband_clock_mhz", "sm_clock_mhz", "power_w", "power_limited_frac",
                  "thermal_limited_frac", "reason_names")



def saved_comparison(lines: list, saved: dict, *, rule, threshold: float, unresolved: str = "fail",
                     same_code: str = "") -> tuple[list[str], str, bool]:
    """(one sentence per test, the gate's line, failed) for `lines` [(nodeid, extra_info)] against `saved`
    {nodeid: saved benchmark}, by the rules of every gate (`harness.analysis.gate_outcome`): the saved session and
    this one are separate runs (their intervals include the between-run variance), CPU timings follow the CPU
    rule, and `same_code` (the two sessions ran one commit) makes it an A/A check that never fails. A gate that
    judged nothing fails: no saved per-repeat rows, or no test with an interval to judge by."""
    rows, sentences = [], []
    caveats_all: list[str] = []
    between, source = 0.0, ""
    for nodeid, extra in lines:
        old = (saved.get(nodeid) or {}).get("extra_info") or {}
        if not old.get("repeats_rows"):
            sentences.append(f"{nodeid}: not compared (the saved benchmark has no per-repeat rows: saved by an older "
                             f"harness, or not by the sustained fixture)")
            continue
        caveats = tuple(dict.fromkeys((*old.get("caveats", ()), *extra.get("caveats", ()))))
        caveats_all += caveats
        row_rule = rule_for(rule, caveats)
        # Separate sessions: the between-run variance holds for the same code too (an A/A check shows it).
        between, source = row_rule.between_runs(extra.get("device") or old.get("device"))
        row = comparison_row(kernel=extra.get("kernel") or nodeid, input_a=old.get("input") or "saved",
                             input_b=extra.get("input") or "now", rows_a=old["repeats_rows"],
                             rows_b=extra["repeats_rows"], rule=row_rule, caveats=caveats, between_cv=between)
        rows.append(row)
        sentences.append(f"{nodeid}: {row_sentence(row, threshold_source=row_rule.threshold_source)}")
    cmp = Comparison(name_a="saved", name_b="now", rule=rule_for(rule, tuple(dict.fromkeys(caveats_all))),
                     rows=tuple(rows), same_code=same_code, between_cv=between, between_source=source)
    if not rows:
        return sentences, ("NOT RESOLVED: nothing judged by --sustained-compare-fail: no test had a saved benchmark "
                           "with per-repeat rows"), True
    outcome = gate_outcome(cmp, threshold=threshold, unresolved=unresolved)
    return sentences, outcome.line, outcome.exit_code != 0


def saved_commit_text(now: dict, saved: list[dict]) -> str:
    """Why the saved benchmarks and this session are the same code, else "": pytest-benchmark's commit_info of this
    session (`now`) and of every saved file compared, all one clean commit.

    >>> saved_commit_text({"id": "abc123", "dirty": False}, [{"id": "abc123", "dirty": False}])[:60]
    'the saved benchmarks and this session ran the same commit (a'
    >>> saved_commit_text({"id": "abc123", "dirty": True}, [{"id": "abc123", "dirty": False}])
    ''
    """
    infos = [now, *saved]
    if not saved or any(i.get("dirty") or not i.get("id") for i in infos) or len({i["id"] for i in infos}) != 1:
        return ""
    return (f"the saved benchmarks and this session ran the same commit ({now['id'][:12]}): an A/A check of the "
            f"noise, and no gate fails on it")


def _fmt(value, spec: str, unit: str = "") -> str:
    return f"-{unit}" if value is None else f"{value:{spec}}{unit}"


def summary_line(nodeid: str, extra: dict) -> str:
    """One test's sustained figures on one line (never wrapped: pytest writes it as is)."""
    clock = extra.get("clock_mhz")
    return (f"{nodeid}: {_fmt(extra.get('time_ns') and extra['time_ns'] / 1e6, '.4f', ' ms')}, clock "
            f"{_fmt(clock, '.0f', ' MHz')} ({extra.get('clock_source')}; SMI {_fmt(extra.get('sm_clock_mhz'), '.0f')}, "
            f"in-band {_fmt(extra.get('inband_clock_mhz'), '.0f')}), "
            f"{_fmt(extra.get('cycles_per_launch') and extra['cycles_per_launch'] / 1e6, '.3f', ' Mcycles')}, "
            f"{_fmt(extra.get('power_w'), '.0f', ' W')}, limiter {extra.get('limiter') or '-'}, "
            f"{extra.get('protocol')}, run {extra.get('harness_run_dir')}")


def fixture_extra_info(rows: list[dict], info: dict, spec, kernel, run_dir: Path, protocol, quick: bool, *,
                       stats_note: str) -> dict:
    """The sustained figures pytest-benchmark has no field for: medians over repeats, plus provenance."""
    def med(key):
        return median([r.get(key) for r in rows])

    inband, nvml = med("inband_clock_mhz"), med("sm_clock_mhz")
    return {
        "harness_run_dir": str(run_dir), "kernel": kernel.name, "kernel_source": kernel.source,
        "input": spec.label, "shape": spec.shape.label(), "dtype": spec.dtype, "device": info.get("device_kind"),
        "device_name": info.get("device_name"), "telemetry": info.get("telemetry_backend"),
        "protocol": "quick (not sustained figures)" if quick else "sustained", "repeats": len(rows),
        "window_s": protocol.window_s, "time_ns": med("time_ns"),
        "sm_clock_mhz": nvml, "inband_clock_mhz": inband,
        "clock_mhz": inband if inband is not None else nvml,
        "clock_source": "inband" if inband is not None else ("nvml" if nvml is not None else "none"),
        "cycles_per_launch": med("cycles_per_launch"), "cycles_clock": rows[0].get("cycles_clock") or "none",
        "power_w": med("power_w"), "energy_per_launch_j": med("energy_per_launch_j"), "temp_max_c": med("temp_max_c"),
        "limiter": limiter_label(rows, max_clock_mhz=info.get("max_sm_clock_mhz")),
        "power_limited_frac": med("power_limited_frac"), "settled_after_s": med("settled_after_s"),
        "unsettled_repeats": sum(r["status"] == "unsettled" for r in rows), "tflops": med("tflops"),
        "stats_note": stats_note, "caveats": list(run_caveats(info)),
        # What --sustained-compare-fail (and `bench compare`) judge: one row per repeat, in repeat order.
        "repeats_rows": [{k: r.get(k) for k in REPEAT_FIELDS} for r in sorted(rows, key=lambda r: r["repeat"])],
    }
