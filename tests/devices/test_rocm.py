"""The ROCm device on a CPU machine: a fake HIP `torch.cuda` surface and a fake amdsmi, injected explicitly."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from harness.devices import _rocm, check_idle, open_device
from harness.errors import DeviceBusyError, DeviceError
from harness.telemetry._amdsmi_device import CACHE_VAR


def _fakes():
    """tests/telemetry/fake_amdsmi.py, loaded by path: pytest puts only this test's own folder on sys.path."""
    if "fake_amdsmi" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fake_amdsmi", Path(__file__).parents[1] / "telemetry" / "fake_amdsmi.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fake_amdsmi"] = module
        spec.loader.exec_module(module)
    return sys.modules["fake_amdsmi"]


fakes = _fakes()


@pytest.fixture(autouse=True)
def cache_var(monkeypatch):
    monkeypatch.setenv(CACHE_VAR, "1")  # restored after each test: the amdsmi import path sets it to 0


@pytest.fixture
def amd():
    return fakes.FakeAmdsmi()


@pytest.fixture
def hip(monkeypatch):
    return fakes.install_fake_hip(monkeypatch)


def test_rocm_device_identity(hip, amd):
    dev = open_device("rocm:0", amdsmi=amd)
    assert isinstance(dev, _rocm.RocmDevice) and dev.kind == "rocm" and dev.default_telemetry() == "amdsmi"
    ident = dev.identity()
    assert ident.kind == "rocm" and ident.index == 0 and ident.name == "AMD Instinct MI355X"
    assert ident.pci_bus_id == "00000000:C1:00.0"  # the same form NVML ids take, so ids compare across tools
    assert ident.runtime == "hip 7.0.51831-a3e329ad8" and ident.compute_capability == "gfx950"
    assert ident.sm_count == 256 and ident.memory_bytes == 288 << 30
    assert ident.driver == "6.14.14" and ident.power_limit_w == 1400.0 and ident.max_sm_clock_mhz == 2400.0
    assert amd.init_count == 0


