"""Several GPUs: one worker process per GPU of a node (`run_multi`), Slurm job arrays, and merged runs.

Each worker sees one GPU, chosen by PCI bus id, checks it is idle, and runs the ordinary sustained protocol
with its own telemetry; no worker talks to another (the harness needs no collective, and NVLink multicast
stays off). Configurations are sharded round-robin over the GPUs, or replicated on every GPU to measure the
spread between GPUs. The pieces are merged into one run directory whose rows name their GPU (`with_gpu`).

>>> from harness.multigpu import assign_configs, select_gpus, cpu_stand_ins
>>> [s.gpu_id for s in select_gpus("all", present=cpu_stand_ins(2))]
['cpu0', 'cpu1']
>>> assign_configs(3, 2, replicate=False)
((0, 2), (1,))
"""

from harness.multigpu._merge import (
    MERGE_EXIT,
    GpuOutcome,
    MultiResult,
    Piece,
    merge_exit_code,
    merge_pieces,
    merge_runs,
    piece_labels,
    read_piece,
)
from harness.multigpu._orchestrate import run_multi
from harness.multigpu._plan import (
    MODES,
    SIDECAR,
    assign_configs,
    subset_config,
)
from harness.multigpu._select import (
    MULTICAST_OFF,
    GpuSlot,
    cpu_stand_ins,
    enumerate_cuda_gpus,
    parse_gpus,
    select_gpus,
    worker_env,
)
from harness.multigpu._slurm import (
    PER,
    SlurmJob,
    SlurmOptions,
    check_partition,
    check_slurm_job,
    plan_tasks,
    render_sbatch,
    submit_slurm_job,
    task_device,
    task_logs,
    write_slurm_job,
)

__all__ = [
    "MERGE_EXIT",
    "MODES",
    "MULTICAST_OFF",
    "PER",
    "SIDECAR",
    "GpuOutcome",
    "GpuSlot",
    "MultiResult",
    "Piece",
    "SlurmJob",
    "SlurmOptions",
    "assign_configs",
    "check_partition",
    "check_slurm_job",
    "cpu_stand_ins",
    "enumerate_cuda_gpus",
    "merge_exit_code",
    "merge_pieces",
    "merge_runs",
    "parse_gpus",
    "piece_labels",
    "plan_tasks",
    "read_piece",
    "render_sbatch",
    "run_multi",
    "select_gpus",
    "submit_slurm_job",
    "subset_config",
    "task_device",
    "task_logs",
    "worker_env",
    "write_slurm_job",
]
