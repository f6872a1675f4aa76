"""CUDA device identity on the CPU: torch's device properties and NVML's answers as recorded on the H200
(runs.parquet of tests/fixtures/h200/20261130-043508-issue2-b7147a), fed through `CudaDevice.identity`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from harness.devices._cuda import CudaDevice, cuda_pci_bus_id

# torch.cuda.get_device_properties(0) on the H200 (bus 0000:00:06.0), as the identity stored it.
H200_PROPS = SimpleNamespace(name="NVIDIA H200", pci_bus_id=0, pci_domain_id=0, pci_device_id=6, major=9, minor=0,
                             multi_processor_count=132, total_memory=150109880320, uuid="GPU-0f3c2a")


class RecordedNvml:
    """NVML's answers for that GPU; `fail` names calls that raise, as on a driver without them."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, fail=(), init_fails=False, app_sm=1980):
        self.fail, self.init_fails, self.calls, self.shut = set(fail), init_fails, [], False
        self.app_sm = app_sm  # the SM application clock now (its default is 1980 MHz)

    def _call(self, name, value):
        self.calls.append(name)
        if name in self.fail:
            raise RuntimeError(f"{name}: not supported")
        return value

    def nvmlInit(self):
        if self.init_fails:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return self._call("by_pci", ("handle", bus))

    def nvmlDeviceGetHandleByIndex(self, index):
        return self._call("by_index", ("handle", index))

    def nvmlSystemGetDriverVersion(self):
        return self._call("driver", b"580.159.04")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._call("power", 700000)

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return self._call("clock", 1980)

    # The fingerprint's other fields (values of the kind NVML returns; this H200's were not recorded).
    def nvmlDeviceGetSerial(self, h):
        return self._call("serial", b"1654123456789")

    def nvmlDeviceGetVbiosVersion(self, h):
        return self._call("vbios", "96.00.AF.00.01")

    def nvmlDeviceGetEccMode(self, h):
        return self._call("ecc", (1, 1))

    def nvmlDeviceGetMigMode(self, h):
        return self._call("mig", [0, 1])

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        return self._call("app_clock", self.app_sm if kind == self.NVML_CLOCK_SM else 4800)

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):
        return self._call("default_app_clock", 1980 if kind == self.NVML_CLOCK_SM else 4800)


@pytest.fixture
def h200(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: H200_PROPS)
    monkeypatch.setattr(torch.version, "cuda", "13.0")


def test_identity_is_what_the_h200_run_stored(h200):
    nvml = RecordedNvml()
    ident = CudaDevice("cuda:0", 0, nvml=nvml).identity()
    assert ident.as_dict() == {
        "kind": "cuda", "index": 0, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:06.0", "uuid": "GPU-0f3c2a",
        "driver": "580.159.04", "runtime": "cuda 13.0", "compute_capability": "9.0", "sm_count": 132,
        "memory_bytes": 150109880320, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980.0, "serial": "1654123456789",
        "vbios": "96.00.AF.00.01", "ecc": "on", "mig": "off, on pending", "clock_policy": "default"}
    assert nvml.calls[0] == "by_pci" and nvml.shut  # found by bus id, NVML shut down after


def test_bus_id_from_torch_properties_in_nvml_form(monkeypatch):
    props = SimpleNamespace(**{**vars(H200_PROPS), "pci_bus_id": 0x1B, "pci_domain_id": 0x1, "pci_device_id": 0x2})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    assert cuda_pci_bus_id(0) == "00000001:1B:02.0"
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(name="old torch"))
    assert cuda_pci_bus_id(0) is None


def test_without_a_bus_id_nvml_is_asked_by_index(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(
        **{k: v for k, v in vars(H200_PROPS).items() if k != "pci_bus_id"}))
    nvml = RecordedNvml()
    ident = CudaDevice("cuda:3", 3, nvml=nvml).identity()
    assert nvml.calls[0] == "by_index" and ident.pci_bus_id is None and ident.driver == "580.159.04"


def test_a_missing_nvml_answer_is_unknown_not_made_up(h200):
    ident = CudaDevice("cuda:0", 0, nvml=RecordedNvml(fail={"power"})).identity()
    assert ident.power_limit_w is None and ident.max_sm_clock_mhz == 1980.0 and ident.driver == "580.159.04"
    none = CudaDevice("cuda:0", 0, nvml=RecordedNvml(init_fails=True)).identity()
    assert (none.driver, none.power_limit_w, none.max_sm_clock_mhz) == (None, None, None)
    assert none.sm_count == 132  # torch's part is still there


def test_the_fingerprint_names_a_changed_clock_policy_and_unknowns_stay_unknown(h200):
    ident = CudaDevice("cuda:0", 0, nvml=RecordedNvml(app_sm=1755)).identity()
    assert ident.clock_policy == "SM application clock 1755 MHz (default 1980)"
    assert ident.machine() == {"gpu_uuid": "GPU-0f3c2a", "gpu_serial": "1654123456789", "vbios": "96.00.AF.00.01",
                               "ecc": "on", "mig": "off, on pending",
                               "clock_policy": "SM application clock 1755 MHz (default 1980)"}
    old = CudaDevice("cuda:0", 0, nvml=RecordedNvml(fail={"serial", "vbios", "ecc", "mig", "app_clock"})).identity()
    assert (old.serial, old.vbios, old.ecc, old.mig, old.clock_policy) == (None,) * 5
