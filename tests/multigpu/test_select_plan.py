"""GPU selection (`--gpus`), the worker environment, and sharding / replication of configurations."""

from __future__ import annotations

import pytest
from multigpu_helpers import suite

from harness.config import RunConfig
from harness.errors import ConfigError, DeviceError
from harness.multigpu import (
    MULTICAST_OFF,
    GpuSlot,
    assign_configs,
    parse_gpus,
    select_gpus,
    subset_config,
    worker_env,
)

PCI = ["00000000:19:00.0", "00000000:3B:00.0", "00000000:4C:00.0", "00000000:5D:00.0"]


def present(n=4):
    return [GpuSlot(index=i, gpu_id=PCI[i], device=f"cuda:{PCI[i]}", name="NVIDIA H200",
                    visible={"CUDA_VISIBLE_DEVICES": f"GPU-uuid-{i}"}) for i in range(n)]


def test_all_indices_and_pci_ids_resolve_to_pci_bus_ids():
    assert [s.gpu_id for s in select_gpus("all", present=present())] == PCI
    assert [s.gpu_id for s in select_gpus("0,2", present=present())] == [PCI[0], PCI[2]]
    # torch's lower-case form, a short form and a cuda: prefix all name the same GPU; the order given is kept
    assert [s.gpu_id for s in select_gpus("0000:3b:00.0,cuda:19:00.0", present=present())] == [PCI[1], PCI[0]]
    assert parse_gpus(" ALL ") == "all" and parse_gpus("1, 0000:19:00.0") == (1, PCI[0])


def test_unknown_pci_id_lists_the_present_ones():
    with pytest.raises(DeviceError) as e:
        select_gpus("0000:AA:00.0", present=present(2))
    msg = str(e.value)
    assert "no GPU has PCI bus id 00000000:AA:00.0" in msg and f"0={PCI[0]}" in msg and f"1={PCI[1]}" in msg


def test_more_workers_than_gpus():
    with pytest.raises(DeviceError, match=r"asks for 3 workers, but 2 GPU\(s\) are present .* name at most 2"):
        select_gpus("0,1,2", present=present(2))
    with pytest.raises(DeviceError, match="there is no GPU 5; 4 are present"):
        select_gpus("5", present=present())
    with pytest.raises(ConfigError, match="names GPU 1 .* twice. One worker runs per GPU"):
        select_gpus(f"1,{PCI[1]}", present=present())
    with pytest.raises(DeviceError, match="no GPU is present"):
        select_gpus("all", present=[])


def test_malformed_gpus():
    with pytest.raises(ConfigError, match="'gpu7' is neither a GPU index nor a PCI bus id"):
        parse_gpus("0,gpu7")
    with pytest.raises(ConfigError, match="--gpus is empty"):
        parse_gpus(" , ")


def test_worker_sees_one_gpu_and_multicast_is_off():
    env = worker_env(present()[2], base={"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "NCCL_NVLS_ENABLE": "1"},
                     pythonpath="/src")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-uuid-2"
    assert {k: env[k] for k in MULTICAST_OFF} == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                                  "NVSHMEM_DISABLE_NVLS": "1"}
    assert env["PYTHONPATH"] == "/src" and env["PATH"] == "/bin"


def test_sharding_is_round_robin_and_covers_the_suite_once():
    shards = assign_configs(7, 3, replicate=False)
    assert shards == ((0, 3, 6), (1, 4), (2, 5))
    assert sorted(i for s in shards for i in s) == list(range(7))


def test_replication_gives_every_worker_the_whole_suite():
    assert assign_configs(3, 4, replicate=True) == ((0, 1, 2),) * 4


def test_more_gpus_than_configurations_is_refused_when_sharding():
    with pytest.raises(ConfigError, match="3 workers for 2 configuration.*--replicate"):
        assign_configs(2, 3, replicate=False)
    with pytest.raises(ConfigError):
        assign_configs(2, 0, replicate=True)


def test_config_round_trips_through_json_and_subsets(tmp_path):
    import json

    config = suite(tmp_path, seeds=(0, 1, 2), notes="n")
    back = RunConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert back == config
    sub = subset_config(config, (2, 0), run_name="x")
    assert [i.seed for i in sub.inputs] == [2, 0] and sub.run_name == "x"
    with pytest.raises(ConfigError, match=r"indices \[3\] are outside the suite of 3"):
        subset_config(config, (3,))


def test_enumeration_reads_pci_ids_and_uuids_from_torch(monkeypatch):
    import types

    import torch

    from harness.multigpu import enumerate_cuda_gpus

    props = [types.SimpleNamespace(name="NVIDIA H200", uuid="1b2c-0", pci_domain_id=0, pci_bus_id=0x19, pci_device_id=0),
             types.SimpleNamespace(name="NVIDIA H200", uuid="", pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # e.g. given by Slurm: the second GPU is physical 6
    slots = enumerate_cuda_gpus()
    assert [s.gpu_id for s in slots] == PCI[:2] and [s.device for s in slots] == [f"cuda:{p}" for p in PCI[:2]]
    assert [s.visible for s in slots] == [{"CUDA_VISIBLE_DEVICES": "GPU-1b2c-0"}, {"CUDA_VISIBLE_DEVICES": "6"}]


def test_no_gpu_is_an_error_never_a_cpu_fallback(tmp_path):
    import torch

    from harness.multigpu import run_multi

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceError, match="--gpus asks for CUDA GPUs, but PyTorch sees none"):
        run_multi(suite(tmp_path), gpus="all")
    assert not (tmp_path / "results").exists()  # refused before any run directory was made
