"""Suites small enough for the CPU, and synthetic per-GPU runs written with RunWriter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config import RunConfig, SustainedProtocol
from harness.inputs import AttentionShape, InputSpec
from harness.multigpu._worker import SIDECAR
from harness.results import RunWriter

HERE = Path(__file__).resolve().parent
SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8)
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3)


def suite(tmp_path: Path, *, seeds=(0, 1), kernels=("sdpa-cpu",), **kw) -> RunConfig:
    """One input configuration per seed (distinct labels), on the CPU."""
    inputs = tuple(InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1", seed=s, name=f"g1-s{s}") for s in seeds)
    base = dict(kernels=tuple(kernels), inputs=inputs, device="cpu", telemetry="none", protocol=PROTO,
                results_dir=tmp_path / "results")
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture
def worker_env_for_tests(monkeypatch):
    """Worker processes import multigpu_fakes; one OpenMP thread each, so two workers share 2 CPUs calmly."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE)] + ([os.environ["PYTHONPATH"]]
                                                                     if os.environ.get("PYTHONPATH") else [])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def write_run(root: Path, *, gpu: str, times: dict, clock: float = 1800.0, status: str = "complete",
              host: str = "node1", config_indices=None, suite_size=None, mode="replicate", task=None, tasks=None,
              protocol_json='{"window_s": 4.0}', sidecar: bool = True) -> Path:
    """A finished per-GPU run: `times` maps (local config index, kernel) -> [time_ns per repeat]."""
    writer = RunWriter(root, f"run-{gpu.replace(':', '-')}-{task if task is not None else 'x'}")
    writer.write_run({"status": "running", "host": host, "device_kind": "cuda", "device_name": "NVIDIA H200",
                      "device_index": 0, "pci_bus_id": gpu, "sm_count": 132, "power_limit_w": 700.0,
                      "max_sm_clock_mhz": 1980.0, "protocol_json": protocol_json, "telemetry_backend": "nvml",
                      "telemetry_json": json.dumps({"gpu": gpu}), "busy_processes_json": "[]",
                      "config_json": json.dumps({"kernels": sorted({k for _, k in times})})})
    if sidecar:
        (writer.path / SIDECAR).write_text(json.dumps({
            "gpu_id": gpu, "host": host, "config_indices": list(config_indices) if config_indices is not None else
            sorted({c for c, _ in times}), "suite_size": suite_size, "mode": mode, "task": task, "tasks": tasks}))
    for (config_index, kernel), reps in times.items():
        for rep, t in enumerate(reps):
            mid = f"c{config_index}-{kernel}-r{rep}"
            writer.append_measurement(
                measurement={"measurement_id": mid, "config_index": config_index, "input_label": f"in{config_index}", "kernel": kernel,
                             "repeat": rep, "status": "ok", "time_ns": float(t), "sm_clock_mhz": clock,
                             "seq_len": 1024},
                chunks=[{"measurement_id": mid, "chunk_index": i, "phase": "window", "device_ns": int(t) * 10,
                         "launches": 10, "time_ns": float(t)} for i in range(2)],
                samples=[{"measurement_id": mid, "phase": "window", "t_ns": i, "sm_clock_mhz": clock}
                         for i in range(3)],
                probes=[])
    if status != "running":
        writer.set_status(status, "" if status == "complete" else "stopped early")
    return writer.path
