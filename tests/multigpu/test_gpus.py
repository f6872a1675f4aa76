"""On a node with two or more CUDA GPUs (nvidia-h200-x2 and larger): skipped everywhere else.

Acceptance 2: the same suite on every GPU with replicate, the spread reported. Acceptance 3 on real GPUs: a PCI
id that is not present, more workers than GPUs, and a GPU busy with another process skipped while the others
continue.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                                  reason="needs two or more CUDA GPUs")]

from harness.analysis import gpu_spread
from harness.config import RunConfig, SustainedProtocol
from harness.errors import DeviceError
from harness.inputs import AttentionShape, InputSpec
from harness.multigpu import (
    MULTICAST_OFF,
    enumerate_cuda_gpus,
    run_multi,
    select_gpus,
)
from harness.results import read_rows  # pyarrow only: the GPU machines have no polars

SHAPE = AttentionShape(batch=1, heads_q=32, heads_kv=8, seq_len=4096, head_dim_qk=128)


def gpu_suite(tmp_path, seeds=(0,)) -> RunConfig:
    inputs = tuple(InputSpec(shape=SHAPE, dtype="bf16", source="gaussian:1", seed=s, name=f"g1-s{s}") for s in seeds)
    return RunConfig(kernels=("sdpa-flash",), inputs=inputs, device="cuda:0", protocol=SustainedProtocol.quick(),
                     results_dir=tmp_path)


def test_replicate_runs_the_suite_on_every_gpu_and_reports_the_spread(tmp_path):
    present = enumerate_cuda_gpus()
    res = run_multi(gpu_suite(tmp_path), gpus="all", replicate=True, present=present)
    assert res.status == "complete", res.status_detail
    assert sorted({r["gpu"] for r in res.measurements}) == sorted(s.gpu_id for s in present)
    for o in res.gpus:  # each worker measured the GPU it was meant to, with NVML telemetry of that GPU
        sub = read_rows(o.run_dir, "runs")[0]
        assert sub["pci_bus_id"] == o.gpu and sub["telemetry_backend"] == "nvml"
    (spread,) = gpu_spread(res.measurements)
    assert len(spread.gpus) == len(present) and spread.time_spread is not None
    assert all(f.sm_clock_mhz for f in spread.gpus)
    print(f"time spread {spread.time_spread:.2%}, SCLK spread {spread.clock_spread:.2%}: "
          + ", ".join(f"{f.gpu} {f.time_ns / 1e6:.4f} ms {f.sm_clock_mhz:.0f} MHz" for f in spread.gpus))


def test_bad_gpu_selections_on_real_gpus():
    present = enumerate_cuda_gpus()
    with pytest.raises(DeviceError, match="no GPU has PCI bus id 00000000:FE:1F.0. Present: 0="):
        select_gpus("0000:FE:1F.0", present=present)
    with pytest.raises(DeviceError, match=f"asks for {len(present) + 1} workers"):
        select_gpus(",".join(str(i) for i in range(len(present) + 1)), present=present)


def test_a_busy_gpu_is_skipped_and_the_others_run_its_share(tmp_path):
    present = enumerate_cuda_gpus()
    last = present[-1]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, torch; torch.ones(1, device='cuda'); print('up', flush=True); "
                               "time.sleep(600)"],
        env={**os.environ, **last.visible, **MULTICAST_OFF}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        res = run_multi(gpu_suite(tmp_path, seeds=tuple(range(len(present)))), gpus="all", present=present)
    finally:
        holder.kill()
        holder.wait()
    outcome = {o.gpu: o for o in res.gpus}
    assert outcome[last.gpu_id].status == "busy" and f"pid {holder.pid}" in outcome[last.gpu_id].detail
    assert res.status == "complete", res.status_detail
    assert sorted({r["config_index"] for r in res.measurements}) == list(range(len(present)))
    assert last.gpu_id not in {r["gpu"] for r in res.measurements}
