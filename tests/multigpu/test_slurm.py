"""Slurm job arrays: the script (golden file), the job file, tasks run as real worker processes on the CPU, and
`merge_runs` joining them. `sbatch --test-only` and a whole job array on a real Slurm: test_slurm_cluster.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from multigpu_helpers import suite

from harness.errors import ConfigError, HarnessError
from harness.multigpu import (
    SlurmOptions,
    check_slurm_job,
    merge_runs,
    plan_tasks,
    render_sbatch,
    submit_slurm_job,
    write_slurm_job,
)
from harness.results import read_run
from tests.workers.forked_run import run as forked_run

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "replicate-2gpu.sbatch"
GOLDEN_OPTIONS = SlurmOptions(per="gpu", tasks=2, replicate=True, partition="gpu", account="attn", time="01:30:00",
                              max_parallel=2, sbatch_args=("--constraint=h200",), setup=("source .venv/bin/activate",),
                              python="/home/me/attn/.venv/bin/python")


def test_script_matches_the_golden_file():
    script = render_sbatch(options=GOLDEN_OPTIONS, n_tasks=2, n_configs=3, out_dir=Path("/scratch/bench/h200-job"),
                           workdir=Path("/home/me/attn"))
    assert script == GOLDEN.read_text(), (
        f"the sbatch script changed; if on purpose, rewrite {GOLDEN} from render_sbatch and review the diff")


def test_golden_script_is_valid_bash_with_directives_first():
    text = GOLDEN.read_text()
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(GOLDEN)], check=True)
    lines = text.splitlines()
    first_command = next(i for i, x in enumerate(lines) if x and not x.startswith("#"))
    # sbatch stops reading #SBATCH lines at the first command
    assert all(i < first_command for i, x in enumerate(lines) if x.startswith("#SBATCH"))
    assert "export NCCL_NVLS_ENABLE=0" in lines and "--gres=gpu:1" in text


def test_golden_directives_are_what_the_options_ask_for():
    # Written by hand from sbatch(1), not from render_sbatch: the golden file was first made by the code it
    # checks, so this is what makes it a statement about Slurm rather than about the code's last output.
    lines = GOLDEN.read_text().splitlines()
    directives = [x.removeprefix("#SBATCH ") for x in lines if x.startswith("#SBATCH ")]
    assert sorted(directives) == sorted([
        "--job-name=bench",
        "--array=0-1%2",  # two tasks (indices 0 and 1), at most max_parallel=2 at once
        "--ntasks=1", "--export=ALL",
        "--gres=gpu:1",  # per="gpu": one GPU a task
        "--cpus-per-task=8",
        "--time=01:30:00", "--partition=gpu", "--account=attn",
        "--output=/scratch/bench/h200-job/logs/%A_%a.out",  # %A job id, %a array index
        "--constraint=h200",  # sbatch_args pass through as given
    ])
    assert lines[-1].split() == ["exec", "/home/me/attn/.venv/bin/python", "-m", "harness.multigpu._worker", "--job",
                                 "/scratch/bench/h200-job/job.json", "--task", '"${SLURM_ARRAY_TASK_ID}"']
    assert lines.index("cd /home/me/attn") < lines.index("source .venv/bin/activate") < len(lines) - 1


def test_tasks_per_configuration_and_per_gpu():
    assert plan_tasks(4, SlurmOptions(per="config")) == ((0,), (1,), (2,), (3,))
    assert plan_tasks(4, SlurmOptions(per="gpu", tasks=3)) == ((0, 3), (1,), (2,))
    assert plan_tasks(2, SlurmOptions(per="gpu", tasks=3, replicate=True)) == ((0, 1),) * 3
    with pytest.raises(ConfigError, match="3 workers for 2 configuration"):
        plan_tasks(2, SlurmOptions(per="gpu", tasks=3))
    with pytest.raises(ConfigError, match="--per gpu needs --tasks"):
        SlurmOptions(per="gpu")
    with pytest.raises(ConfigError, match="--tasks and --replicate do not apply"):
        SlurmOptions(per="config", tasks=2)
    with pytest.raises(ConfigError, match="use gpu .* or config"):
        SlurmOptions(per="node")


def test_job_folder(tmp_path):
    job = write_slurm_job(suite(tmp_path, seeds=(0, 1, 2)), options=SlurmOptions(per="config"), out_dir=tmp_path / "job",
                          workdir=tmp_path)
    assert job.tasks == ((0,), (1,), (2,)) and (tmp_path / "job" / "logs").is_dir()
    assert job.script == render_sbatch(options=SlurmOptions(per="config"), n_tasks=3, n_configs=3,
                                       out_dir=tmp_path / "job", workdir=tmp_path)
    assert "--array=0-2\n" in job.script and "one per configuration" in job.script
    saved = json.loads(job.job_path.read_text())
    assert saved["config"]["device"] == "cuda:0"  # each task opens its allocated GPU, not this machine's
    assert saved["config"]["results_dir"] == str(tmp_path / "job" / "tasks")
    with pytest.raises(ConfigError, match="holds a space"):
        write_slurm_job(suite(tmp_path), options=SlurmOptions(per="config"), out_dir=tmp_path / "a b")


def test_submit_is_an_argument_list(tmp_path):
    job = write_slurm_job(suite(tmp_path), options=SlurmOptions(per="config"), out_dir=tmp_path / "job")
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        out = "gpu*|n1|64|900000|gpu:8\n" if argv[0] == "sinfo" else "4711;cluster\n"
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    assert submit_slurm_job(job, run=fake_run) == "4711"
    assert calls[-1] == ["sbatch", "--parsable", str(job.script_path)] and calls[0][0] == "sinfo"

    def refused(argv, **kw):
        if argv[0] == "sinfo":
            return fake_run(argv)
        return subprocess.CompletedProcess(argv, 1, stdout="", stderr="sbatch: error: invalid partition")

    with pytest.raises(HarnessError, match="invalid partition"):
        check_slurm_job(job, run=refused)


def _run_task(job, task: int, env: dict) -> subprocess.CompletedProcess:
    # what the array task's `exec python -m harness.multigpu._worker ...` line runs, with SLURM_ARRAY_TASK_ID set
    return forked_run([sys.executable, "-m", "harness.multigpu._worker", "--job", str(job.job_path)],
                      env={**env, "SLURM_ARRAY_TASK_ID": str(task)}, timeout=300)


@pytest.mark.slow
def test_tasks_run_as_workers_and_merge_into_one_run(tmp_path, worker_env_for_tests):
    options = SlurmOptions(per="gpu", tasks=2, device="cpu")  # the CPU stands in for each task's GPU
    job = write_slurm_job(suite(tmp_path, seeds=(0, 1, 2)), options=options, out_dir=tmp_path / "job")
    env = dict(os.environ)
    done = [_run_task(job, t, env) for t in range(2)]
    for d in done:
        assert d.returncode == 0, d.stderr
        assert json.loads(d.stdout.splitlines()[-1])["event"] == "done"
    res = merge_runs(sorted((tmp_path / "job" / "tasks").iterdir()), out=tmp_path / "job" / "merged")
    assert res.status == "complete", res.status_detail
    assert sorted(r["config_index"] for r in res.measurements) == [0, 0, 1, 1, 2, 2]
    run = read_run(tmp_path / "job" / "merged")
    assert run.info["status"] == "complete" and run.measurements.height == 6
    # both tasks measured "the CPU", and each id names the suite's configuration, so none collide
    assert sorted(run.measurements["measurement_id"]) == [f"cpu#c{c}-sdpa-cpu-r{r}" for c in range(3) for r in (0, 1)]
    assert sorted(p.name for p in (tmp_path / "job" / "merged" / "gpus").iterdir()) == ["cpu-task0000", "cpu-task0001"]


def test_a_task_outside_the_array_is_refused(tmp_path, worker_env_for_tests):
    job = write_slurm_job(suite(tmp_path), options=SlurmOptions(per="config", device="cpu"), out_dir=tmp_path / "job")
    d = _run_task(job, 5, dict(os.environ))
    assert d.returncode == 3 and "Task 5 is outside the job's 2 task(s)" in d.stdout


def test_scancel_keeps_finished_measurements(tmp_path, worker_env_for_tests):
    """SIGTERM (what scancel and a time limit send first) marks the task's run incomplete, keeping what it measured."""
    import signal

    job = write_slurm_job(suite(tmp_path, seeds=tuple(range(6))), options=SlurmOptions(per="gpu", tasks=1, device="cpu"),
                          out_dir=tmp_path / "job")
    proc = subprocess.Popen([sys.executable, "-m", "harness.multigpu._worker", "--job", str(job.job_path), "--task", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if json.loads(line)["event"] == "measured":
            proc.send_signal(signal.SIGTERM)
            break
    rest = [json.loads(x) for x in proc.stdout]
    assert proc.wait(timeout=120) == 130
    assert rest[-1]["event"] == "error" and rest[-1]["kind"] == "interrupted"
    (task_run,) = (tmp_path / "job" / "tasks").iterdir()
    run = read_run(task_run)
    assert run.info["status"] == "incomplete" and 1 <= run.measurements.height < 12
