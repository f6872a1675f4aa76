"""On a CUDA GPU (the device run; skipped elsewhere): the identity and the in-band probe read the real
device, and what they read agrees with NVML where both exist. The CPU tests of the same logic use recorded
values (test_cuda_identity.py, tests/analysis/test_window.py::test_probe_blocks_*)."""

from __future__ import annotations

import re
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_identity_of_the_real_device():
    from harness.devices._cuda import CudaDevice

    ident = CudaDevice("cuda:0", 0).identity()
    assert ident.kind == "cuda" and ident.name and ident.sm_count > 0 and ident.memory_bytes > 2**30
    assert ident.pci_bus_id is None or re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", ident.pci_bus_id)
    assert re.fullmatch(r"\d+\.\d+", ident.compute_capability)
    if ident.driver is not None:  # NVML present
        assert ident.max_sm_clock_mhz > 500 and ident.power_limit_w > 50


def test_inband_probe_reads_a_clock_nvml_could_report():
    pytest.importorskip("triton")
    from harness.devices._cuda import CudaDevice
    from harness.runner._probe import InbandProbe

    device = CudaDevice("cuda:0", 0)
    ident = device.identity()
    probe = InbandProbe(device, period_s=0.05, spin_us=200.0)
    probe.calibrate()
    start = time.monotonic_ns()
    probe.start()
    time.sleep(0.5)
    readings = probe.stop()
    end = time.monotonic_ns()
    assert len(readings) >= 3
    for r in readings:
        assert start - 50_000_000 <= r.t_ns <= end + 50_000_000  # mapped onto the host clock
        assert r.clock_min_mhz <= r.clock_mhz <= r.clock_max_mhz and r.blocks > 0 and r.span_ns > 100_000
        if ident.max_sm_clock_mhz:
            assert 100 < r.clock_mhz <= ident.max_sm_clock_mhz * 1.02
