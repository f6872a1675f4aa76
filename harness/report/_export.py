"""The figures of the tables as data: JSON and CSV for `--json PATH` / `--csv PATH` (`-`: stdout).

One document layout for every command (`sustained`, `report`, `compare`, `commits`, `nightly`), declared in
`figures.schema.json` beside this module and versioned by `FIGURES_SCHEMA_VERSION`:

    {"schema": "harness.figures", "schema_version": 3, "harness_version": "0.1.0", "command": "sustained",
     "runs": [{"run_id": ..., "status": ..., "git_commit": ..., "device_name": ..., ...}],
     "tables": {"sustained": [{"input": ..., "kernel": ..., "time_ms": 3.92, "nvml_clock_mhz": 1665.0, ...}]},
     "verdict": null}

Keys carry their unit (`_ms`, `_mhz`, `_w`, `_j`, `_pct`, `_s`); ratios have none. Numbers are full precision,
not the tables' rounded text. The CSV is every table stacked, one header: `table` first, then the union of the
tables' keys in first-seen order (a key a table lacks is an empty cell).

Needs only the standard library: `bench sustained` writes these on GPU machines without polars.

>>> doc = figures_document(command="sustained", runs=[], tables={"sustained": [{"kernel": "k", "time_ms": 1.5}]})
>>> doc["schema"], doc["schema_version"], csv_text(doc).splitlines()
('harness.figures', 3, ['table,kernel,time_ms', 'sustained,k,1.5'])
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

from harness import __version__
from harness.analysis import gate_outcome, shape_text, summarize_run
from harness.report._tables import read_roof_share
from harness.results import read_run, write_text_atomic

__all__ = ["FIGURES_SCHEMA", "FIGURES_SCHEMA_VERSION", "commits_figures", "comparison_figures", "csv_text",
           "figures_document", "gate_figures", "nightly_figures", "provenance", "run_figures", "sustained_figures",
           "write_figures"]

FIGURES_SCHEMA_VERSION = 3  # 2: t intervals (were bootstrap); verdict "unresolved". 3: equivalence (TOST) bounds, the
# estimator judged (skipped mean at look 2), verdicts "slower/faster, within threshold", verdict "unresolved" (exit 6)
FIGURES_SCHEMA = Path(__file__).with_name("figures.schema.json")

_PROVENANCE = ("run_id", "status", "status_detail", "started_at", "finished_at", "command", "harness_version",
               "git_commit", "git_dirty", "host", "device_kind", "device_name", "pci_bus_id", "driver", "runtime",
               "telemetry_backend", "power_limit_w", "max_sm_clock_mhz")


def _scaled(value, scale: float):
    return None if value is None else value * scale


def provenance(info: dict, *, path=None) -> dict:
    """What ran, where and with what code: the run row's identity columns (and where the run is stored)."""
    out = {k: info.get(k) for k in _PROVENANCE}
    out["run_dir"] = None if path is None else str(path)
    return out


