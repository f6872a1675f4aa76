"""A real single-node Slurm (scripts/slurm.sh, private to this test: its own folder, munge socket and ports):
`sbatch --test-only` of a written job, and a job array of CPU suite tasks submitted, merged and reported.

The cluster is skipped only where scripts/slurm.sh says Slurm cannot be had here (exit 3: not root, no
apt-get, packages not installable), with its reason; a cluster that does not come up fails the tests.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.errors import ConfigError, HarnessError
from harness.multigpu import (
    SlurmOptions,
    check_partition,
    check_slurm_job,
    write_slurm_job,
)
from harness.results import read_run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm.sh"
UNAVAILABLE = 3  # scripts/slurm.sh: Slurm cannot be installed or run here
SUITE = ["--device", "cpu", "--quick", "-k", "sdpa-cpu", "--heads", "2", "--seq-len", "256", "--head-dim", "64",
         "--dtype", "fp32", "-i", "gaussian:1", "--idle-s", "0", "--warmin-cap-s", "0.5"]


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    """SLURM_CONF of a cluster brought up for this module and always taken down."""
    folder = tmp_path_factory.mktemp("slurm")
    try:
        # one fake GPU (GRES over a character device): GPU tasks can be scheduled, not run
        up = subprocess.run(["bash", str(SCRIPT), "up", str(folder), "--gpus", "1"], capture_output=True, text=True,
                            timeout=300, check=False)
        if up.returncode == UNAVAILABLE:
            pytest.skip(f"no Slurm here: {up.stderr.strip()}")
        assert up.returncode == 0, f"scripts/slurm.sh up failed:\n{up.stdout}{up.stderr}"
        yield str(folder / "slurm.conf")
    finally:
        subprocess.run(["bash", str(SCRIPT), "down", str(folder)], capture_output=True, timeout=60, check=False)


@pytest.fixture
def on_cluster(slurm_conf, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two tasks share the node's CPUs calmly
    return check_partition(SlurmOptions(per="config", device="cpu", cpus_per_task=1))


def bench(*args: str) -> tuple[int, str]:
    from harness.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_sbatch_accepts_the_script(tmp_path, on_cluster):
    from multigpu_helpers import suite

    job = write_slurm_job(suite(tmp_path), out_dir=tmp_path / "job",
                          options=SlurmOptions(per="config", device="cpu", time="00:10:00", cpus_per_task=1))
    assert "to start at" in check_slurm_job(job)  # sbatch --test-only exits 0: Slurm accepts the script
    too_many = SlurmOptions(per="config", device="cpu", cpus_per_task=on_cluster["cpus"] + 1)
    with pytest.raises(ConfigError, match=f"--cpus-per-task {on_cluster['cpus'] + 1}: the nodes of the default "
                                          f"partition \\(debug\\) have at most {on_cluster['cpus']} CPU"):
        check_partition(too_many)  # sbatch --submit alone would queue it forever (Reason=PartitionConfig)
    assert on_cluster["gpu_nodes"] == on_cluster["nodes"]  # the fake GPU is GRES that sinfo lists
    gpu_job = write_slurm_job(suite(tmp_path), out_dir=tmp_path / "gpu-job",
                              options=SlurmOptions(per="config", device="cuda:0", time="00:10:00", cpus_per_task=1))
    assert "#SBATCH --gres=gpu:1\n" in gpu_job.script and "to start at" in check_slurm_job(gpu_job)
    two = write_slurm_job(suite(tmp_path), out_dir=tmp_path / "two-gpus", options=SlurmOptions(
        per="config", device="cuda:0", cpus_per_task=1, sbatch_args=("--gres=gpu:2",)))
    with pytest.raises(HarnessError, match="sbatch --test-only .* failed"):
        check_slurm_job(two)  # Slurm's own refusal, passed on: the node has one GPU


def _wait(job_id: str, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        queued = subprocess.run(["squeue", "--noheader", "--jobs", job_id], capture_output=True, text=True, timeout=10,
                                check=False)
        if queued.returncode == 0 and not queued.stdout.strip():
            return
        time.sleep(0.5)
    pytest.fail(f"job {job_id} still queued after {timeout_s:.0f} s: {queued.stdout}")


@pytest.mark.slow
def test_a_job_array_of_cpu_tasks_runs_merges_and_reports(tmp_path, on_cluster):
    out = tmp_path / "job"
    code, text = bench("slurm", "--out", str(out), "--per", "gpu", "--tasks", "2", "--replicate",
                       "--cpus-per-task", "1", "--time", "00:05:00", "--test-only", "--", *SUITE)
    assert code == 0 and "to start at" in text, text
    # --test-only left the job folder open; the task device came from the suite's --device, so no GRES
    code, text = bench("slurm", "--out", str(out), "--per", "gpu", "--tasks", "2", "--replicate",
                       "--cpus-per-task", "1", "--time", "00:05:00", "--submit", "--", *SUITE)
    assert code == 0, text
    job = json.loads((out / "job.json").read_text())
    assert job["submitted"] and job["config"]["device"] == "cpu" and "--gres" not in (out / "bench.sbatch").read_text()
    _wait(job["submitted"])
    logs = sorted((out / "logs").glob("*.out"))
    assert len(logs) == 2
    for log in logs:
        assert "RuntimeWarning" not in log.read_text(), log.read_text()
    tasks = sorted((out / "tasks").iterdir())
    assert len(tasks) == 2, [log.read_text() for log in logs]

    code, text = bench("merge", *map(str, tasks), "--out", str(out / "merged"))
    assert code == 0, text  # 0: complete
    merged = read_run(out / "merged")
    assert merged.info["status"] == "complete", merged.info["status_detail"]
    assert "merged run of 2 run(s) of 2 Slurm task(s) on 1 device(s)" in merged.info["notes"]
    # every task's measurement is in the merged run once, with its figures, under its own device label
    got = {(r["measurement_id"], r["time_ns"], r["status"]) for r in merged.measurements.iter_rows(named=True)}
    want = set()
    for t in tasks:
        run, n = read_run(t), json.loads((t / "multigpu.json").read_text())["task"]
        want |= {(f"cpu~task{n}#{r['measurement_id']}", r["time_ns"], r["status"])
                 for r in run.measurements.iter_rows(named=True)}
        assert run.measurements.height == 2 and run.info["status"] == "complete"
    assert got == want and merged.measurements.height == 4
    assert "Spread between GPUs" in text  # two devices of one suite: the spread table, not pooled repeats

    code, text = bench("report", str(out / "merged"), "--html", str(tmp_path / "report.html"))
    assert code == 0, text
    assert "cpu~task1" in (tmp_path / "report.html").read_text()