def test_identity_without_amdsmi_records_the_extras_as_unknown(hip, monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    ident = open_device("rocm").identity()
    assert ident.name == "AMD Instinct MI355X" and ident.driver is None and ident.power_limit_w is None


def test_cuda_spec_on_a_hip_build_opens_the_rocm_device(hip, amd):
    dev = open_device("cuda:0", amdsmi=amd)
    assert isinstance(dev, _rocm.RocmDevice) and dev.spec == "cuda:0" and dev.identity().kind == "rocm"


def test_choose_by_index_or_pci_bus_id(monkeypatch, amd):
    fakes.install_fake_hip(monkeypatch, [fakes.hip_props(bus=0x11), fakes.hip_props(bus=0xC1)])
    assert open_device("rocm:1", amdsmi=amd).index == 1
    assert open_device("rocm:0000:c1:00.0", amdsmi=amd).index == 1
    with pytest.raises(DeviceError, match=r"there are 2 AMD GPUs visible to PyTorch \(0..1\)"):
        open_device("rocm:2")
    with pytest.raises(DeviceError, match="no AMD GPU with PCI bus id 00000000:C2:00.0. Present: 00000000:11:00.0"):
        open_device("rocm:0000:c2:00.0")


def test_not_a_rocm_build():
    import torch

    if getattr(torch.version, "hip", None):
        pytest.skip("this PyTorch is a ROCm build")
    with pytest.raises(DeviceError) as e:
        open_device("rocm:0")
    assert "is not a ROCm build" in str(e.value) and "--device cpu" in str(e.value)


@pytest.mark.parametrize("state, words", [
    ("missing", ["/dev/kfd does not exist", "amdgpu", "--device /dev/kfd --device /dev/dri"]),
    ("denied", ["cannot open /dev/kfd (permission denied)", "usermod -aG render,video"]),
    ("ok", ["although /dev/kfd is usable", "HIP_VISIBLE_DEVICES", "rocminfo | grep gfx"]),
])
def test_no_amd_gpu_says_why(monkeypatch, state, words):
    fakes.install_fake_hip(monkeypatch, [])
    monkeypatch.setattr(_rocm, "_device_file_state", lambda path: state)
    with pytest.raises(DeviceError) as e:
        open_device("rocm:0")
    for w in words:
        assert w in str(e.value)


def test_device_file_state(tmp_path, monkeypatch):
    assert _rocm._device_file_state(str(tmp_path / "kfd")) == "missing"
    (tmp_path / "kfd").write_text("")
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root passes any permission check, so fake it
    assert _rocm._device_file_state(str(tmp_path / "kfd")) == "denied"


def test_hip_events_time_the_stream(hip, amd):
    dev = open_device("rocm:0", amdsmi=amd)
    a = dev.mark()
    sum(range(10_000))
    b = dev.mark()
    dev.wait(b)
    dev.synchronize()
    assert dev.elapsed_ns(a, b) > 0 and dev.supports_graphs


def test_idle_check_lists_other_processes_but_not_this_one(hip, amd):
    gpu = amd.gpus[0]
    gpu.processes = [fakes.process(os.getpid())]
    dev = open_device("rocm:0", amdsmi=amd)
    assert check_idle(dev, allow_busy=False) == []
    gpu.processes.append(fakes.process(4242, mem=3 << 30))
    with pytest.raises(DeviceBusyError, match=r"rocm:0 is busy: other compute processes are on it \(pid 4242 \(3072 MiB\)\)"):
        check_idle(dev, allow_busy=False)
    assert [p.pid for p in check_idle(dev, allow_busy=True)] == [4242]


def test_idle_check_without_amdsmi_refuses_unless_allowed(hip, amd):
    amd.break_fn("amdsmi_init", 10)
    dev = open_device("rocm:0", amdsmi=amd)
    with pytest.raises(DeviceBusyError) as e:
        check_idle(dev, allow_busy=False)
    assert "Cannot tell whether other processes are using rocm:0" in str(e.value)
    assert "refused access" in str(e.value) and "Make amdsmi usable" in str(e.value)
    assert check_idle(dev, allow_busy=True) == []


def test_unknown_device_names_both_vendors():
    with pytest.raises(DeviceError, match="or rocm, rocm:N or rocm:<PCI bus id> for AMD"):
        open_device("hip:0")


def test_a_partitioned_gpu_is_found_by_its_partitions_bdf(monkeypatch):
    """Item 4: in CPX/DPX mode amdsmi puts the partition id in the BDF function; HIP has no function."""
    fakes.install_fake_hip(monkeypatch, [fakes.hip_props(), fakes.hip_props()])  # one GPU, two partitions
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    parts = [fakes.FakeAmdGpu(bdf="0000:c1:00.0", hip_id=0, hip_uuid="aa"),
             fakes.FakeAmdGpu(bdf="0000:c1:00.1", hip_id=1, hip_uuid="bb")]
    parts[1].processes = [fakes.process(4242)]
    amd = fakes.FakeAmdsmi(parts)
    dev = open_device("rocm:1", amdsmi=amd)
    assert dev.pci_bus_id == "00000000:C1:00.1" and dev.identity().pci_bus_id == "00000000:C1:00.1"
    assert [p.pid for p in dev.other_processes()] == [4242]  # partition 1's processes, not partition 0's
    assert open_device("rocm:0", amdsmi=amd).pci_bus_id == "00000000:C1:00.0"
    assert amd.init_count == 0
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,0")  # hip_id no longer matches torch's index
    with pytest.raises(DeviceError) as e:
        _ = open_device("rocm:0", amdsmi=amd).pci_bus_id
    assert "split into 2 compute partitions (00000000:C1:00.0, 00000000:C1:00.1)" in str(e.value)
    assert "HIP_VISIBLE_DEVICES renumbers" in str(e.value)
    parts[1].hip_uuid = "GPU-5f3c1a2b-0000-0000-0000-000000000000"  # the uuid torch reports (hip_props)
    assert open_device("rocm:0", amdsmi=amd).pci_bus_id == "00000000:C1:00.1"
    amd.break_fn("amdsmi_get_processor_handles", 2)  # amdsmi unusable: HIP's own id, telemetry will say why
    assert open_device("rocm:0", amdsmi=amd).pci_bus_id == "00000000:C1:00.0" and amd.init_count == 0
