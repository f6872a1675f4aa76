"""`bench in-model`'s tables: where each forward's time went (attention, its share, the rest, what the marks
cost), and every kernel against the reference kernel three ways (isolated, attention in the model, end to end),
each time = cycles x clock with its interval; their figures as JSON/CSV rows."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

from harness.analysis import compare_in_model, median
from harness.errors import ResultsError
from harness.report._blocks import ReportTable, Section
from harness.report._export import comparison_figures
from harness.results import read_rows

__all__ = ["IN_MODEL_NOTE", "IN_MODEL_COMPARISON_NOTE", "in_model_table", "in_model_comparison_table",
           "in_model_figures", "in_model_comparison_figures", "in_model_sections"]

IN_MODEL_NOTE = (
    "forward ms: one forward pass (decode: one step) with the kernel in every attention layer, median over repeats "
    "of its sustained window (launched as noted: graph = CUDA graphs of forwards); attention ms: the kernel's time "
    "summed over every layer's call, between device marks, in the attention pass after each window; share: "
    "attention over the pass's plain forward; rest: that forward less its attention (the other layers, the copies "
    "of q, k, v into each layer's buffers, launch gaps); copies ms: those copies; refresh ms: the part of attention ms "
    "in the kernel's refresh() (q, k, v quantized or copied again each call, which an isolated timing does once in "
    "prepare(); '-': it has none); marks cost: a marked forward less "
    "a plain one, over a plain one (reported, not subtracted); pass MHz: in-band (NVML where there is no probe) "
    "clock during the pass.")
IN_MODEL_COMPARISON_NOTE = (
    "Each ratio is the kernel's time over the reference kernel's (below 1: faster) = cycles ratio x clock factor "
    "(the reference's clock over the kernel's), with its 95 % interval, the kernels interleaved within every repeat: "
    "isolated: the captured layer alone under the sustained protocol; attention: summed over the model's layers, in "
    "its forward; end to end: the whole forward. predicted: the end-to-end ratio the isolated ratio gives at the "
    "reference's attention share.")
IN_MODEL_LESS_REFRESH_NOTE = (
    " less refresh: the kernel's attention in the model less its refresh() (q, k, v quantized or copied again each "
    "call), against the reference's attention, from the same passes: its launches in the model, to set beside the "
    "isolated ratio, which times the launch alone.")


def _by_kernel(measurements: Sequence[dict], in_model: Sequence[dict]) -> dict[str, list[tuple[dict, dict]]]:
    by_id = {r["measurement_id"]: r for r in in_model}
    out: dict[str, list] = {}
    for m in measurements:
        im = by_id.get(m.get("measurement_id"))
        if im is not None and m.get("time_ns"):
            out.setdefault(m["kernel"], []).append((m, im))
    return out


def _ms(x) -> str:
    return "-" if x is None else f"{x / 1e6:.4g}"


def _med(values) -> float | None:
    values = [v for v in values if v is not None]
    return median(values) if values else None


def in_model_figures(measurements: Sequence[dict], in_model: Sequence[dict]) -> list[dict]:
    """Per kernel, medians over its timed repeats (keys with units, full precision)."""
    rows = []
    for kernel, pairs in _by_kernel(measurements, in_model).items():
        ms = lambda key, src=1: _med([p[src][key] for p in pairs])  # noqa: E731
        im0 = pairs[0][1]
        clock = _med([p[1]["pass_inband_clock_mhz"] for p in pairs]) or _med([p[1]["pass_sm_clock_mhz"] for p in pairs])
        refresh = ms("refresh_ns")
        rows.append({
            "kernel": kernel, "model": im0["model"], "phase": im0["phase"], "random_weights": im0["random_weights"],
            "batch": im0["batch"], "seq_len_q": im0["seq_len_q"], "seq_len_kv": im0["seq_len_kv"],
            "layers": im0["layers"], "repeats": len(pairs),
            "forward_ms": ms("time_ns", 0) / 1e6, "attention_ms": ms("attention_ns") / 1e6,
            "attention_share": ms("attention_share"), "rest_ms": ms("rest_ns") / 1e6, "copies_ms": ms("copy_ns") / 1e6,
            "refresh_ms": None if refresh is None else refresh / 1e6,
            "marks_cost_frac": _med([p[1]["instrumentation_cost_ns"] / p[1]["pass_forward_ns"] for p in pairs]),
            "pass_forward_ms": ms("pass_forward_ns") / 1e6, "pass_clock_mhz": clock,
            "window_inband_clock_mhz": ms("inband_clock_mhz", 0), "window_nvml_clock_mhz": ms("sm_clock_mhz", 0),
            "board_power_w": ms("power_w", 0),
            "launch": "/".join(sorted({p[0].get("launch_strategy") or "?" for p in pairs})),
        })
    return rows


def in_model_table(measurements: Sequence[dict], in_model: Sequence[dict], *, title: str) -> ReportTable:
    """One row per kernel: where its forward's time went (IN_MODEL_NOTE)."""
    figs = in_model_figures(measurements, in_model)
    pct = lambda x: "-" if x is None else f"{100 * x:.1f} %"  # noqa: E731
    rows = tuple((
        f["kernel"], f["launch"], f"{f['forward_ms']:.4g}", f"{f['attention_ms']:.4g}", pct(f["attention_share"]),
        f"{f['rest_ms']:.4g}", f"{f['copies_ms']:.4g}", "-" if f["refresh_ms"] is None else f"{f['refresh_ms']:.4g}",
        pct(f["marks_cost_frac"]),
        "-" if f["pass_clock_mhz"] is None else f"{f['pass_clock_mhz']:.0f}",
        "-" if f["board_power_w"] is None else f"{f['board_power_w']:.0f}", str(f["repeats"]),
    ) for f in figs)
    return ReportTable(title=title, columns=("kernel", "launch", "forward ms", "attention ms", "share", "rest ms",
                                             "copies ms", "refresh ms", "marks cost", "pass MHz", "board W",
                                             "repeats"),
                       rows=rows, caption=IN_MODEL_NOTE, left=2)


