"""The run a model-error measurement writes: a runs row (what ran, where, with which code) and the
`model_error` table, one part file per finished batch of documents, so a run that stops keeps them."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.devices import open_device
from harness.kernels import kernel_provenance
from harness.results import RunWriter, git_state, host_facts, new_run_id, software_versions, to_json, tree_digest

__all__ = ["ErrorRun", "open_run", "finish_run"]


@dataclass(kw_only=True)
class ErrorRun:
    writer: object
    info: dict
    provenance: dict = field(default_factory=dict)
    written_rows: list = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.writer.run_id

    @property
    def path(self) -> Path:
        return self.writer.path

    def write(self, rows: list[dict]) -> None:
        if rows:
            self.writer.append_rows("model_error", rows)
            self.written_rows.extend(rows)


def open_run(config, spec, kernels, *, device: str) -> ErrorRun:
    """Create the run directory and its `running` row before anything is loaded: an unwritable results
    folder fails here, not after the model ran."""
    writer = RunWriter(Path(config.results_root), new_run_id(config.run_name))
    package = Path(__file__).resolve().parent.parent
    commit, dirty = git_state(package)
    versions = {**software_versions(), "harness_tree_sha256": tree_digest(package)}
    ident = open_device(device).identity()
    cfg = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(config).items() if k != "model"}
    info = {
        "status": "running", "status_detail": "", "started_at": datetime.now(timezone.utc).isoformat(),
        "command": config.command, "harness_version": versions.get("harness"), "git_commit": commit,
        "git_dirty": dirty, "kernel_sources_json": to_json(kernel_provenance(kernels)), **host_facts(),
        "versions_json": to_json(versions), "device_kind": ident.kind, "device_name": ident.name,
        "device_index": ident.index, "pci_bus_id": ident.pci_bus_id, "driver": ident.driver, "runtime": ident.runtime,
        "compute_capability": ident.compute_capability, "sm_count": ident.sm_count, "memory_bytes": ident.memory_bytes,
        "power_limit_w": ident.power_limit_w, "max_sm_clock_mhz": ident.max_sm_clock_mhz,
        "config_json": to_json({"kind": "model_error", "model": spec.name, "random_weights": config.random_weights,
                                "heads_q": spec.heads_q, "heads_kv": spec.heads_kv, "head_dim_qk": spec.head_dim_qk,
                                "head_dim_v": spec.head_dim_v, "num_layers": spec.num_layers, **cfg}),
        "notes": ("RANDOM WEIGHTS: an architecture check, not the model's accuracy" if config.random_weights
                  else ""),
    }
    writer.write_run(info)
    return ErrorRun(writer=writer, info=info)


def finish_run(run: ErrorRun, status: str, detail: str) -> None:
    """The run's final status, with what the measurement recorded about its text and weights."""
    config = json.loads(run.info["config_json"])
    config["provenance"] = run.provenance
    run.info.update(status=status, status_detail=detail, finished_at=datetime.now(timezone.utc).isoformat(),
                    config_json=to_json(config))
    run.writer.finish(status, detail, finished_at=run.info["finished_at"], config_json=run.info["config_json"])
