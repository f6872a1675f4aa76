"""The nightly job: run the suite, judge it against the stored baseline, write what CI shows and keeps.

`run_nightly` runs `run_sustained` on the suite (captured + control inputs) and hands the run to
`judge_nightly`, which is pure apart from its files: it compares the run with the baseline stored in
`baseline_dir` (`compare_runs`: time = cycles x clock per kernel x input, with the noise rule), writes
`summary.md` (for $GITHUB_STEP_SUMMARY), `report.html` + `report.md`, and `verdict.json`, and stores
the run as the new baseline only when asked (`update_baseline`).

Verdicts (`harness.analysis.gate_outcome` for the comparison): `pass`, `fail` (a kernel x input is `slower`: its
interval excludes 1 and it moved by more than the threshold, which is the verdict rule's own threshold here),
`unresolved` (a kernel x input could not be judged at the threshold: exit 6 unless `--unresolved pass`),
`nothing timed` (every kernel x input failed: exit 4, with a baseline or without), `no baseline` (nothing stored
yet), `across machines` (the baseline is from another GPU model: compared and shown, with a warning, but not
judged: a hardware change is not a code change), `not comparable` (the suite changed: no input or shape in common;
store a new baseline). Tonight and the baseline are separate runs, so every interval includes the between-run
variance (`VerdictRule.between_runs`), and the gate says the smallest threshold that supports.

With a history (`history`, harness.commits._nightly_history) tonight is also appended to it as a night, with the
control timed beside it, and the job's verdict is the history's: tonight against the last N comparable nights.

The GPU's identity (model, host, PCI bus id, and UUID / serial where the run recorded them) is stored with the
baseline and compared every night (`gpu_identity`, `gpu_change`). Rule for another GPU of the same model: it IS
compared and judged, with the gate widened by `GPU_SPREAD_ALLOWANCE` and a warning naming both GPUs. Why: two
H200s of one host differed by 3.2 % in time on the same kernel (fixture 20261130-064214-replicate-036e2c), so a
2 % gate across GPUs raises false alarms, while refusing to judge would let a real regression through whenever
the scheduler hands the job another GPU. A widened gate still catches regressions larger than the GPU spread;
smaller ones need a baseline on that GPU (request an update there).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.analysis import (
    SUSTAINED_STATUSES,
    VerdictRule,
    compare_runs,
    explain_comparison,
    gate_outcome,
    summarize_run,
)
from harness.commits._nightly_history import judge_history, time_control
from harness.errors import ResultsError
from harness.report import build_report, comparison_tables, run_tables, write_report
from harness.results import read_run
from harness.runner import run_sustained

__all__ = ["NightlyResult", "judge_nightly", "run_nightly", "read_baseline", "store_baseline",
           "machine_warning", "VERDICT_EXIT", "GPU_SPREAD_ALLOWANCE", "gpu_identity", "gpu_change"]

GPU_SPREAD_ALLOWANCE = 0.035  # time spread between GPUs of one model: 3.2 % measured on two H200s, rounded up

VERDICT_EXIT = {"pass": 0, "no baseline": 0, "across machines": 0, "fail": 1, "not comparable": 2, "nothing timed": 4,
                "unresolved": 6}
_RUN = "run"  # the baseline run's folder inside baseline_dir
_META = "BASELINE.json"


@dataclass(frozen=True, kw_only=True)
class NightlyResult:
    verdict: str
    exit_code: int
    run_dir: Path
    summary_md: Path
    report_html: Path
    verdict_json: Path
    comparison: object | None  # harness.analysis.Comparison of baseline (A) vs tonight (B)
    warnings: tuple[str, ...] = ()
    baseline_updated: bool = False
    slowdowns: tuple = field(default=())
    history: object | None = None  # harness.commits._nightly_history.HistoryOutcome with --history


def _check_baseline_dir(baseline_dir: Path) -> Path:
    base = Path(baseline_dir)
    if base.exists() and not base.is_dir():
        raise ResultsError(f"--baseline {base} is a file, not a folder: the baseline is a folder holding {_RUN}/ and "
                           f"{_META}. Pass the folder the baseline was stored in (or a new one, to store a first "
                           f"baseline there).")
    return base


def read_baseline(baseline_dir: Path | None, *, notes: list[str] | None = None):
    """The stored baseline run, or None when there is none yet.

    A folder that says a baseline was stored (its BASELINE.json, or the temporaries of an update) but holds
    no run is refused: read as "no baseline yet", it would pass every night. An update stopped between its
    two renames (`run` moved aside, the new copy not yet in place) is rolled back to the stored run, which
    BASELINE.json still describes; `notes` hears that it was."""
    if baseline_dir is None:  # --history without --baseline: no baseline is compared
        return None
    base = _check_baseline_dir(baseline_dir)
    run_dir = base / _RUN
    if (run_dir / "runs.parquet").is_file():
        return read_run(run_dir)
    old, new = base / f".{_RUN}.old", base / f".{_RUN}.new"
    if (old / "runs.parquet").is_file():
        if run_dir.exists():
            shutil.rmtree(run_dir)
        old.rename(run_dir)
        if notes is not None:
            notes.append(f"A baseline update in {base} had stopped between its two renames; the stored baseline was "
                         f"restored from {old.name} (the update did not happen).")
        return read_run(run_dir)
    if (base / _META).is_file() or new.exists() or run_dir.exists():
        raise ResultsError(f"{base} says a baseline was stored ({_META} or an update's temporaries are there) but holds "
                           f"no readable {_RUN}/ run, so there is nothing to compare tonight's run with. Restore "
                           f"{run_dir} from a copy, or request a baseline update to store tonight's run as the baseline.")
    return None


def _timed_keys(run) -> set[tuple[str, str]]:
    m = run.measurements
    return {(k, i) for k, i, st in zip(m["kernel"].to_list(), m["input_label"].to_list(), m["status"].to_list())
            if st in ("ok", "unsettled")}


def _suite_change(baseline, run) -> str | None:
    """Why tonight's timed kernel x inputs are not the baseline's (None: the same set): a pass over fewer or
    other kernels than the baseline timed would judge less than it claims."""
    a, b = _timed_keys(baseline), _timed_keys(run)
    gone = ", ".join(f"{k} @ {i}" for k, i in sorted(a - b))
    new = ", ".join(f"{k} @ {i}" for k, i in sorted(b - a))
    parts = ([f"timed in the baseline but not tonight: {gone}"] if gone else []) + (
        [f"timed tonight but not in the baseline: {new}"] if new else [])
    return "; ".join(parts) or None


def store_baseline(run_dir: Path, baseline_dir: Path, *, reason: str) -> Path:
    """Copy a complete run into `baseline_dir/run`, replacing the old one only once the copy is whole."""
    run = read_run(run_dir)
    if not run.complete:
        raise ResultsError(f"Run {run_dir} is {run.info.get('status')!r}, not complete: it is not stored as the baseline.")
    baseline_dir = _check_baseline_dir(baseline_dir)
    baseline_dir.mkdir(parents=True, exist_ok=True)
    tmp, old, target = baseline_dir / f".{_RUN}.new", baseline_dir / f".{_RUN}.old", baseline_dir / _RUN
    for p in (tmp, old):
        shutil.rmtree(p, ignore_errors=True)
    shutil.copytree(run_dir, tmp)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    meta = {"run_id": run.info.get("run_id"), "device_name": run.info.get("device_name"),
            "gpu": gpu_identity(run.info), "git_commit": run.info.get("git_commit"), "stored_at": datetime.now(timezone.utc).isoformat(),
            "reason": reason}
    (baseline_dir / _META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return target


def machine_warning(baseline_info: dict, run_info: dict) -> str | None:
    """A warning when the baseline and the run come from different GPU models (None when they match)."""
    a, b = baseline_info.get("device_name"), run_info.get("device_name")
    if a == b:
        return None
    return (f"The baseline was measured on {a} and this run on {b}: the comparison is across machines. Its ratios "
            f"include the hardware, not only the code, so no slowdown verdict is drawn from it. Store a baseline "
            f"on this machine (run with the update-baseline request) to judge code changes again.")


def gpu_identity(info: dict) -> dict:
    """Which physical GPU(s) a run used: model, host, PCI bus id(s), UUID and serial (None where not recorded)."""
    ids = [x for x in str(info.get("pci_bus_id") or "").split(",") if x]
    return {"model": info.get("device_name"), "host": info.get("host"), "pci_bus_id": ",".join(ids) or None,
            "uuid": info.get("gpu_uuid"), "serial": info.get("gpu_serial")}


def gpu_change(baseline_info: dict, run_info: dict) -> str | None:
    """A warning when tonight's GPU is another one of the same model as the baseline's (None: the same GPU, as
    far as the recorded identity tells, or another model, which `machine_warning` covers).

    UUID or serial decide where both sides recorded one; otherwise host + PCI bus id (a bus id alone names a slot,
    not a card, and only within one host)."""
    a, b = gpu_identity(baseline_info), gpu_identity(run_info)
    if a["model"] != b["model"]:
        return None
    for key in ("uuid", "serial"):
        if a[key] and b[key]:
            if a[key] == b[key]:
                return None
            break
    else:
        if (a["host"], a["pci_bus_id"]) == (b["host"], b["pci_bus_id"]):
            return None
    desc = lambda g: ", ".join(f"{k} {g[k]}" for k in ("host", "pci_bus_id", "uuid", "serial") if g[k])
    return (f"Tonight's GPU is not the baseline's: baseline {desc(a)}; tonight {desc(b)} (both {a['model']}). GPUs of "
            f"one model differ by a few % at the power cap, so the slowdown gate is widened by "
            f"{GPU_SPREAD_ALLOWANCE:.1%} for this comparison; store a baseline on this GPU to judge smaller changes.")


def _slowdown_rows(comparison) -> list[dict]:
    return [{"kernel": r.kernel, "input": r.input_b, "time_ratio": r.time.value, "low": r.time.low,
             "high": r.time.high, "cycles_ratio": r.cycles.value if r.cycles else None,
             "clock_ratio": r.clock.value if r.clock else None} for r in comparison.slowdowns()]


def _summary(*, verdict, sentence, warnings, comparison, summary, run, baseline, report_name, history_md="") -> str:
    lines = [f"# Nightly sustained benchmark: {verdict.upper()}", "", sentence, ""]
    lines += [f"> **Warning:** {w}\n" for w in warnings]
    if history_md:
        lines += [history_md.replace("## Against the history", "## Against the history (the verdict)"), ""]
    info = run.info
    lines += [f"Tonight: run `{info.get('run_id')}` on {info.get('device_name')} (driver {info.get('driver')}), "
              f"harness {str(info.get('git_commit') or '?')[:12]}"
              + (f"; baseline: run `{baseline.info.get('run_id')}` on {baseline.info.get('device_name')}, "
                 f"harness {str(baseline.info.get('git_commit') or '?')[:12]}." if baseline is not None else "."), ""]
    if comparison is not None and comparison.rows:
        lines += ["## Tonight (B) against the baseline (A)", ""]
        lines += [t.to_markdown() + "\n" for t in comparison_tables(comparison, title="Decomposition: time = cycles / clock",
                                                                    input_columns=("baseline", "tonight"))]
        lines += [f"- {line}" for line in explain_comparison(comparison, baseline, run).lines()] + [""]
        if any(r.clock is None for r in comparison.rows):
            lines += ["Where the cycles and clock factors show '-', no clock was recorded (no clock telemetry on this "
                      "device): the clock factor is unknown, and the time ratio is attributed to cycles only on the "
                      "assumption that both nights ran at the same clock.", ""]
        if comparison.unmatched:
            lines += ["Not compared (on one side only): " + "; ".join(comparison.unmatched), ""]
    if summary.inputs.rows:
        lines += ["## Captured against control inputs (tonight)", ""]
        lines += [t.to_markdown() + "\n" for t in comparison_tables(summary.inputs, title="Inputs: B relative to A")]
    tables = run_tables(summary)
    if tables:
        lines += ["## Tonight's sustained figures", "", tables[0].to_markdown(), ""]
    lines += [f"The full report is the `{report_name}` artifact; the run's Parquet tables are the results artifact."]
    return "\n".join(lines).rstrip() + "\n"


def _timed_anything(run) -> bool:
    m = run.measurements
    statuses = m["status"].to_list() if hasattr(m, "columns") else [r.get("status") for r in m]
    return any(s in SUSTAINED_STATUSES for s in statuses)


def judge_nightly(run_dir: Path, *, out_dir: Path, baseline_dir: Path | None, threshold: float = 0.02,
                  update_baseline: bool = False, rule=None, figures: bool = True, unresolved: str = "fail",
                  history=None, control_dir: Path | None = None, control_warning: str | None = None) -> NightlyResult:
    """Compare a finished run with the stored baseline (and with `history`, a HistoryRequest, against its nights)
    and write summary.md, report.html/.md and verdict.json."""
    rule = rule or VerdictRule().with_threshold(threshold, source=f"gate {threshold:.2%}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = read_run(run_dir)
    warnings: list[str] = []
    try:
        baseline, unreadable = read_baseline(baseline_dir, notes=warnings), None
    except ResultsError as exc:
        baseline, unreadable = None, str(exc)
    comparison, slow, gate = None, [], threshold
    if not _timed_anything(run):  # a broken night is red, first night or not
        verdict = "nothing timed"
        sentence = (f"Tonight's run timed nothing: every kernel x input failed (its report and run say why), so "
                    f"nothing was judged{'' if baseline is not None else ' and nothing could become a baseline'}.")
    elif unreadable:
        verdict = "not comparable"
        sentence = f"Tonight's run cannot be judged: {unreadable}"
    elif baseline is None and baseline_dir is None:
        verdict = "no baseline"
        sentence = "No baseline was named: tonight is judged against its history alone."
    elif baseline is None:
        verdict = "no baseline"
        sentence = (f"No baseline is stored in {baseline_dir} yet, so nothing was judged. Request a baseline update "
                    f"to store this run as the one later nights are compared with.")
    else:
        other_gpu = gpu_change(baseline.info, run.info)
        gate = threshold + GPU_SPREAD_ALLOWANCE if other_gpu else threshold
        if other_gpu:  # the verdicts judge at the widened gate, and say so
            rule = rule.with_threshold(gate, source=f"{rule.threshold_source} + {GPU_SPREAD_ALLOWANCE:.1%} for another "
                                                    f"GPU of the model")
        try:
            comparison = compare_runs(baseline, run, rule=rule, allow_incomplete=False)
        except ResultsError as exc:  # the suite changed under the baseline: say so in the summary, fail the job
            comparison, error = None, str(exc)
        else:
            error = None
        if comparison is not None:
            slow = _slowdown_rows(comparison)
        warnings += [other_gpu] if other_gpu else []
        warning = machine_warning(baseline.info, run.info)
        change = _suite_change(baseline, run) if comparison is not None else None
        if error:
            verdict = "not comparable"
            sentence = f"Tonight's run cannot be compared with the baseline: {error}"
            warnings += [warning] if warning else []
        elif not comparison.rows or (change and not slow and not warning):
            # A pass on nothing, or on less than the baseline timed, is no pass (a slowdown among what was
            # compared still fails, below, with the change as a warning: a regression is not hidden by exit 2).
            verdict = "not comparable"
            sentence = (f"Tonight's suite no longer matches the baseline ({len(comparison.rows)} kernel x input "
                        f"compared): {change or 'nothing in common'}. Nothing is judged; if the change is meant, "
                        f"request a baseline update to store tonight's run as the baseline.")
            warnings += [warning] if warning else []
        elif warning:
            warnings.append(warning)
            verdict = "across machines"
            sentence = f"Compared across machines (see the warning): {len(slow)} kernel x input would count as slower."
        elif slow:
            warnings += [f"Tonight's suite no longer matches the baseline: {change}."] if change else []
            verdict = "fail"
            sentence = (f"{len(slow)} kernel x input ran slower than the baseline beyond the "
                        f"{rule.threshold_text} threshold (t interval excluding 1): " + ", ".join(f"{s['kernel']} @ {s['input']} x{s['time_ratio']:.3f}" for s in slow)
                        + ". The decomposition below says whether cycles (the code) or the clock carried it.")
        else:
            outcome = gate_outcome(comparison, threshold=gate, unresolved=unresolved)
            verdict = "pass" if outcome.verdict == "pass" else "unresolved"
            sentence = f"{outcome.line}. Rule: {rule.describe()}."
    report = build_report(run, rule=rule, figures=figures)
    html, md = out_dir / "report.html", out_dir / "report.md"
    write_report(report, html=html, md=md)
    summary = summarize_run(run, rule=rule)
    hist = None
    if history is not None:  # the job's verdict is the history's (a night that timed nothing stays that, exit 4);
        # the baseline's comparison, if any, stays beside it. A broken night is appended too: it is a fact of it.
        hist = judge_history(run_dir, request=history, threshold=threshold, out_dir=out_dir, control_dir=control_dir,
                             control_warning=control_warning)
        warnings += list(hist.warnings)
        if verdict != "nothing timed":
            if slow and hist.verdict != "fail":
                warnings.append(f"Against the baseline run, {len(slow)} kernel x input would count as slower (see "
                                f"below); the history, which sees the variation between nights, judged tonight "
                                f"{hist.verdict}.")
            verdict, sentence = hist.verdict, f"Against the history: {hist.sentence}"
    updated = False
    if update_baseline and verdict == "nothing timed":
        sentence += " The baseline was not updated: tonight's run timed nothing."
    elif update_baseline:
        store_baseline(Path(run_dir), Path(baseline_dir), reason=f"update requested; verdict before the update: {verdict}")
        updated = True
        sentence += f" This run is now the baseline (stored in {baseline_dir}, as requested)."
    text = _summary(verdict=verdict, sentence=sentence, warnings=warnings, comparison=comparison, summary=summary,
                    run=run, baseline=baseline, report_name=html.name,
                    history_md=hist.markdown if hist is not None else "")
    summary_md = out_dir / "summary.md"
    summary_md.write_text(text, encoding="utf-8")
    # An accepted update is the user's decision that tonight's numbers are right: the job succeeds.
    exit_code = (0 if updated else hist.exit_code if hist is not None and verdict == hist.verdict
                 else VERDICT_EXIT[verdict])
    verdict_json = out_dir / "verdict.json"
    verdict_json.write_text(json.dumps({
        "verdict": verdict, "exit_code": exit_code, "threshold": threshold, "rule": rule.describe(),
        "threshold_applied": rule.threshold_text,
        "unresolved": [f"{r.kernel} @ {r.input_b}" for r in comparison.open_rows()] if comparison else [],
        "unresolved_policy": unresolved, "between_runs_cv": comparison.between_cv if comparison else None,
        "between_runs_source": comparison.between_source if comparison else None,
        "floor": comparison.floor if comparison else None,
        "slowdowns": slow, "run_dir": str(run_dir), "run_id": run.info.get("run_id"),
        "device_name": run.info.get("device_name"), "baseline_run_id": baseline.info.get("run_id") if baseline else None,
        "baseline_device_name": baseline.info.get("device_name") if baseline else None, "warnings": warnings,
        "baseline_updated": updated, "gate": gate if baseline is not None else threshold,
        "gpu": gpu_identity(run.info), "baseline_gpu": gpu_identity(baseline.info) if baseline else None,
        "history": _history_json(hist),
    }, indent=1, default=str) + "\n", encoding="utf-8")
    return NightlyResult(verdict=verdict, exit_code=exit_code, run_dir=Path(run_dir), summary_md=summary_md,
                         report_html=html, verdict_json=verdict_json, comparison=comparison, warnings=tuple(warnings),
                         baseline_updated=updated, slowdowns=tuple(slow), history=hist)


def _history_json(hist) -> dict | None:
    if hist is None:
        return None
    v = hist.analysis.verdict
    return {"verdict": hist.verdict, "exit_code": hist.exit_code, "night": v.night.label if v.night else None,
            "nights_in_history": len(hist.analysis.nights), "appended": hist.appended,
            "dashboard": hist.dashboard, "threshold": v.threshold, "level": v.level, "nights": v.wanted,
            "series": [{"series": s.series, "role": s.role, "verdict": s.verdict, "nights": s.nights, "floor": s.floor,
                        "sentence": s.sentence} for s in v.series]}


def run_nightly(config, *, out_dir: Path, baseline_dir: Path | None, threshold: float = 0.02,
                update_baseline: bool = False, rule=None, figures: bool = True, observer=None, command: str = "",
                unresolved: str = "fail", history=None) -> NightlyResult:
    """Run the suite described by `config` (a RunConfig), time the history's control after it, and judge it (see
    `judge_nightly`)."""
    if baseline_dir is not None:
        _check_baseline_dir(baseline_dir)  # before the suite runs, not after an hour of it
    if history is not None and Path(history.path).exists() and not Path(history.path).is_dir():
        raise ResultsError(f"--history {history.path} is a file; the history is a folder of night-*.parquet files. "
                           f"Pass a folder (it is created if missing).")
    result = run_sustained(config, observer=observer, command=command)
    control_dir, control_warning = None, None
    if history is not None:
        control_dir, control_warning = time_control(config, history, observer=observer, command=command)
    return judge_nightly(result.path, out_dir=out_dir, baseline_dir=baseline_dir, threshold=threshold,
                         update_baseline=update_baseline, rule=rule, figures=figures, unresolved=unresolved,
                         history=history, control_dir=control_dir, control_warning=control_warning)
