"""The nightly job's CPU dry run (ci/nightly.sh --device cpu) and the verdicts judge_nightly draws."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.commits import judge_nightly, read_baseline
from harness.results import expand_run, read_run, write_table_atomic

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, tiny_capture_writer):
    """One CPU dry run of the script on a tiny capture + its control, storing itself as the first baseline."""
    tmp = tmp_path_factory.mktemp("nightly")
    capture = tiny_capture_writer(tmp / "captures")
    step_summary = tmp / "step-summary.md"
    # As in GitHub Actions: stdout a pipe, no COLUMNS (rich's 80), GITHUB_ACTIONS set.
    env = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "PYTHON": sys.executable,
           "GITHUB_STEP_SUMMARY": str(step_summary), "OMP_NUM_THREADS": "1", "GITHUB_ACTIONS": "true"}
    proc = subprocess.run(
        ["bash", str(ROOT / "ci" / "nightly.sh"), "--device", "cpu", "--out", str(tmp / "out"), "--baseline",
         str(tmp / "baseline"), "--update-baseline", "--", "--capture", str(capture),
         "--json", str(tmp / "out" / "figures.json"), "--csv", str(tmp / "out" / "figures.csv")],
        capture_output=True, text=True, env=env, cwd=tmp, timeout=600,
    )
    return tmp, proc, step_summary


@pytest.mark.slow
def test_dry_run_writes_summary_report_and_verdict(dry_run):
    """Acceptance 2: the CPU dry run produces the summary (also in the job summary), the report and the verdict."""
    tmp, proc, step_summary = dry_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp / "out"
    assert "bench doctor" in (out / "doctor.txt").read_text()
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Nightly sustained benchmark: NO BASELINE")
    assert "L03:captured" in summary and "L03:gaussian:0.1" in summary  # captured and control inputs
    assert "This run is now the baseline" in summary
    assert step_summary.read_text() == summary
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "L03:captured" in html
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["verdict"] == "no baseline" and verdict["exit_code"] == 0 and verdict["baseline_updated"]
    run = read_run(verdict["run_dir"])  # the Parquet artifact reads back
    assert run.complete and set(run.measurements["input_label"]) == {"L03:captured", "L03:gaussian:0.1"}
    assert read_baseline(tmp / "baseline").info["run_id"] == verdict["run_id"]
    assert "== verdict: exit status 0" in proc.stdout


@pytest.mark.slow
def test_dry_run_log_and_figures_read_anywhere(dry_run):
    """The CI log names every measurement on its own line (with the ETA) and keeps the final figures whole;
    --json validates against the figures schema, --csv reads back with polars and the csv module."""
    import csv
    import re

    import jsonschema
    import polars as pl

    from harness.report import FIGURES_SCHEMA

    tmp, proc, _ = dry_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp / "out" / "figures.json").read_text())
    jsonschema.validate(doc, json.loads(FIGURES_SCHEMA.read_text()))
    verdict = json.loads((tmp / "out" / "verdict.json").read_text())
    assert doc["command"] == "nightly" and doc["runs"][0]["run_id"] == verdict["run_id"]
    assert doc["verdict"]["verdict"] == "no baseline" and doc["verdict"]["exit_code"] == 0
    rows = doc["tables"]["sustained"]
    assert {r["input"] for r in rows} == {"L03:captured", "L03:gaussian:0.1"}
    log = [ln for ln in proc.stdout.splitlines() if re.match(r"\[\d+/\d+, \d:\d\d:\d\d elapsed, ETA ", ln)]
    assert len(log) == sum(r["repeats"] for r in rows) and all("ms/launch" in ln for ln in log)
    frame = pl.read_csv(tmp / "out" / "figures.csv")
    assert frame.filter(pl.col("table") == "sustained")["time_ms"].to_list() == [r["time_ms"] for r in rows]
    back = [r for r in csv.DictReader((tmp / "out" / "figures.csv").open(newline="")) if r["table"] == "sustained"]
    assert [r["input"] for r in back] == [r["input"] for r in rows]


# The synthetic baseline is this many times faster than tonight. CPU repeats under the parallel suite spread
# by over 2x (137.8 against 61.7 us seen for one input), and the bootstrap resamples each side's repeats
# apart, so a 2x slowdown can fall inside the noise; 100x cannot.
FASTER = 100.0


def _copy_run(run_dir: Path, dest: Path, *, info=None, scale_time: float | None = None, seq_len: int | None = None,
              kernel: str | None = None) -> Path:
    """A copy of a run with its device renamed, its times scaled, its shape changed or its kernel renamed (a
    synthetic baseline)."""
    shutil.copytree(run_dir, dest)
    expand_run(dest)  # the run's parts again (merged when it ended), each edited below
    run = read_run(dest)
    if info:
        write_table_atomic(dest / "runs.parquet", "runs", [{**run.info, **info}])
    for part in sorted((dest / "measurements").glob("part-*.parquet")):
        rows = pq.read_table(part).to_pylist()
        for r in rows:
            if scale_time and r["time_ns"]:
                r["time_ns"] *= scale_time
            if seq_len:
                r["seq_len"] = seq_len
            if kernel:
                r["kernel"] = kernel
        write_table_atomic(part, "measurements", rows)
    return dest


@pytest.fixture
def tonight(dry_run):
    tmp, proc, _ = dry_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Path(json.loads((tmp / "out" / "verdict.json").read_text())["run_dir"])


@pytest.mark.slow
def test_same_run_against_itself_passes(tonight, tmp_path):
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run")
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "pass" and result.exit_code == 0
    assert "# Nightly sustained benchmark: PASS" in result.summary_md.read_text()


@pytest.mark.slow
def test_slowdown_beyond_the_noise_rule_fails(tonight, tmp_path):
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", scale_time=1 / FASTER)
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, threshold=0.02, figures=False)
    assert result.verdict == "fail" and result.exit_code == 1
    assert {s["input"] for s in result.slowdowns} == {"L03:captured", "L03:gaussian:0.1"}
    text = result.summary_md.read_text()
    assert "# Nightly sustained benchmark: FAIL" in text and "cycles (the code) or the clock" in text
    assert "no clock telemetry on this device" in text
    assert json.loads(result.verdict_json.read_text())["slowdowns"][0]["time_ratio"] == pytest.approx(FASTER, rel=0.01)


@pytest.mark.slow
def test_requested_update_accepts_a_slowdown(tonight, tmp_path):
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", scale_time=1 / FASTER)
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, update_baseline=True, figures=False)
    assert result.verdict == "fail" and result.exit_code == 0 and result.baseline_updated
    assert read_baseline(base).info["run_id"] == read_run(tonight).info["run_id"]
    assert "verdict before the update: fail" in (base / "BASELINE.json").read_text()


@pytest.mark.slow
def test_baseline_from_another_gpu_model_warns(tonight, tmp_path):
    """Bad input 4: a baseline from another GPU model: a warning that says the comparison is across machines."""
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", info={"device_name": "NVIDIA A100-SXM4-80GB"}, scale_time=1 / FASTER)
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "across machines" and result.exit_code == 0
    (warning,) = result.warnings
    assert "baseline was measured on NVIDIA A100-SXM4-80GB" in warning and "the comparison is across machines" in warning
    text = result.summary_md.read_text()
    assert "> **Warning:** The baseline was measured on NVIDIA A100-SXM4-80GB" in text
    assert "different devices" in text  # the comparison rows carry it too


@pytest.mark.slow
def test_baseline_of_another_shape_is_not_comparable(tonight, tmp_path):
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", seq_len=4096)
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "not comparable" and result.exit_code == 2
    assert "their shapes differ" in result.summary_md.read_text()


@pytest.mark.slow
def test_a_baseline_of_other_kernels_is_not_a_pass_on_nothing(tonight, tmp_path):
    """Issue 31: the kernel set changed, so nothing is compared: exit 2 with the reason, not "PASS (0 compared)"."""
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", kernel="yesterdays-kernel")
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "not comparable" and result.exit_code == 2
    text = result.summary_md.read_text()
    assert "Tonight's suite no longer matches the baseline (0 kernel x input compared)" in text
    assert "timed in the baseline but not tonight: yesterdays-kernel @ L03:captured" in text
    assert json.loads(result.verdict_json.read_text())["exit_code"] == 2


@pytest.mark.slow
def test_a_slowdown_still_fails_when_the_suite_also_changed(tonight, tmp_path):
    """A regression among what was compared is exit 1 (fail), not hidden behind the suite change's exit 2."""
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", scale_time=1 / FASTER)
    for part in (base / "run" / "measurements").glob("part-*.parquet"):
        if pq.read_table(part).to_pylist()[0]["input_label"] == "L03:gaussian:0.1":
            part.unlink()  # the baseline never timed the control
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "fail" and result.exit_code == 1
    assert any("timed tonight but not in the baseline: sdpa-cpu @ L03:gaussian:0.1" in w for w in result.warnings)


