"""Which configurations each worker runs, and the RunConfig as JSON for a worker process.

Sharding is round-robin over the suite's input configurations: worker w gets configurations w, w+W,
w+2W, ... so neighbouring configurations (often growing sequence lengths) spread over the GPUs. Replication
gives every worker the whole suite, to measure the spread between GPUs on identical work.

>>> from harness.multigpu import assign_configs
>>> assign_configs(5, 2, replicate=False)
((0, 2, 4), (1, 3))
>>> assign_configs(2, 2, replicate=True)
((0, 1), (0, 1))
"""

from __future__ import annotations

import dataclasses

from harness.config import RunConfig
from harness.errors import ConfigError

__all__ = ["MODES", "SIDECAR", "assign_configs", "subset_config"]

MODES = ("shard", "replicate")
# Beside each worker's runs.parquet: its GPU and the suite indices of its configurations (see _worker). Here,
# not in _worker, so that importing the package never imports the module `python -m` then runs as __main__
# (runpy's RuntimeWarning at the top of every task log).
SIDECAR = "multigpu.json"


def assign_configs(n_configs: int, n_workers: int, *, replicate: bool) -> tuple[tuple[int, ...], ...]:
    """Configuration indices per worker: round-robin shards, or the whole suite for each (`replicate`)."""
    if n_workers < 1:
        raise ConfigError("No worker to assign configurations to.")
    if n_configs < 1:
        raise ConfigError("The suite has no configuration to run.")
    if replicate:
        return tuple(tuple(range(n_configs)) for _ in range(n_workers))
    if n_workers > n_configs:
        raise ConfigError(
            f"{n_workers} workers for {n_configs} configuration(s): sharding would leave {n_workers - n_configs} "
            f"GPU(s) idle. Name fewer GPUs, add inputs, or pass --replicate to run the whole suite on every GPU."
        )
    return tuple(tuple(range(w, n_configs, n_workers)) for w in range(n_workers))


def subset_config(config: RunConfig, indices: tuple[int, ...], **changes) -> RunConfig:
    """`config` restricted to the inputs at `indices` (in that order), with other fields replaced."""
    bad = [i for i in indices if not 0 <= i < len(config.inputs)]
    if bad:
        raise ConfigError(f"Configuration indices {bad} are outside the suite of {len(config.inputs)}.")
    return dataclasses.replace(config, inputs=tuple(config.inputs[i] for i in indices), **changes)