def sustained_figures(aggregates: list[dict], *, read_roof=None) -> list[dict]:
    """One row per input x kernel (medians over repeats): the figures of `sustained_tables` / `run_tables`;
    `read_roof` (the run's measured read stream, `harness.profiling.Roof`) adds each row's share of it."""
    rows = []
    for a in aggregates:
        timed = bool(a.get("repeats"))
        share = read_roof_share(a, read_roof)
        rows.append({
            "input": a["input_label"], "kernel": a["kernel"], "config_index": a.get("config_index"),
            "timed": timed, "repeats": a.get("repeats") or 0, "unsettled_repeats": a.get("unsettled") or 0,
            "time_ms": _scaled(a.get("time_ns"), 1e-6), "time_min_ms": _scaled(a.get("time_min_ns"), 1e-6),
            "time_max_ms": _scaled(a.get("time_max_ns"), 1e-6),
            "time_range_pct": _scaled(a.get("time_range_frac"), 100),
            "nvml_clock_mhz": a.get("sm_clock_mhz"), "inband_clock_mhz": a.get("inband_clock_mhz"),
            "inband_to_nvml": a.get("inband_to_nvml"),
            "mcycles_per_launch": _scaled(a.get("cycles_per_launch"), 1e-6), "cycles_clock": a.get("cycles_clock"),
            "settled_after_s": a.get("settled_after_s"), "duty_cycle": a.get("duty_cycle"),
            "board_power_w": a.get("power_w"), "energy_per_launch_j": a.get("energy_per_launch_j"),
            "energy_per_launch_from_power_j": a.get("energy_per_launch_from_power_j"),
            "tflop_per_s": a.get("tflops"), "tflop_per_j": a.get("tflop_per_j"),
            # the traffic: the workload's least bytes per call, GB/s, and the share of the run's read roof
            "bytes_per_launch": a.get("bytes_per_launch"), "gb_per_s": a.get("gb_per_s"),
            "read_roof_pct": _scaled(share, 100), "read_roof_gb_per_s": _scaled(read_roof.value, 1e-9) if share else None,
            "flop_per_cycle_per_sm": a.get("flop_per_cycle_per_sm"),
            "power_limited_pct": _scaled(a.get("power_limited_frac"), 100),
            "thermal_limited_pct": _scaled(a.get("thermal_limited_frac"), 100),
            "temp_max_c": a.get("temp_max_c"), "limiters": a.get("limiters") if "limiters" in a else a.get("limiter"),
            "xcd_spread_mhz": a.get("chiplet_spread_mhz"), "slowest_xcd": a.get("slowest_chiplet"),
            "why_not_timed": None if timed else ("; ".join(a.get("errors") or ()) or "no measurement"),
            # what was timed (S_q is seq_len_q; S_kv falls back to it for self-attention rows of older runs)
            "dtype": a.get("dtype"), "batch": a.get("batch"), "heads_q": a.get("heads_q"), "heads_kv": a.get("heads_kv"),
            "seq_len_q": a.get("seq_len"), "seq_len_kv": a.get("seq_len_kv") or a.get("seq_len"),
            "head_dim_qk": a.get("head_dim_qk"), "head_dim_v": a.get("head_dim_v"), "causal": a.get("causal"),
            "window": a.get("window"), "page_size": a.get("page_size"), "varlen": a.get("varlen"),
            "shape": shape_text(a) if a.get("batch") is not None else None,
            "repeat_times_ms": [t * 1e-6 for t in a.get("repeat_times_ns") or ()],
            **{k: a.get(k) for k in ("gate_max_abs_diff", "gate_snr_db", "gate_max_ratio", "gate_rms_ratio",
                                     "gate_reference")},
        })
    return rows


def _ratio(prefix: str, r) -> dict:
    return {prefix: None if r is None else r.value, f"{prefix}_low": None if r is None else r.low,
            f"{prefix}_high": None if r is None else r.high}


def comparison_figures(cmp) -> list[dict]:
    """One row per kernel x input pair of a `Comparison`: time B/A = cycles B/A x clock A/B, with intervals,
    the interval's method, the threshold the verdict applied and the row's caveats (the verdict is the row's,
    the one the table and the sentence show)."""
    return [{
        "kernel": r.kernel, "kernel_b": r.kernel_b or None, "input_a": r.input_a, "input_b": r.input_b,
        "shape": r.shape, "repeats_a": r.repeats_a, "repeats_b": r.repeats_b, "design": r.design,
        "estimator": r.time.estimator, "pairs_dropped": r.time.dropped, "interval_method": r.time.method or None,
        "equivalence_low": r.time.eq_low, "equivalence_high": r.time.eq_high,
        "interval_level": r.time.level, "interval_df": r.time.df, "resolution_frac": r.time.resolution,
        "threshold_frac": r.threshold, "caveats": list(r.caveats),
        "time_a_ms": _scaled(r.time_a_ns, 1e-6), "time_b_ms": _scaled(r.time_b_ns, 1e-6),
        **_ratio("time_b_over_a", r.time), **_ratio("cycles_b_over_a", r.cycles), **_ratio("clock_a_over_b", r.clock),
        "clock_source": r.clock_source, "clock_a_mhz": r.clock_a_mhz, "clock_b_mhz": r.clock_b_mhz,
        "board_power_a_w": r.power_a_w, "board_power_b_w": r.power_b_w,
        "limiter_a": r.limiter_a, "limiter_b": r.limiter_b, "verdict": r.verdict, "note": r.note or None,
    } for r in cmp.rows]


def gate_figures(comparisons, *, threshold: float | None, exit_code_slower: int = 1,
                 unresolved: str = "fail") -> dict | None:
    """The `verdict` object of a gated command (compare, commits, nightly) from its comparisons (`gate_outcome`:
    `fail` on a `slower` row, `unresolved` when a row could not be judged or nothing was compared, `pass`
    otherwise), with the rows of each kind and the comparisons of the same code. None without a threshold."""
    outcome = gate_outcome(comparisons, threshold=threshold, unresolved=unresolved)
    if outcome is None:
        return None
    rule = comparisons[0].rule if comparisons else None
    exit_code = exit_code_slower if outcome.verdict == "fail" else outcome.exit_code
    return {
        "verdict": outcome.verdict, "exit_code": exit_code, "line": outcome.line,
        "threshold_frac": threshold, "threshold_source": rule.threshold_source if rule else None,
        "unresolved_policy": unresolved,
        "slower": [f"{r.subject} @ {r.input_b}" for _, r in outcome.slower],
        "unresolved": [f"{r.subject} @ {r.input_b}" for _, r in outcome.open],
        "same_code": [c.same_code for c in comparisons if c.same_code],
    }


