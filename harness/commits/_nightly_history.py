"""`bench nightly --history DIR`: tonight appended to the history as a night, with the control timed beside it, and
judged against the nights before it (harness.history) instead of against one stored baseline.

The control is timed every night after the suite, with the suite's protocol, device and telemetry: the bf16 GEMM
at its power-capped peak (`peak-gemm-bf16-random`, harness.profiling; a small one on the CPU), whose code never
changes with the repository's, so a move it shares is the machine's. It is a run of its own, appended to the same night with the
role `control`. A control that cannot run is said in a warning; the kernels are still judged (by their cycles
where a clock was recorded, which do not need it).

With `append=False` (a pull request judged against main's nights) tonight is judged as the next night but not
written: the history stays main's.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.history import analyze_history, append_runs, night_files, read_history
from harness.profiling import peak_registry, run_peaks
from harness.report import history_markdown, history_page

__all__ = ["HistoryRequest", "HistoryOutcome", "time_control", "judge_history"]


@dataclass(frozen=True, kw_only=True)
class HistoryRequest:
    path: Path
    night: str | None = None  # the night's label (default: the run's start)
    nights: int = 10  # harness.history.NIGHTS; the suite layer decides it
    level: float = 0.99
    control: str | None = None  # a peak kernel timed every night beside the suite; None: no control
    control_gemm_size: int | None = None  # M = N = K of the control's GEMM (None: harness.profiling's default)
    append: bool = True


@dataclass(frozen=True, kw_only=True)
class HistoryOutcome:
    analysis: object  # harness.history.HistoryAnalysis
    verdict: str
    exit_code: int
    sentence: str
    markdown: str
    dashboard: Path
    appended: Path | None
    warnings: tuple[str, ...] = ()


def time_control(config, request: HistoryRequest, *, observer=None, command: str = "") -> tuple[Path | None, str | None]:
    """Time the control after the suite: (its run directory, None), or (None, why it was not timed)."""
    if not request.control:
        return None, None
    try:
        registry = peak_registry(gemm_size=request.control_gemm_size) if request.control_gemm_size else None
        res = run_peaks(kernels=(request.control,), device=config.device, telemetry=config.telemetry,
                        protocol=config.protocol, results_dir=config.results_dir, run_name="nightly-control",
                        registry=registry, allow_busy=config.allow_busy, observer=observer, command=command)
    except HarnessError as exc:
        return None, f"the control {request.control} was not timed: {exc}"
    return Path(res.run.path), None


def judge_history(run_dir: Path, *, request: HistoryRequest, threshold: float, out_dir: Path,
                  control_dir: Path | None = None, control_warning: str | None = None) -> HistoryOutcome:
    """Append tonight (and its control) to the history, or judge it as the next night without writing, then
    analyse the history: the verdict, the Markdown for the summary, and the dashboard in out_dir/history/."""
    runs = [(Path(run_dir), "kernel")] + ([(Path(control_dir), "control")] if control_dir else [])
    warnings = [control_warning] if control_warning else []
    appended = None
    if request.append:
        appended = append_runs(request.path, runs, night=request.night)
        history_dir = request.path
        scratch = None
    else:  # judged as tonight against main's nights, the history left as it was
        scratch = Path(tempfile.mkdtemp(prefix="bench-history-"))
        history_dir = scratch / "history"
        history_dir.mkdir()
        if Path(request.path).is_dir():
            for f in night_files(request.path):
                (history_dir / f.name).symlink_to(f.resolve())
        append_runs(history_dir, runs, night=request.night or "tonight")
    try:
        read = dataclasses.replace(read_history(history_dir, flag="--history"), path=Path(request.path))
        analysis = analyze_history(read, threshold=threshold, level=request.level, wanted=request.nights)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    dashboard = Path(out_dir) / "history" / "index.html"
    dashboard.parent.mkdir(parents=True, exist_ok=True)
    dashboard.write_text(history_page(analysis, title="Nightly history"), encoding="utf-8")
    v = analysis.verdict
    return HistoryOutcome(analysis=analysis, verdict=v.verdict, exit_code=v.exit_code, sentence=v.sentence,
                          markdown=history_markdown(analysis, title="Against the history"), dashboard=dashboard,
                          appended=appended, warnings=tuple(warnings))