def _ratio(c) -> str:
    if c is None:
        return "-"
    t = c.time
    return f"{t.value:.3f}" + (f" [{t.low:.3f}, {t.high:.3f}]" if t.low is not None else "")


def _split(c) -> str:
    if c is None or c.cycles is None or c.clock is None:
        return "-"
    return f"{c.cycles.value:.3f} x {c.clock.value:.3f}"


def in_model_comparison_table(rows: Sequence, *, title: str) -> ReportTable:
    """One row per kernel against the reference (IN_MODEL_COMPARISON_NOTE); a random-weights model says so in
    every row."""
    # the attention less the refresh only where some kernel has one: a table of kernels without keeps its width
    less = any(r.launch is not None for r in rows)
    out = tuple((
        f"{r.kernel} vs {r.reference}" + (" (RANDOM WEIGHTS)" if r.random_weights else ""),
        _ratio(r.isolated), _split(r.isolated), _ratio(r.attention), _split(r.attention),
        *((_ratio(r.launch), _split(r.launch)) if less else ()), _ratio(r.end_to_end),
        _split(r.end_to_end), "-" if r.predicted is None else f"{r.predicted:.3f}",
        f"{100 * r.share_reference:.1f} %", f"{100 * r.share_kernel:.1f} %", r.end_to_end.verdict,
    ) for r in rows)
    return ReportTable(title=title, columns=("kernel", "isolated", "= cycles x clock", "attention in model",
                                             "= cycles x clock (attention)",
                                             *(("less refresh", "= cycles x clock (less refresh)") if less else ()),
                                             "end to end", "= cycles x clock (end to end)", "predicted", "share (ref)",
                                             "share", "end-to-end verdict"),
                       rows=out, caption=IN_MODEL_COMPARISON_NOTE + (IN_MODEL_LESS_REFRESH_NOTE if less else ""),
                       left=1, text_tail=1)


def in_model_comparison_figures(rows: Sequence) -> list[dict]:
    """The comparison as JSON/CSV rows: each of the three ratios (and the rest's, and the attention less the
    refresh as `launch`: None for a kernel without one) as `comparison_figures` writes a
    comparison row, keyed by what it compares, with the shares, the prediction and the sentence."""
    out = []
    for r in rows:
        row = {"kernel": r.kernel, "reference": r.reference, "workload": r.workload, "random_weights": r.random_weights,
               "isolated_input": r.isolated_input, "attention_share_reference": r.share_reference,
               "attention_share_kernel": r.share_kernel, "marks_cost_frac": r.cost_frac, "predicted": r.predicted,
               "launch_reference": r.launch_reference, "launch_kernel": r.launch_kernel, "sentence": r.sentence}
        for name in ("isolated", "attention", "launch", "end_to_end", "rest"):
            c = getattr(r, name)
            row[name] = comparison_figures(SimpleNamespace(rows=[c]))[0] if c is not None else None
        out.append(row)
    return out


def _isolated_run(run_path: Path, recorded: dict | None) -> tuple[Path | None, str]:
    """The isolated run an in-model run recorded (its config's `isolated_run`): beside it under the same results
    folder (where runs are moved or copied together), else where it was; with why there is none."""
    if not recorded:
        return None, ("No isolated run recorded (a run from before in-model runs recorded theirs, or one made "
                      "without one): no isolated ratio.")
    for where in (run_path.parent / recorded["run_id"], Path(recorded["path"])):
        if (where / "runs.parquet").is_file():
            return where, ""
    return None, (f"Its isolated run {recorded['run_id']} is neither beside it ({run_path.parent}) nor at "
                  f"{recorded['path']}: no isolated ratio (copy that run beside this one).")


def in_model_sections(run) -> list[Section]:
    """A `bench in-model` run's own sections, recomputed from its stored rows: where each forward's time went and
    each kernel against the reference (with the isolated ratio where its isolated run is found: `_isolated_run`);
    [] for any other run."""
    rows = read_rows(run.path, "in_model")
    if not rows:
        return []
    measurements = read_rows(run.path, "measurements")
    info = run.info
    cfg = json.loads(info.get("config_json") or "{}")
    workload = cfg.get("workload") or rows[0].get("model", "?")
    out = [Section(title="In the model: where a forward's time went",
                   text=f"{workload}: the forward with each kernel in all {cfg.get('layers', '?')} attention layers.",
                   tables=(in_model_table(measurements, rows, title=f"in the model: {workload}: where a forward's "
                                                                     f"time went"),))]
    reference = cfg.get("reference")
    if not reference:
        return out
    iso_path, why = _isolated_run(Path(run.path), cfg.get("isolated_run"))
    iso = {} if iso_path is None else {
        "isolated": read_rows(iso_path, "measurements"), "isolated_info": read_rows(iso_path, "runs")[0],
        "isolated_input": (cfg.get("isolated_run") or {}).get("input")}
    try:
        compared = compare_in_model(measurements=measurements, in_model=rows, info=info, reference=reference, **iso)
    except ResultsError as exc:
        return [*out, Section(title=f"In the model: against {reference}", text=str(exc))]
    if not compared:
        return out
    text = f"Isolated run: {iso_path.name}." if iso_path is not None else why
    out.append(Section(title=f"In the model: against {reference}, alone and in the model", text=text,
                       tables=(in_model_comparison_table(compared, title=f"against {reference}: alone and in the "
                                                                         f"model"),),
                       points=tuple(row.sentence for row in compared)))
    return out
