from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import harness.telemetry as telemetry
from harness.errors import TelemetryError
from harness.telemetry import HostSampler, NullSampler, NvmlSampler, ReplaySampler, Sample, Sampler, create_sampler


def test_import_touches_no_vendor_library():
    code = (
        "import sys, harness.telemetry; "
        "print(sorted(m for m in ('pynvml', 'pyarrow', 'torch', 'amdsmi') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_module_declares_all():
    names = ["", "._factory", "._gpm", "._host", "._nvml", "._nvml_device", "._reasons", "._replay", "._sample",
             "._thread", "._vendor", "._amdsmi_values"]
    for suffix in names:
        module = importlib.import_module("harness.telemetry" + suffix)
        assert isinstance(module.__all__, list), suffix
        for name in module.__all__:
            assert hasattr(module, name), (suffix, name)


def test_brief_exports_are_present():
    for name in ["Sample", "Sampler", "SAMPLE_FIELDS", "SamplerThread", "create_sampler", "decode_nvml_reasons",
                 "NVML_REASONS", "NvmlSampler", "HostSampler", "ReplaySampler", "write_samples", "read_samples",
                 "nvml_compute_processes"]:
        assert name in telemetry.__all__


def test_factory_builds_each_backend_without_opening_it(fake_nvml):
    nv = create_sampler("nvml", pci_bus_id="0000:1B:00.0", nvml=fake_nvml, gpm=False)
    assert isinstance(nv, NvmlSampler) and fake_nvml.calls == {}
    assert isinstance(create_sampler("host", pci_bus_id=None, root="/nonexistent"), HostSampler)
    assert isinstance(create_sampler("replay", pci_bus_id=None, path="/nonexistent.parquet"), ReplaySampler)
    assert isinstance(create_sampler("none", pci_bus_id=None), NullSampler)
    for s in [nv, HostSampler(), ReplaySampler([]), NullSampler()]:
        assert isinstance(s, Sampler) and s.name in {"nvml", "host", "replay", "none"}


@pytest.mark.parametrize(
    "name, kw, words",
    [("nvidia", {}, ["Unknown telemetry backend 'nvidia'", "nvml, host, replay, none"]),
     ("amdsmi", {}, ["--telemetry amdsmi needs the GPU's PCI bus id", "--device rocm:N"]),
     ("nvml", {}, ["needs the GPU's PCI bus id"]),
     ("replay", {}, ["needs the recording", "path="])],
)
def test_factory_errors(name, kw, words):
    with pytest.raises(TelemetryError) as e:
        create_sampler(name, pci_bus_id=None, **kw)
    for w in words:
        assert w in str(e.value)


def test_null_sampler(clock):
    s = create_sampler("none", pci_bus_id=None, clock=clock)
    s.open()
    assert s.read() == Sample(t_ns=clock.now)
    assert s.drain() == []
    assert "telemetry is off" in s.describe()["telemetry"]
    s.close()
