"""What every run does before its first launch: resolve kernels, check support, open device and telemetry,
and describe itself in the runs row. Shared by the sustained runner and burst timing."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RunSetup", "set_up_run", "run_info_row", "config_row", "kernel_provenance"]


@dataclass(kw_only=True)
class RunSetup:
    kernels: list
    device: object
    ident: object
    busy: list
    telemetry_name: str
    sampler: object


def set_up_run(config, *, registry=None, device=None, sampler=None) -> RunSetup:
    """Everything that can refuse the run does so here, before any GPU time is spent.

    Order matters: unknown kernels and unsupported inputs are found before the device is opened, and a
    busy GPU before telemetry starts.
    """
    from harness.devices import check_idle, open_device
    from harness.kernels import default_registry
    from harness.telemetry import create_sampler

    registry = registry or default_registry()
    kernels = [registry.get(name) for name in config.kernels]
    device = device or open_device(config.device)
    for spec in config.inputs:
        for k in kernels:
            k.check_supports(dtype=spec.dtype, head_dim_qk=spec.shape.head_dim_qk, head_dim_v=spec.shape.head_dim_v,
                             causal=spec.shape.causal, device_kind=device.kind)
    busy = check_idle(device, allow_busy=config.allow_busy)
    ident = device.identity()
    telemetry_name = config.telemetry if config.telemetry != "auto" else device.default_telemetry()
    if sampler is None:
        sampler = create_sampler(telemetry_name, pci_bus_id=ident.pci_bus_id)
    return RunSetup(kernels=kernels, device=device, ident=ident, busy=busy, telemetry_name=telemetry_name,
                    sampler=sampler)


def kernel_provenance(kernels) -> dict:
    """Per kernel: its factory, source file, and the git commit and dirty flag of the tree holding it."""
    from harness.results import file_digest, git_state

    out = {}
    for k in kernels:
        try:
            file = Path(importlib.import_module(k.source.split(":")[0]).__file__).resolve()
            commit, dirty = git_state(file)
            out[k.name] = {"source": k.source, "file": str(file), "file_sha256": file_digest(file),
                           "git_commit": commit, "git_dirty": dirty}
        except Exception as exc:  # provenance is best effort; its absence is recorded, not fatal
            out[k.name] = {"source": k.source, "error": str(exc)}
    return out


def run_info_row(config, setup: RunSetup, *, command: str, protocol) -> dict:
    """The runs row: what ran, where, with which code, software and protocol values."""
    from harness.results import git_state, host_facts, software_versions, tree_digest
    from harness.results._provenance import to_json

    package = Path(__file__).resolve().parent.parent
    commit, dirty = git_state(package)
    ident = setup.ident
    versions = {**software_versions(), "harness_tree_sha256": tree_digest(package)}
    return {
        "status": "running", "status_detail": "", "started_at": datetime.now(timezone.utc).isoformat(),
        "command": command, "harness_version": versions.get("harness"), "git_commit": commit, "git_dirty": dirty,
        "kernel_sources_json": to_json(kernel_provenance(setup.kernels)), **host_facts(),
        "versions_json": to_json(versions), "device_kind": ident.kind, "device_name": ident.name,
        "device_index": ident.index, "pci_bus_id": ident.pci_bus_id, "driver": ident.driver, "runtime": ident.runtime,
        "compute_capability": ident.compute_capability, "sm_count": ident.sm_count, "memory_bytes": ident.memory_bytes,
        "power_limit_w": ident.power_limit_w, "max_sm_clock_mhz": ident.max_sm_clock_mhz,
        "telemetry_backend": setup.telemetry_name, "protocol_json": to_json(protocol.as_dict()),
        "config_json": to_json({**dataclasses.asdict(config), "protocol": None}), "allow_busy": config.allow_busy,
        "busy_processes_json": to_json([dataclasses.asdict(p) for p in setup.busy]),
        "notes": getattr(config, "notes", ""),
    }


def config_row(ci: int, spec, inputs) -> dict:
    """The columns every measurement row of one input configuration shares."""
    s = spec.shape
    return {
        "config_index": ci, "input_label": spec.label, "input_source": inputs.source, "input_seed": spec.seed,
        "dtype": inputs.dtype, "batch": s.batch, "heads_q": s.heads_q, "heads_kv": s.heads_kv, "seq_len": s.seq_len,
        "head_dim_qk": s.head_dim_qk, "head_dim_v": s.head_dim_v, "causal": s.causal, "flops_per_launch": float(s.flops),
    }
