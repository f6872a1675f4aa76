"""`bench slurm` and `bench merge`: parse, call, render (`multigpu_output` renders, as for `bench sustained --gpus`).

Registered on the main app in harness/cli. `bench slurm` takes `bench sustained`'s own options after
`--` (parsed by `harness.cli.sustained.sustained_config_from_args`), so the suite is described once:

    bench slurm --per gpu --tasks 8 --out jobs/h200 --partition gpu -- -k sdpa-flash -i gaussian:1 --quick
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.cli.common_args import command_line as _command, console as _console, fail as _fail
from harness.cli.multigpu_output import render_multi
from harness.cli.sustained import sustained_config_from_args
from harness.errors import HarnessError
from harness.multigpu import (
    SlurmOptions,
    check_slurm_job,
    merge_exit_code,
    merge_runs,
    submit_slurm_job,
    task_device as _task_device,
    write_slurm_job,
)
from harness.suite import given_settings

__all__ = ["merge", "slurm"]


def slurm(
    args: List[str] = typer.Argument(None, help="`bench sustained` options, after `--` (the suite to run)"),
    out: Path = typer.Option(..., help="job folder: bench.sbatch, job.json, tasks/ and logs/ are written here"),
    per: Optional[str] = typer.Option(None, help=f"gpu: one array task per GPU; config: one per configuration (default "
                                                 f"{SlurmOptions.per})"),
    tasks: Optional[int] = typer.Option(None, help="with --per gpu: how many GPUs (array tasks)"),
    replicate: bool = typer.Option(False, help="with --per gpu: every task runs the whole suite (GPU-to-GPU spread)"),
    partition: Optional[str] = typer.Option(None, help="Slurm partition (default: the cluster's default partition)"),
    account: Optional[str] = typer.Option(None, help="Slurm account to charge (default: your default account)"),
    time: Optional[str] = typer.Option(None, help=f"time limit of each task (default {SlurmOptions.time})"),
    job_name: Optional[str] = typer.Option(None, help=f"Slurm job name (default {SlurmOptions.job_name})"),
    cpus_per_task: Optional[int] = typer.Option(None, help=f"CPUs of each task; checked against the partition's nodes "
                                                           f"(sinfo; default {SlurmOptions.cpus_per_task})"),
    mem: Optional[str] = typer.Option(None, help="memory of each task, e.g. 64G (default: the partition's default)"),
    max_parallel: Optional[int] = typer.Option(None, help="at most this many tasks at once"),
    sbatch_arg: List[str] = typer.Option([], "--sbatch-arg", help="another #SBATCH option, e.g. --constraint=h200 (repeatable)"),
    setup: List[str] = typer.Option([], "--setup", help="a shell line run before each task, e.g. 'source .venv/bin/activate' (repeatable)"),
    python: Optional[str] = typer.Option(None, help="the Python that runs each task (default: this one, sys.executable)"),
    task_device: Optional[str] = typer.Option(None, help="what each task opens (default: the suite's --device, else cuda:0: Slurm shows a task its GPU as cuda:0)"),
    submit: bool = typer.Option(False, help="submit with sbatch (default: write the job and print the script)"),
    test_only: bool = typer.Option(False, help="ask `sbatch --test-only` to check the script; nothing is queued"),
) -> None:
    """Write a Slurm job array for a suite (and with --submit submit it); `bench merge` joins the tasks' runs."""
    console = _console()
    try:
        options = SlurmOptions(tasks=tasks, replicate=replicate, device=_task_device(task_device, args or []),
                               partition=partition, account=account, mem=mem, max_parallel=max_parallel,
                               sbatch_args=tuple(sbatch_arg), setup=tuple(setup),
                               **given_settings(per=per, job_name=job_name, time=time, cpus_per_task=cpus_per_task,
                                                python=python or None))
        config = sustained_config_from_args(list(args or []))
        job = write_slurm_job(config, options=options, out_dir=out, command=_command())
        if not submit:
            typer.echo(job.script, nl=False)
        console.print(f"[dim]wrote {job.script_path} and {job.job_path}: {len(job.tasks)} task(s)[/]", highlight=False)
        if test_only:
            console.print(check_slurm_job(job), highlight=False)
        if submit:
            job_id = submit_slurm_job(job)
            console.print(f"submitted job {job_id}; when it has finished: bench merge {job.out_dir / 'tasks'}/* "
                          f"--out {job.out_dir / 'merged'}", highlight=False)
    except HarnessError as exc:
        _fail(exc)


def merge(
    run_dirs: List[Path] = typer.Argument(..., help="run directories to join (e.g. a Slurm job's tasks/*)"),
    out: Path = typer.Option(..., help="the merged run directory to create"),
) -> None:
    """Join per-GPU or per-task runs into one run; each row keeps its GPU. Exit status 0 complete, 4 failed, 5 incomplete, 2 bad input."""
    try:
        result = merge_runs(run_dirs, out=out, command=_command())
    except HarnessError as exc:
        _fail(exc)
    render_multi(result, _console())
    raise typer.Exit(merge_exit_code(result.status))  # 0 complete, 4 failed, 5 incomplete

