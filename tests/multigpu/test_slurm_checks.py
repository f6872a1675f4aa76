"""What `bench slurm` checks before Slurm sees a job: GRES only for GPU tasks, the partition's CPUs, memory and
GPUs (sinfo), the task's device, the Python the tasks run, a job folder reused after --test-only, and a
controller that does not answer. sinfo and sbatch are fakes here; test_slurm_cluster.py runs the real ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from multigpu_helpers import suite
from typer.testing import CliRunner

from harness.errors import ConfigError, HarnessError
from harness.multigpu import (
    SlurmOptions,
    check_partition,
    check_slurm_job,
    render_sbatch,
    submit_slurm_job,
    task_device,
    write_slurm_job,
)

# sinfo --noheader --Node --format=%P|%N|%c|%m|%G: a 2-CPU default partition without GPUs, and a GPU one
SINFO = "debug*|vm|2|21694|(null)\ngpu|g1|64|900000|gpu:h200:8(S:0-1)\ngpu|g2|64|900000|gpu:h200:8(S:0-1)\n"


class FakeSlurm:
    def __init__(self, sinfo: str = SINFO, sbatch: str = "4711;cluster\n") -> None:
        self.sinfo, self.sbatch, self.calls = sinfo, sbatch, []

    def __call__(self, argv, **kw):
        self.calls.append((argv, kw))
        out = self.sinfo if argv[0] == "sinfo" else self.sbatch
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")


def script(**kw) -> str:
    return render_sbatch(options=SlurmOptions(per="config", **kw), n_tasks=2, n_configs=2, out_dir=Path("/j"),
                         workdir=Path("/w"))


def test_gres_only_when_the_tasks_use_gpus():
    assert "#SBATCH --gres=gpu:1\n" in script(device="cuda:0")
    assert "--gres" not in script(device="cpu") and "on the one device (cpu) Slurm gives each" in script(device="cpu")
    own = script(device="cuda:0", sbatch_args=("--gres=gpu:h200:1",))  # the user's own GPU request replaces ours
    assert own.count("--gres") == 1 and "#SBATCH --gres=gpu:h200:1\n" in own


def test_the_partition_is_checked_before_sbatch(tmp_path):
    cpu = {"per": "config", "device": "cpu"}
    with pytest.raises(ConfigError, match=r"--cpus-per-task 8: the nodes of the default partition \(debug\) have at "
                                          r"most 2 CPU\(s\).*Pass --cpus-per-task 2 or fewer"):
        check_partition(SlurmOptions(**cpu), run=FakeSlurm())  # the default 8 on a 2-CPU node
    with pytest.raises(ConfigError, match=r"--mem 64G: the nodes of the default partition \(debug\) have at most "
                                          r"21694 MB"):
        check_partition(SlurmOptions(**cpu, cpus_per_task=2, mem="64G"), run=FakeSlurm())
    with pytest.raises(ConfigError, match=r"asks for a GPU .* no node of the default partition \(debug\) has GPU GRES"
                                          r".*--task-device cpu"):
        check_partition(SlurmOptions(per="config", cpus_per_task=2), run=FakeSlurm())
    with pytest.raises(ConfigError, match=r"--partition big: sinfo lists no such partition \(it lists debug, gpu\)"):
        check_partition(SlurmOptions(**cpu, partition="big"), run=FakeSlurm())
    found = check_partition(SlurmOptions(per="config", partition="gpu", mem="512G"), run=FakeSlurm())
    assert found == {"partition": "gpu", "nodes": ["g1", "g2"], "cpus": 64, "memory_mb": 900000,
                     "gpu_nodes": ["g1", "g2"]}
    assert check_partition(SlurmOptions(**cpu, cpus_per_task=2, mem="20000M"), run=FakeSlurm())["cpus"] == 2
    # a refusal comes before sbatch: nothing is queued that could only ever pend
    job = write_slurm_job(suite(tmp_path), options=SlurmOptions(**cpu), out_dir=tmp_path / "job")
    fake = FakeSlurm()
    with pytest.raises(ConfigError, match="--cpus-per-task 8"):
        submit_slurm_job(job, run=fake)
    with pytest.raises(ConfigError, match="--cpus-per-task 8"):
        check_slurm_job(job, run=fake)
    assert [argv[0] for argv, _ in fake.calls] == ["sinfo", "sinfo"]


def test_a_controller_that_does_not_answer_is_said_quickly(tmp_path):
    def silent(argv, **kw):
        assert kw["timeout"] <= 15  # sinfo alone retries for ~9 s, sbatch for ~18 s
        raise subprocess.TimeoutExpired(argv, kw["timeout"])

    job = write_slurm_job(suite(tmp_path), options=SlurmOptions(per="config", device="cpu"), out_dir=tmp_path / "job")
    with pytest.raises(HarnessError, match=r"had no answer within 15 s: Slurm's controller \(slurmctld\) does not "
                                           r"answer\. Check `scontrol ping`"):
        check_slurm_job(job, run=silent)

    def missing(argv, **kw):
        raise FileNotFoundError(argv[0])

    with pytest.raises(HarnessError, match="sinfo is not on PATH: this machine is not a Slurm submit host"):
        check_slurm_job(job, run=missing)


def test_the_task_device_comes_from_the_suite():
    assert task_device(None, ["--device", "cpu", "--quick"]) == "cpu"
    assert task_device(None, ["--quick", "--device=cpu"]) == "cpu"
    assert task_device("cpu", ["--device", "cpu"]) == "cpu"
    assert task_device(None, ["--quick"]) == "cuda:0"  # Slurm shows a task its GPU as cuda:0
    assert task_device("cuda:0", []) == "cuda:0"
    with pytest.raises(ConfigError, match=r"--task-device cuda:0 and the suite's --device cpu \(after `--`\) differ"):
        task_device("cuda:0", ["--device", "cpu"])


def test_bench_slurm_takes_the_device_and_python_of_the_suite(tmp_path):
    from harness.cli import app

    small = ["--quick", "--seq-len", "32", "--heads", "2", "--head-dim", "8", "--dtype", "fp32"]
    done = CliRunner().invoke(app, ["slurm", "--out", str(tmp_path / "job"), "--per", "config", "--",
                                    "--device", "cpu", *small], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    job = json.loads((tmp_path / "job" / "job.json").read_text())
    assert job["config"]["device"] == "cpu" and job["config"]["kernels"] == ["sdpa-cpu"]
    assert "--gres" not in done.output
    # the interpreter of the submitting process, recorded with what decides which harness it imports
    assert job["python"] == sys.executable and f"exec {sys.executable} -m harness.multigpu._worker" in done.output
    assert job["python_version"] == sys.version.split()[0] and "PATH" in job["environment"]
    clash = CliRunner().invoke(app, ["slurm", "--out", str(tmp_path / "job2"), "--per", "config", "--task-device",
                                     "cuda:0", "--", "--device", "cpu", *small], env={"COLUMNS": "200"})
    assert clash.exit_code == 2 and "--task-device cuda:0 and the suite's --device cpu" in clash.output


def test_a_job_only_written_or_checked_can_be_rewritten_and_submitted(tmp_path):
    options = SlurmOptions(per="config", device="cpu", cpus_per_task=1)
    job = write_slurm_job(suite(tmp_path), options=options, out_dir=tmp_path / "job")
    check_slurm_job(job, run=FakeSlurm(sbatch="sbatch: Job 3 to start at 2026-12-01T21:00:00\n"))
    again = write_slurm_job(suite(tmp_path, seeds=(0, 1, 2)), options=options, out_dir=tmp_path / "job")
    assert len(again.tasks) == 3 and json.loads(again.job_path.read_text())["submitted"] is None
    assert submit_slurm_job(again, run=FakeSlurm()) == "4711"
    assert json.loads(again.job_path.read_text())["submitted"] == "4711"
    with pytest.raises(ConfigError, match=r"already holds a job \(job 4711, submitted\).*bench merge"):
        write_slurm_job(suite(tmp_path), options=options, out_dir=tmp_path / "job")
    # a folder whose tasks wrote runs is not overwritten either, even if job.json lost its id
    other = write_slurm_job(suite(tmp_path), options=options, out_dir=tmp_path / "job2")
    (tmp_path / "job2" / "tasks" / "20261201-task0000").mkdir()
    with pytest.raises(ConfigError, match=r"already holds a job \(task runs under tasks/\)"):
        write_slurm_job(suite(tmp_path), options=options, out_dir=other.out_dir)


def test_the_worker_module_starts_without_a_runpy_warning(tmp_path):
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "harness.multigpu._worker", "--job",
                           str(tmp_path / "absent.json"), "--task", "0"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert "RuntimeWarning" not in done.stderr and done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["message"].startswith(f"Cannot read the job file {tmp_path / 'absent.json'}")
