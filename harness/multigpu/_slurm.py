"""Slurm job arrays: one array task per GPU (a shard of the suite, or all of it) or per configuration.

`write_slurm_job` writes, under one job folder: `job.json` (the RunConfig and which configurations each task
runs), `bench.sbatch` (the script), `tasks/` (each task's run directory) and `logs/`. Each task is the
worker of `run_multi` in its batch form: it opens the one GPU Slurm allocated to it, checks it is idle,
and runs its configurations with its own telemetry and protocol. `bench merge <job>/tasks/* --out DIR`
then joins the tasks' runs into one run (`merge_runs`). `render_sbatch` is pure, for the golden-file test.

>>> from harness.multigpu import SlurmOptions, plan_tasks
>>> plan_tasks(3, SlurmOptions(per="config"))
((0,), (1,), (2,))
>>> plan_tasks(3, SlurmOptions(per="gpu", tasks=2))
((0, 2), (1,))
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from harness.config import RunConfig
from harness.errors import ConfigError, HarnessError
from harness.multigpu._plan import assign_configs, config_to_dict
from harness.multigpu._select import MULTICAST_OFF

__all__ = ["PER", "SlurmJob", "SlurmOptions", "check_slurm_job", "plan_tasks", "render_sbatch", "submit_slurm_job",
           "write_slurm_job"]

PER = ("gpu", "config")
SCRIPT, JOB = "bench.sbatch", "job.json"


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """How the array is cut and what each task asks Slurm for."""

    per: str = "gpu"  # one task per GPU (a shard, or the whole suite with replicate) or per configuration
    tasks: int | None = None  # per="gpu": the number of GPUs, i.e. array tasks
    replicate: bool = False  # per="gpu": every task runs the whole suite (GPU-to-GPU spread)
    device: str = "cuda:0"  # what each task opens: Slurm shows a task its allocated GPU as cuda:0
    job_name: str = "bench"
    time: str = "02:00:00"
    partition: str | None = None
    account: str | None = None
    cpus_per_task: int = 8
    mem: str | None = None
    max_parallel: int | None = None  # at most this many tasks at once (`--array=0-N%M`)
    sbatch_args: tuple[str, ...] = ()  # more #SBATCH options, e.g. "--constraint=h200"
    setup: tuple[str, ...] = ()  # shell lines before the worker starts: `module load ...`, `source venv/bin/activate`
    python: str = "python"

    def __post_init__(self) -> None:
        if self.per not in PER:
            raise ConfigError(f"--per {self.per!r}: use gpu (one task per GPU) or config (one per configuration).")
        if self.per == "config" and (self.tasks is not None or self.replicate):
            raise ConfigError("--per config makes one task per configuration: --tasks and --replicate do not apply.")
        if self.per == "gpu" and (self.tasks is None or self.tasks < 1):
            raise ConfigError("--per gpu needs --tasks N: how many GPUs (array tasks) to spread the suite over.")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise ConfigError(f"--max-parallel must be >= 1, got {self.max_parallel}.")


@dataclass(frozen=True, kw_only=True)
class SlurmJob:
    out_dir: Path
    script_path: Path
    job_path: Path
    script: str
    tasks: tuple[tuple[int, ...], ...]


def plan_tasks(n_configs: int, options: SlurmOptions) -> tuple[tuple[int, ...], ...]:
    """Configuration indices per array task."""
    if options.per == "config":
        return tuple((i,) for i in range(n_configs))
    return assign_configs(n_configs, options.tasks, replicate=options.replicate)


def _mode(options: SlurmOptions) -> str:
    return "per-config" if options.per == "config" else ("replicate" if options.replicate else "shard")


def render_sbatch(*, options: SlurmOptions, n_tasks: int, n_configs: int, out_dir: Path, workdir: Path) -> str:
    """The sbatch script text (pure: nothing is read or written)."""
    q = lambda p: shlex.quote(str(p))
    what = {"per-config": "one per configuration",
            "replicate": f"one per GPU, each running all {n_configs} configuration(s)",
            "shard": f"one per GPU, each running its round-robin share of {n_configs} configuration(s)"}[_mode(options)]
    array = f"0-{n_tasks - 1}" + (f"%{options.max_parallel}" if options.max_parallel else "")
    directives = [f"--job-name={options.job_name}", f"--array={array}", "--ntasks=1", "--gres=gpu:1",
                  f"--cpus-per-task={options.cpus_per_task}", f"--time={options.time}",
                  f"--output={out_dir / 'logs' / '%A_%a.out'}"]
    directives += [f"--partition={options.partition}"] if options.partition else []
    directives += [f"--account={options.account}"] if options.account else []
    directives += [f"--mem={options.mem}"] if options.mem else []
    directives += list(options.sbatch_args)
    lines = [
        "#!/bin/bash",
        f"# Written by `bench slurm`: {n_tasks} array task(s), {what}, on the one GPU Slurm gives each.",
        "# When every task has finished, join their runs into one:",
        f"#   bench merge {q(out_dir / 'tasks')}/* --out {q(out_dir / 'merged')}",
        *(f"#SBATCH {d}" for d in directives),
        "set -eo pipefail",  # not -u: `module load` and venv activation scripts read unset variables
        "# NVLink multicast stays off: the harness runs no collective at all, and a program that uses",
        "# multicast can take a shared host's GPUs out of service.",
        *(f"export {k}={v}" for k, v in MULTICAST_OFF.items()),
        f"cd {q(workdir)}",
        *options.setup,
        f"exec {options.python} -m harness.multigpu._worker --job {q(out_dir / JOB)} "
        '--task "${SLURM_ARRAY_TASK_ID}"',
    ]
    return "\n".join(lines) + "\n"


def write_slurm_job(config: RunConfig, *, options: SlurmOptions, out_dir: Path | str, workdir: Path | str | None = None,
                    command: str = "", device_factory: str | None = None) -> SlurmJob:
    """Write the job folder (job.json, bench.sbatch, tasks/, logs/) and return what was written.

    Each task opens `options.device` (`config.device` names a GPU of this machine, not of the task's node).
    `workdir` (default: the current directory) is where tasks start, so relative capture paths resolve.
    `device_factory` is for tests only (see GpuSlot).
    """
    out_dir = Path(out_dir).resolve()
    workdir = Path(workdir or Path.cwd()).resolve()
    if any(c.isspace() for c in str(out_dir)):
        raise ConfigError(f"--out {out_dir}: the job folder's path holds a space, which #SBATCH lines (--output) "
                          f"cannot carry. Choose a path without spaces.")
    if (out_dir / JOB).exists():
        raise ConfigError(f"{out_dir} already holds a job ({JOB}); choose another --out.")
    tasks = plan_tasks(len(config.inputs), options)
    results = out_dir / "tasks"
    for d in (out_dir, results, out_dir / "logs"):
        d.mkdir(parents=True, exist_ok=True)
    job_config = replace(config, device=options.device, results_dir=results)
    job = {"config": config_to_dict(job_config), "mode": _mode(options), "tasks": [list(t) for t in tasks],
           "results_dir": str(results), "command": command, "device_factory": device_factory}
    (out_dir / JOB).write_text(json.dumps(job, indent=1, default=str), encoding="utf-8")
    script = render_sbatch(options=options, n_tasks=len(tasks), n_configs=len(config.inputs), out_dir=out_dir,
                           workdir=workdir)
    (out_dir / SCRIPT).write_text(script, encoding="utf-8")
    return SlurmJob(out_dir=out_dir, script_path=out_dir / SCRIPT, job_path=out_dir / JOB, script=script, tasks=tasks)


def _sbatch(args: list[str], run: Callable) -> str:
    try:
        done = run(["sbatch", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HarnessError("sbatch is not on PATH: this machine is not a Slurm submit host. Copy the job folder "
                           "to one and run `sbatch bench.sbatch` there.") from None
    if done.returncode != 0:
        raise HarnessError(f"sbatch {' '.join(args)} failed (status {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")
    return (done.stdout or "") + (done.stderr or "")


def submit_slurm_job(job: SlurmJob, *, run: Callable = subprocess.run) -> str:
    """Submit the array; returns Slurm's job id. An argument list, never a shell string."""
    return _sbatch(["--parsable", str(job.script_path)], run).strip().split(";")[0]


def check_slurm_job(job: SlurmJob, *, run: Callable = subprocess.run) -> str:
    """`sbatch --test-only`: Slurm checks the script and says when it would start; nothing is queued."""
    return _sbatch(["--test-only", str(job.script_path)], run).strip()
