"""How a merged run names the GPU of every row, without a change to the results schema.

A merged run's `measurement_id` is `<gpu>#<the worker's measurement id>`, e.g.
`00000000:19:00.0#c0-sdpa-flash-r1`. The measurement id is the key that joins measurements to their
chunks, samples and probes, so the prefix puts the GPU on every row of every table at once, and keeps the
ids unique when the same suite ran on several GPUs. `<gpu>` is the PCI bus id, or `host/PCI bus id` when
the merged runs came from more than one host (two nodes of a cluster can have GPUs at the same bus id).
Single-GPU runs have no prefix: the run row's `pci_bus_id` names their GPU.

Read the GPU of a row with `gpu_of` / `with_gpu`, never by parsing ids by hand: if the schema gains a
`measurements.gpu` column (string, same values; proposed for the next schema version), these two read
it instead, and `merge_runs` fills it.

>>> from harness.results import gpu_measurement_id, split_measurement_id
>>> mid = gpu_measurement_id("00000000:19:00.0", "c0-sdpa-flash-r1")
>>> split_measurement_id(mid)
('00000000:19:00.0', 'c0-sdpa-flash-r1')
>>> split_measurement_id("c0-sdpa-flash-r1")
(None, 'c0-sdpa-flash-r1')
"""

from __future__ import annotations

import re

__all__ = ["GPU_SEPARATOR", "gpu_dirname", "gpu_label", "gpu_measurement_id", "gpu_of", "split_measurement_id",
           "with_gpu"]

GPU_SEPARATOR = "#"  # neither PCI bus ids, host names nor the runner's `c<i>-...` ids contain it


def gpu_measurement_id(gpu: str, measurement_id: str) -> str:
    if GPU_SEPARATOR in gpu:
        raise ValueError(f"GPU id {gpu!r} contains {GPU_SEPARATOR!r}")
    return f"{gpu}{GPU_SEPARATOR}{measurement_id}"


def split_measurement_id(measurement_id: str) -> tuple[str | None, str]:
    """(gpu, the worker's id); gpu is None for an id without a GPU prefix."""
    gpu, sep, rest = measurement_id.partition(GPU_SEPARATOR)
    return (gpu, rest) if sep else (None, measurement_id)


def gpu_label(*, gpu_id: str, host: str | None, with_host: bool) -> str:
    """The GPU's name in a merged run: the PCI bus id, prefixed by the host when runs span hosts."""
    return f"{host}/{gpu_id}" if with_host and host else gpu_id


def gpu_dirname(label: str) -> str:
    """A folder name for a GPU's sub-run: `:` and `/` are awkward on some file systems and in shells."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", label)


def _run_gpu(info: dict) -> str | None:
    return info.get("pci_bus_id") or (f"{info['device_kind']}" if info.get("device_kind") else None)


def gpu_of(row: dict, info: dict | None = None) -> str | None:
    """The GPU of one measurement (or chunk, sample, probe) row; `info` is the run row, for single-GPU runs."""
    if row.get("gpu"):
        return row["gpu"]
    gpu, _ = split_measurement_id(row.get("measurement_id") or "")
    return gpu or (_run_gpu(info) if info else None)


def with_gpu(rows, info: dict | None = None):
    """`rows` with a `gpu` column: a list of dicts gets a key, a polars DataFrame a string column."""
    if isinstance(rows, list):
        return [{**r, "gpu": gpu_of(r, info)} for r in rows]
    import polars as pl

    if "gpu" in rows.columns:
        return rows
    default = _run_gpu(info) if info else None
    prefix = pl.col("measurement_id").str.extract(r"^([^#]*)#", 1)
    return rows.with_columns(prefix.fill_null(pl.lit(default, dtype=pl.String)).alias("gpu"))