def commits_figures(result) -> tuple[list[dict], list[dict]]:
    """(runs, rows) of a `commits.CommitsResult`: one run per revision, one row per later revision vs the first."""
    runs = [{**{k: None for k in _PROVENANCE}, "run_id": Path(r.run_dir).name, "status": r.status,
             "git_commit": r.revision.commit, "device_name": result.device_name, "run_dir": str(r.run_dir),
             "revision": r.revision.describe()} for r in result.runs]
    rows = []
    for c in result.comparisons:
        (row,) = comparison_figures(c.comparison)[:1] or [{}]
        rows.append({"revision_a": c.base.revision.describe(), "revision_b": c.head.revision.describe(),
                     "commit_a": c.base.revision.commit, "commit_b": c.head.revision.commit,
                     "clock_known": bool(c.factors.clock_known), **row})
    return runs, rows


def figures_document(*, command: str, runs: list[dict], tables: dict[str, list[dict]],
                     verdict: dict | None = None) -> dict:
    """The JSON document of `figures.schema.json` (see the module docstring)."""
    return {"schema": "harness.figures", "schema_version": FIGURES_SCHEMA_VERSION, "harness_version": __version__,
            "command": command, "runs": list(runs), "tables": {k: list(v) for k, v in tables.items()},
            "verdict": verdict}


def run_figures(summary, *, path=None, command: str = "report", read_roof=None) -> dict:
    """The figures of one run's report (an `analysis.RunSummary`): its sustained table (with each row's share of
    `read_roof`, the run's measured read stream), the inputs compared, burst figures where there are any."""
    tables = {"sustained": sustained_figures(summary.sustained, read_roof=read_roof)}
    if summary.inputs.rows:
        tables["inputs"] = comparison_figures(summary.inputs)
    if summary.kernels is not None and summary.kernels.rows:
        tables["kernels"] = comparison_figures(summary.kernels)
    if summary.burst:
        tables["burst"] = sustained_figures(summary.burst)
    return figures_document(command=command, runs=[provenance(summary.info, path=path)], tables=tables)


def nightly_figures(result, *, threshold: float | None = None) -> dict:
    """The figures of `bench nightly` (a `commits.NightlyResult`): tonight's run as `bench report` gives it,
    the comparison with the baseline (A = baseline, B = tonight) and the verdict that set the exit status."""
    doc = run_figures(summarize_run(read_run(result.run_dir)), path=result.run_dir, command="nightly")
    if result.comparison is not None:
        doc["tables"]["comparison"] = comparison_figures(result.comparison)
    cmp = result.comparison
    doc["verdict"] = {"verdict": result.verdict, "exit_code": result.exit_code, "threshold_frac": threshold,
                      "threshold_source": cmp.rule.threshold_text if cmp is not None else None,
                      "slower": [f"{s.get('kernel')} @ {s.get('input')}" for s in result.slowdowns],
                      "unresolved": [f"{r.subject} @ {r.input_b}" for r in cmp.open_rows()] if cmp is not None else []}
    return doc


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # full precision, round-trips
    return value


def csv_text(doc: dict) -> str:
    """Every table of the document stacked in one CSV: `table` first, then the union of keys."""
    keys: dict[str, None] = {}
    for rows in doc["tables"].values():
        for row in rows:
            keys.update(dict.fromkeys(row))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", *keys])
    for name, rows in doc["tables"].items():
        for row in rows:
            w.writerow([name, *(_cell(row.get(k)) for k in keys)])
    return buf.getvalue()


def _json_default(value):
    return str(value)  # paths, datetimes


def _finite(value):
    """NaN and infinities as null: JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_figures(doc: dict, *, json_path=None, csv_path=None, stdout=None) -> list[str]:
    """Write the document as JSON and/or CSV (`-` = stdout); returns the files written (not stdout)."""
    written = []
    for path, text in ((json_path, lambda: json.dumps(_finite(doc), indent=1, default=_json_default, allow_nan=False) + "\n"),
                       (csv_path, lambda: csv_text(doc))):
        if path is None:
            continue
        if str(path) == "-":
            (stdout or sys.stdout).write(text())
            (stdout or sys.stdout).flush()
        else:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(path), text())
            written.append(str(path))
    return written