@pytest.mark.slow
def test_a_night_that_timed_nothing_is_red_with_a_baseline_or_without(tonight, tmp_path):
    """Issue 39: a nightly whose every row errored exited 0 with NO BASELINE, so a broken first night was green."""
    broken = tmp_path / "broken"
    shutil.copytree(tonight, broken)
    expand_run(broken)
    for part in sorted((broken / "measurements").glob("part-*.parquet")):
        rows = pq.read_table(part).to_pylist()
        write_table_atomic(part, "measurements", [{**r, "status": "error", "time_ns": None} for r in rows])
    first = judge_nightly(broken, out_dir=tmp_path / "first", baseline_dir=tmp_path / "none", figures=False,
                          update_baseline=True)
    assert first.verdict == "nothing timed" and first.exit_code == 4 and not first.baseline_updated
    assert not (tmp_path / "none").exists()  # a broken night never becomes the baseline
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run")
    later = judge_nightly(broken, out_dir=tmp_path / "later", baseline_dir=base, figures=False)
    assert later.verdict == "nothing timed" and later.exit_code == 4
    assert json.loads(later.verdict_json.read_text())["exit_code"] == 4
    assert "# Nightly sustained benchmark: NOTHING TIMED" in later.summary_md.read_text()


@pytest.mark.slow
def test_a_night_the_gate_cannot_judge_is_not_a_pass(tonight, tmp_path):
    """Tonight against a baseline of the same times, at a gate tighter than the CPU's between-run floor: the rows
    are unresolved, exit 6 (issue 39: it printed PASS ... NOT RESOLVED and exited 0)."""
    base = tmp_path / "baseline"
    _copy_run(tonight, base / "run", info={"run_id": "another-night"}, scale_time=1.001)
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, threshold=0.02, figures=False)
    assert result.verdict == "unresolved" and result.exit_code == 6
    verdict = json.loads(result.verdict_json.read_text())
    assert verdict["unresolved"] and verdict["floor"] > 0.1  # a CPU's 5 % between-run cv: the floor is 12 %
    passed = judge_nightly(tonight, out_dir=tmp_path / "out2", baseline_dir=base, threshold=0.02, figures=False,
                           unresolved="pass")
    assert passed.verdict == "pass" and passed.exit_code == 0


