"""Slurm job arrays: one array task per GPU (a shard of the suite, or all of it) or per configuration.

`write_slurm_job` writes, under one job folder: `job.json` (the RunConfig, which configurations each task
runs, the Python and environment it was written with), `bench.sbatch` (the script), `tasks/` (each task's
run directory) and `logs/`. Each task is the worker of `run_multi` in its batch form: it opens the one GPU
Slurm allocated to it (or the CPU, `--task-device cpu`), checks it is idle, and runs its configurations with
its own telemetry and protocol. `bench merge <job>/tasks/* --out DIR` then joins the tasks' runs into one
run (`merge_runs`). `render_sbatch` is pure, for the golden-file test.

Before anything is queued (`--submit` or `--test-only`), `check_partition` asks `sinfo` whether the
partition's nodes have the CPUs, memory and GPU GRES a task asks for: Slurm itself would accept a job that
can never start and leave it pending (`Reason=PartitionConfig`).

>>> from harness.multigpu import SlurmOptions, plan_tasks
>>> plan_tasks(3, SlurmOptions(per="config"))
((0,), (1,), (2,))
>>> plan_tasks(3, SlurmOptions(per="gpu", tasks=2))
((0, 2), (1,))
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.config import RunConfig
from harness.errors import ConfigError, HarnessError
from harness.multigpu._plan import assign_configs
from harness.multigpu._select import MULTICAST_OFF

__all__ = ["PER", "SlurmJob", "SlurmOptions", "check_partition", "check_slurm_job", "plan_tasks", "render_sbatch",
           "submit_slurm_job", "task_device", "task_logs", "write_slurm_job"]

PER = ("gpu", "config")
SCRIPT, JOB = "bench.sbatch", "job.json"
# What the job file records of the submitting process's environment: what decides which harness a task imports.
ENVIRONMENT = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PATH")
SINFO_TIMEOUT_S = 15.0


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """How the array is cut and what each task asks Slurm for."""

    per: str = "gpu"  # one task per GPU (a shard, or the whole suite with replicate) or per configuration
    tasks: int | None = None  # per="gpu": the number of GPUs, i.e. array tasks
    replicate: bool = False  # per="gpu": every task runs the whole suite (GPU-to-GPU spread)
    device: str = "cuda:0"  # what each task opens: Slurm shows a task its allocated GPU as cuda:0; or "cpu"
    job_name: str = "bench"
    time: str = "02:00:00"
    partition: str | None = None
    account: str | None = None
    cpus_per_task: int = 8
    mem: str | None = None
    max_parallel: int | None = None  # at most this many tasks at once (`--array=0-N%M`)
    sbatch_args: tuple[str, ...] = ()  # more #SBATCH options, e.g. "--constraint=h200"
    setup: tuple[str, ...] = ()  # shell lines before the worker starts: `module load ...`, `source venv/bin/activate`
    # The submitting process's interpreter: a task imports the same harness with the same packages (a bare
    # `python` is whatever comes first on the node's PATH, often one without pyarrow).
    python: str = field(default_factory=lambda: sys.executable)

    @property
    def uses_gpu(self) -> bool:
        return not self.device.startswith("cpu")

    @property
    def asks_gres(self) -> bool:
        """Whether the script asks for a GPU (`--gres=gpu:1`); an own --gres/--gpus in sbatch_args replaces it."""
        own = any(re.match(r"--(gres|gpus|gpus-per-task|gpus-per-node)(=|$)", a) for a in self.sbatch_args)
        return self.uses_gpu and not own

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
    options: SlurmOptions


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
    unit = "GPU" if options.uses_gpu else "task"
    what = {"per-config": "one per configuration",
            "replicate": f"one per {unit}, each running all {n_configs} configuration(s)",
            "shard": f"one per {unit}, each running its round-robin share of {n_configs} configuration(s)"}[_mode(options)]
    array = f"0-{n_tasks - 1}" + (f"%{options.max_parallel}" if options.max_parallel else "")
    on = "GPU" if options.uses_gpu else f"device ({options.device})"
    # --export=ALL: the task starts in the submitting shell's environment (Slurm's default, said here because
    # a site can change it with SBATCH_EXPORT), which is what `python` below was checked in.
    directives = [f"--job-name={options.job_name}", f"--array={array}", "--ntasks=1", "--export=ALL",
                  *(["--gres=gpu:1"] if options.asks_gres else []),
                  f"--cpus-per-task={options.cpus_per_task}", f"--time={options.time}",
                  f"--output={out_dir / 'logs' / '%A_%a.out'}"]
    directives += [f"--partition={options.partition}"] if options.partition else []
    directives += [f"--account={options.account}"] if options.account else []
    directives += [f"--mem={options.mem}"] if options.mem else []
    directives += list(options.sbatch_args)
    lines = [
        "#!/bin/bash",
        f"# Written by `bench slurm`: {n_tasks} array task(s), {what}, on the one {on} Slurm gives each.",
        "# When every task has finished, join their runs into one:",
        f"#   bench merge {q(out_dir / 'tasks')}/* --out {q(out_dir / 'merged')}",
        *(f"#SBATCH {d}" for d in directives),
        "set -eo pipefail",  # not -u: `module load` and venv activation scripts read unset variables
        "# NVLink multicast stays off: the harness runs no collective at all, and a program that uses",
        "# multicast can take a shared host's GPUs out of service.",
        *(f"export {k}={v}" for k, v in MULTICAST_OFF.items()),
        f"cd {q(workdir)}",
        *options.setup,
        "# The Python `bench slurm` ran in (its --python changes it): the same harness, the same packages.",
        f"exec {options.python} -m harness.multigpu._worker --job {q(out_dir / JOB)} "  # noqa: ISC004
        '--task "${SLURM_ARRAY_TASK_ID}"',
    ]
    return "\n".join(lines) + "\n"


def task_device(task_device: str | None, suite_args: Sequence[str]) -> str:
    """What each task opens: `--task-device`, else the suite's own `--device` (after `--`), else cuda:0.

    Both given and different is refused: the suite's `--device` would otherwise be silently replaced.
    """
    suite = None
    for i, a in enumerate(suite_args):
        if a == "--device" and i + 1 < len(suite_args):
            suite = suite_args[i + 1]
        elif a.startswith("--device="):
            suite = a.split("=", 1)[1]
    if task_device is not None and suite is not None and task_device != suite:
        raise ConfigError(f"--task-device {task_device} and the suite's --device {suite} (after `--`) differ: each "
                          f"task opens one device. Give one of them (the suite's --device is enough), or the same.")
    return task_device or suite or "cuda:0"


def _existing_job(out_dir: Path) -> None:
    """Refuse an --out whose job was submitted or whose tasks wrote runs; a job only written (or checked with
    --test-only) is rewritten."""
    job_file, results = out_dir / JOB, out_dir / "tasks"
    if not job_file.exists():
        return
    try:
        old = json.loads(job_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    ran = results.is_dir() and any(results.iterdir())
    if old.get("submitted") or ran:
        what = f"job {old['submitted']}, submitted" if old.get("submitted") else "task runs under tasks/"
        raise ConfigError(f"{out_dir} already holds a job ({what}); choose another --out, or merge it with "
                          f"`bench merge {results}/* --out {out_dir / 'merged'}`.")


def write_slurm_job(config: RunConfig, *, options: SlurmOptions, out_dir: Path | str, workdir: Path | str | None = None,
                    command: str = "", device_factory: str | None = None) -> SlurmJob:
    """Write the job folder (job.json, bench.sbatch, tasks/, logs/) and return what was written.

    Each task opens `options.device` (`config.device` names a device of this machine, not of the task's node).
    `workdir` (default: the current directory) is where tasks start, so relative capture paths resolve.
    `device_factory` is for tests only (see GpuSlot).
    """
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file; --out names the job folder (bench.sbatch, job.json, tasks/ and "
                          f"logs/ go there). Pass a folder, new or one a job was written to.")
    workdir = Path(workdir or Path.cwd()).resolve()
    if any(c.isspace() for c in str(out_dir)):
        raise ConfigError(f"--out {out_dir}: the job folder's path holds a space, which #SBATCH lines (--output) "
                          f"cannot carry. Choose a path without spaces.")
    _existing_job(out_dir)
    tasks = plan_tasks(len(config.inputs), options)
    results = out_dir / "tasks"
    for d in (out_dir, results, out_dir / "logs"):
        d.mkdir(parents=True, exist_ok=True)
    job_config = replace(config, device=options.device, results_dir=results)
    job = {"config": job_config.to_dict(), "mode": _mode(options), "tasks": [list(t) for t in tasks],
           "results_dir": str(results), "command": command, "device_factory": device_factory,
           "python": options.python, "python_version": sys.version.split()[0],
           "environment": {k: os.environ[k] for k in ENVIRONMENT if k in os.environ}, "submitted": None}
    (out_dir / JOB).write_text(json.dumps(job, indent=1, default=str), encoding="utf-8")
    script = render_sbatch(options=options, n_tasks=len(tasks), n_configs=len(config.inputs), out_dir=out_dir,
                           workdir=workdir)
    (out_dir / SCRIPT).write_text(script, encoding="utf-8")
    return SlurmJob(out_dir=out_dir, script_path=out_dir / SCRIPT, job_path=out_dir / JOB, script=script, tasks=tasks,
                    options=options)


def _slurm_command(argv: list[str], run: Callable, *, timeout: float | None = None):
    try:
        return run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except FileNotFoundError:
        raise HarnessError(f"{argv[0]} is not on PATH: this machine is not a Slurm submit host. Copy the job folder "
                           f"to one and run `sbatch bench.sbatch` there.") from None
    except subprocess.TimeoutExpired:
        raise HarnessError(f"`{' '.join(argv)}` had no answer within {timeout:.0f} s: Slurm's controller "
                           f"(slurmctld) does not answer. Check `scontrol ping`, and SLURM_CONF "
                           f"({os.environ.get('SLURM_CONF', 'not set')}).") from None


def _sbatch(args: list[str], run: Callable) -> str:
    done = _slurm_command(["sbatch", *args], run)
    if done.returncode != 0:
        raise HarnessError(f"sbatch {' '.join(args)} failed (status {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")
    return (done.stdout or "") + (done.stderr or "")


_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _mem_mb(mem: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", mem.strip().upper())
    if not m:
        raise ConfigError(f"--mem {mem!r}: use a size sbatch reads, e.g. 16G or 16000M.")
    return float(m.group(1)) * _MEM_UNITS[m.group(2) or "M"]


def check_partition(options: SlurmOptions, *, run: Callable = subprocess.run) -> dict:
    """Refuse a task its partition's nodes cannot give (CPUs, memory, GPU GRES), as `sinfo -N` lists them.

    Returns what was found: {"partition", "nodes", "cpus", "memory_mb", "gpu_nodes"}.
    """
    done = _slurm_command(["sinfo", "--noheader", "--Node", "--format=%P|%N|%c|%m|%G"], run, timeout=SINFO_TIMEOUT_S)
    if done.returncode != 0:
        raise HarnessError(f"sinfo failed (status {done.returncode}): {(done.stderr or done.stdout).strip()}. The job "
                           f"is written but not queued; is slurmctld up (`scontrol ping`, SLURM_CONF="
                           f"{os.environ.get('SLURM_CONF', 'not set')})?")
    nodes: dict[str, list[dict]] = {}
    default = None
    for line in (done.stdout or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        name, node, cpus, mem, gres = parts
        if name.endswith("*"):
            name = default = name[:-1]
        nodes.setdefault(name, []).append({"node": node, "cpus": int(re.sub(r"\D", "", cpus) or 0),
                                           "memory_mb": int(re.sub(r"\D", "", mem) or 0), "gres": gres})
    partition = options.partition or default
    flag = f"--partition {options.partition}" if options.partition else f"the default partition ({default})"
    if partition not in nodes:
        raise ConfigError(f"--partition {partition}: sinfo lists no such partition (it lists "
                          f"{', '.join(sorted(nodes)) or 'none'}). Pass one of those." if options.partition else
                          "sinfo names no default partition: pass --partition.")
    found = nodes[partition]
    cpus, mem = max(n["cpus"] for n in found), max(n["memory_mb"] for n in found)
    gpu_nodes = [n["node"] for n in found if re.search(r"(^|,)gpu[:(]", n["gres"])]
    if options.cpus_per_task > cpus:
        raise ConfigError(f"--cpus-per-task {options.cpus_per_task}: the nodes of {flag} have at most {cpus} CPU(s), "
                          f"so the tasks could never start (Slurm would keep them pending, Reason=PartitionConfig). "
                          f"Pass --cpus-per-task {min(cpus, 8)} or fewer, or another --partition.")
    if options.mem is not None and _mem_mb(options.mem) > mem:
        raise ConfigError(f"--mem {options.mem}: the nodes of {flag} have at most {mem} MB, so the tasks could never "
                          f"start. Pass --mem {mem}M or less, or another --partition.")
    if options.asks_gres and not gpu_nodes:
        raise ConfigError(f"Each task asks for a GPU (--gres=gpu:1, because it opens {options.device}) but no node "
                          f"of {flag} has GPU GRES (sinfo %G: {', '.join(sorted({n['gres'] for n in found}))}). "
                          f"Pass the --partition of the GPU nodes, or --task-device cpu for a CPU-only suite.")
    return {"partition": partition, "nodes": [n["node"] for n in found], "cpus": cpus, "memory_mb": mem,
            "gpu_nodes": gpu_nodes}


def submit_slurm_job(job: SlurmJob, *, run: Callable = subprocess.run) -> str:
    """Check the partition, submit the array and record its id in job.json; returns Slurm's job id.
    An argument list, never a shell string."""
    check_partition(job.options, run=run)
    job_id = _sbatch(["--parsable", str(job.script_path)], run).strip().split(";")[0]
    saved = json.loads(job.job_path.read_text(encoding="utf-8"))
    saved["submitted"] = job_id
    job.job_path.write_text(json.dumps(saved, indent=1, default=str), encoding="utf-8")
    return job_id


def check_slurm_job(job: SlurmJob, *, run: Callable = subprocess.run) -> str:
    """Check the partition, then `sbatch --test-only`: Slurm checks the script and says when it would start;
    nothing is queued, and the job folder stays open for `--submit`."""
    check_partition(job.options, run=run)
    return _sbatch(["--test-only", str(job.script_path)], run).strip()


def task_logs(run_dir: Path | str) -> list[Path]:
    """The Slurm logs of the task that wrote (or should have written) `run_dir`, a folder of a job's tasks/.

    A task's run is `tasks/<id>-taskNNNN-...`; its log `logs/<job id>_<N>.out`. Without a task number (the
    shell passed `tasks/*` unexpanded), every log of the job. Empty when `run_dir` is not in a job folder.
    """
    run_dir = Path(run_dir)
    job_dir = run_dir.parent.parent if run_dir.parent.name == "tasks" else None
    if job_dir is None or not (job_dir / JOB).is_file() or not (job_dir / "logs").is_dir():
        return []
    m = re.search(r"task(\d+)", run_dir.name)
    pattern = f"*_{int(m.group(1))}.out" if m else "*.out"
    return sorted((job_dir / "logs").glob(pattern))
