"""`bench in-model` as one library call: the isolated run (the captured layer alone, sustained, as `bench sustained
--model` times it), then the in-model run (`run_in_model`), then the comparison of every kernel with the reference
kernel (`harness.analysis.compare_in_model`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.analysis import compare_in_model
from harness.errors import ResultsError
from harness.results import read_rows
from harness.runner._in_model import InModelConfig, InModelResult, run_in_model
from harness.runner._loop import RunResult
from harness.runner._run import run_sustained

__all__ = ["InModelJob", "InModelJobResult", "run_in_model_job"]


@dataclass(frozen=True, kw_only=True)
class InModelJob:
    """The in-model run, and where the isolated ratio comes from: `isolated` (a RunConfig timed first), or
    `isolated_run` (a run already made), or neither (no isolated ratio). `isolated_input`: its input to compare on
    (default its one captured input)."""

    in_model: InModelConfig
    isolated: object | None = None  # RunConfig
    isolated_run: Path | None = None
    isolated_input: str | None = None


@dataclass(kw_only=True)
class InModelJobResult:
    in_model: InModelResult
    isolated: RunResult | None = None  # the isolated run timed by this job
    isolated_path: Path | None = None  # the isolated run's directory (timed here or given)
    rows: list = field(default_factory=list)  # harness.analysis.InModelRow, one per kernel but the reference
    no_rows: str = ""  # why there is no comparison (the reference or every other kernel untimed)


def run_in_model_job(job: InModelJob, *, command: str = "", observer=None, isolated_observer=None, progress=None,
                     **hooks) -> InModelJobResult:
    """Time the isolated run (when the job has one), then the in-model run, then compare (module doc). `observer`
    hears the in-model run, `isolated_observer` the isolated one (a live view draws one run); `hooks` are the run
    loop's (`RunHooks`), given to both runs. A stop (Ctrl-C, a signal) ends the job there, each run keeping what it
    finished."""
    iso_result, iso_path, iso_rows, iso_info = None, job.isolated_run, None, None
    if job.isolated is not None:
        if progress is not None:
            progress(f"isolated run: {', '.join(job.isolated.kernels)} on {job.isolated.inputs[0].label} alone")
        iso_result = run_sustained(job.isolated, command=f"{command} (its isolated run)", observer=isolated_observer,
                                   **hooks)
        iso_path, iso_rows, iso_info = iso_result.path, iso_result.measurements, iso_result.info
    elif iso_path is not None:
        iso_rows, iso_info = read_rows(iso_path, "measurements"), read_rows(iso_path, "runs")[0]
    in_model = job.in_model if iso_path is None else replace(job.in_model, isolated_run=Path(iso_path),
                                                               isolated_input=job.isolated_input)
    result = run_in_model(in_model, command=command, observer=observer, progress=progress, **hooks)
    out = InModelJobResult(in_model=result, isolated=iso_result, isolated_path=iso_path)
    try:
        out.rows = compare_in_model(measurements=result.run.measurements, in_model=result.rows, info=result.run.info,
                                    reference=result.reference, isolated=iso_rows, isolated_info=iso_info,
                                    isolated_input=job.isolated_input)
    except ResultsError as exc:
        out.no_rows = str(exc)
    if not out.rows and not out.no_rows:
        out.no_rows = (f"no kernel but the reference {result.reference!r} was timed in the model, so there is "
                       f"nothing to compare")
    return out