@pytest.mark.slow
def test_a_baseline_path_that_is_a_file_is_refused(tonight, tmp_path):
    """Issue 31: --baseline naming a file read as "no baseline yet" and passed."""
    from harness.commits import store_baseline
    from harness.errors import ResultsError

    file = tmp_path / "baseline.json"
    file.write_text("{}")
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=file, figures=False)
    assert result.verdict == "not comparable" and result.exit_code == 2
    assert f"--baseline {file} is a file, not a folder" in result.summary_md.read_text()
    with pytest.raises(ResultsError, match="is a file, not a folder"):
        store_baseline(tonight, file, reason="test")


@pytest.mark.slow
def test_a_baseline_folder_that_lost_its_run_is_not_no_baseline(tonight, tmp_path):
    """Issue 31: a kill between store_baseline's two renames left BASELINE.json and the temporaries but no run/;
    read as "no baseline" it passed. With the old run aside, the update is rolled back; without it, exit 2."""
    base = tmp_path / "baseline"
    _copy_run(tonight, base / ".run.old")
    _copy_run(tonight, base / ".run.new")
    (base / "BASELINE.json").write_text("{}")
    result = judge_nightly(tonight, out_dir=tmp_path / "out", baseline_dir=base, figures=False)
    assert result.verdict == "pass" and (base / "run" / "runs.parquet").is_file()
    assert any("restored from .run.old" in w for w in result.warnings)
    shutil.rmtree(base / "run")
    result = judge_nightly(tonight, out_dir=tmp_path / "out2", baseline_dir=base, figures=False)
    assert result.verdict == "not comparable" and result.exit_code == 2
    assert "says a baseline was stored" in result.summary_md.read_text()


def test_script_rejects_unknown_arguments(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "ci" / "nightly.sh"), "--devcie", "cpu"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2 and "unknown argument --devcie" in proc.stderr


def test_script_help(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "ci" / "nightly.sh"), "--help"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "--device cpu" in proc.stdout and "dry run" in proc.stdout
