"""`bench doctor` and `bench sustained` on an AMD GPU, run end to end on the CPU.

The AMD machine is faked explicitly in each test: a HIP build's `torch.cuda` surface, the fake amdsmi
in `sys.modules["amdsmi"]`, and the ROCm device's tensors on the CPU. Nothing falls back to a fake: a
test that does not install one sees this machine as it is (no ROCm, no amdsmi).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.kernels import Kernel
from harness.telemetry._amdsmi_device import CACHE_VAR

SMALL = ["--quick", "--seq-len", "32", "--heads", "2", "--head-dim", "8", "--dtype", "fp32", "--input", "gaussian:1",
         "--repeats", "1", "--window-s", "0.3", "--warmin-cap-s", "0.6", "--idle-s", "0", "--launch", "loop"]
# In the run's own process: the fake HIP build exists only in this test process, not in a kernel's own one.
KERNEL = ["--kernel", "test_cli_amd:SDPA_ROCM", "--isolation", "none"]


def _fakes():
    """tests/telemetry/fake_amdsmi.py, loaded by path: pytest puts only this test's own folder on sys.path."""
    if "fake_amdsmi" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fake_amdsmi", Path(__file__).parents[1] / "telemetry" / "fake_amdsmi.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fake_amdsmi"] = module
        spec.loader.exec_module(module)
    return sys.modules["fake_amdsmi"]


fakes = _fakes()


def _prepare(inputs):
    import torch.nn.functional as F

    q, k, v = inputs.q, inputs.k, inputs.v

    def launch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale,
                                              enable_gqa=q.shape[1] != k.shape[1])

    return launch


# torch SDPA on the CPU, declared for rocm: it stands in for a HIP kernel, given as `module:function`.
SDPA_ROCM = Kernel(name="sdpa-rocm-fake", prepare=_prepare, dtypes=frozenset({"float32"}), devices=frozenset({"rocm"}),
                   description="CPU SDPA standing in for a HIP kernel (tests)", source="test_cli_amd:SDPA_ROCM")


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())  # rich wraps; compare words, not line breaks


@pytest.fixture(autouse=True)
def cache_var(monkeypatch):
    monkeypatch.setenv(CACHE_VAR, "1")  # restored after each test: the amdsmi import path sets it to 0


@pytest.fixture
def mi355x(monkeypatch):
    """An MI355X with eight XCDs (XCD 2 the slowest), held at its power limit 30 % of the time."""
    import torch

    from harness.devices._rocm import RocmDevice

    fakes.install_fake_hip(monkeypatch)
    gpu = fakes.FakeAmdGpu(live=True, live_power_w=1000.0, live_ppt_share=0.3)
    gpu.metrics["current_gfxclks"] = [2400, 2380, 2350, 2390, 2400, 2400, 2395, 2385]
    amd = fakes.FakeAmdsmi([gpu])
    monkeypatch.setitem(sys.modules, "amdsmi", amd)
    monkeypatch.setattr(RocmDevice, "torch_device", property(lambda self: torch.device("cpu")))
    return amd


def test_doctor_on_an_amd_gpu(mi355x):
    code, out = bench("doctor", "--device", "rocm:0")
    assert code == 0, out
    assert "AMD path │ warn │ the AMD path (ROCm device, amdsmi telemetry) has not run on AMD hardware here" in out
    assert "HIP │ ok │ PyTorch built for ROCm, HIP 7.0.51831" in out
    assert "amdsmi package │ ok │ 7.0.2" in out and "libamd_smi │ ok │ 26.0.2" in out and "ROCm │ ok │ 7.0.2" in out
    assert "amdsmi version match │ ok │ package 7.0.2 matches ROCm 7.0.2" in out
    assert "identity │ ok │ kind=rocm" in out and "pci_bus_id=00000000:C1:00.0" in out and "power_limit_w=1400.0" in out
    assert "amdsmi: XCD clocks │ ok │ ok: 8 XCD clocks in slots 0-7" in out
    assert "amdsmi: reading │ ok │ clock 2350 MHz, power 1000 W" in out
    assert "idle │ ok │ no other compute process" in out
    assert "in-band clock probe │ missing │ not built for AMD" in out
    assert "metrics cache │ warn" in out  # the fake was "loaded" before the doctor could set the variable


def test_doctor_with_a_newer_amdsmi_than_rocm(mi355x):
    mi355x.__version__ = "7.1.0"
    code, out = bench("doctor", "--device", "rocm:0")
    assert code == 0 and "amdsmi version match │ warn │ package 7.1.0 vs ROCm 7.0.2" in out


def test_doctor_without_rocm_says_so_plainly(monkeypatch):
    import torch

    if getattr(torch.version, "hip", None):
        pytest.skip("this PyTorch is a ROCm build")
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # as here: no amdsmi package
    code, out = bench("doctor", "--device", "rocm:0")
    assert code == 2  # the device named is missing: a CI preflight stops here
    assert "has not run on AMD hardware here" in out
    assert "HIP │ missing │ this PyTorch is not a ROCm build" in out
    assert "amdsmi │ missing │ AMD telemetry needs the amdsmi Python package" in out
    assert "identity │ missing │ --device rocm:0 asks for an AMD GPU through ROCm" in out


def test_doctor_with_amdsmi_but_no_libamd_smi(monkeypatch, tmp_path):
    fakes.install_fake_hip(monkeypatch)
    (tmp_path / "amdsmi").mkdir()
    (tmp_path / "amdsmi" / "__init__.py").write_text(
        'print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory")\n'
        "_libraries = {}\n_libraries['libamd_smi.so']\n")
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out = bench("doctor", "--device", "rocm:0")
    assert code == 0
    # probed in a fresh process first (item 6), and not imported here after it failed
    assert "amdsmi import │ missing │ The amdsmi" in out and "package is installed, but ROCm's libamd_smi.so cannot be loaded" in out
    assert "can break `import torch`" in out and "amdsmi" not in sys.modules
    assert "telemetry amdsmi │ missing │" in out
    sys.modules.pop("amdsmi", None)


class _TorchBrokenByAmdsmi:
    """A meta-path finder for which `import torch` fails as on a ROCm build whose amdsmi does not match."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise AttributeError("/opt/rocm/lib/libamd_smi.so: undefined symbol: amdsmi_get_gpu_partition_metrics_info")


def test_doctor_when_amdsmi_breaks_import_torch(monkeypatch, tmp_path):
    """Item 6: PyTorch's ROCm build imports amdsmi itself, so doctor explains amdsmi from a subprocess."""
    from harness.doctor import diagnose

    (tmp_path / "amdsmi").mkdir()
    (tmp_path / "amdsmi" / "__init__.py").write_text(
        'raise AttributeError("/opt/rocm/lib/libamd_smi.so: undefined symbol: amdsmi_get_gpu_partition_metrics_info")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(sys, "meta_path", [_TorchBrokenByAmdsmi(), *sys.meta_path])
    checks = {c.name: c for c in diagnose(device="rocm:0")}
    assert checks["torch"].status == "missing" and checks["torch"].detail.startswith("import torch failed (AttributeError")
    assert "PyTorch's ROCm build imports amdsmi while it loads" in checks["torch"].detail
    probe = checks["amdsmi import"]
    assert probe.status == "missing" and "does not match ROCm's libamd_smi.so" in probe.detail
    assert "undefined symbol: amdsmi_get_gpu_partition_metrics_info" in probe.detail
    assert "amdsmi" not in sys.modules  # never imported in this process


def test_amdsmi_probe_reports_a_crashing_import(tmp_path, monkeypatch):
    from harness.doctor import probe_amdsmi_import

    (tmp_path / "amdsmi").mkdir()
    (tmp_path / "amdsmi" / "__init__.py").write_text("import os\nos._exit(139)\n")  # as a segfault in the library
    monkeypatch.syspath_prepend(str(tmp_path))
    check = probe_amdsmi_import()
    assert check.status == "missing" and "killed a fresh Python (exit status 139" in check.detail


def test_doctor_does_not_call_a_false_throttle_status_ok(mi355x):
    """Item 7: False is what an unfilled field reads too (MI300 firmware), so it is a warning, not ok."""
    assert mi355x.gpus[0].metrics["throttle_status"] is False  # the fake's default
    code, out = bench("doctor", "--device", "rocm:0")
    assert code == 0 and "amdsmi: throttle_status │ warn │ unverified: throttle_status reads False" in out


def test_sustained_on_an_amd_gpu_end_to_end(mi355x, tmp_path):
    import polars as pl

    from harness.results import read_run

    code, out = bench("sustained", "--device", "rocm:0", *KERNEL, *SMALL, "--results", str(tmp_path))
    assert code == 0, out
    assert "sdpa-rocm-fake" in out and "(complete)" in out
    (run_dir,) = tmp_path.iterdir()
    run = read_run(run_dir)
    info = run.info
    assert info["device_kind"] == "rocm" and info["telemetry_backend"] == "amdsmi"
    assert info["pci_bus_id"] == "00000000:C1:00.0"
    assert json.loads(info["telemetry_json"])["XCD clocks"].startswith("ok: 8 XCD clocks")
    (m,) = run.measurements.filter(pl.col("repeat") >= 0).to_dicts()
    assert m["sm_clock_mhz"] == 2350.0  # the slowest XCD
    assert m["power_limited_frac"] == pytest.approx(0.3, abs=0.05)
    assert m["power_w"] == pytest.approx(1000.0) and m["energy_per_launch_j"] > 0
    assert m["sample_errors_in_window"] == 0
    polls = run.samples.filter(pl.col("source") == "poll")
    assert polls.height > 10 and polls["chiplet_clocks_mhz"].to_list()[0] == [2400.0, 2380.0, 2350.0, 2390.0, 2400.0,
                                                                              2400.0, 2395.0, 2385.0]
    assert set(run.samples["source"].unique()) <= {"poll", "stale"}
    assert mi355x.init_count == 0 and len(mi355x.metrics_threads) == 2  # open() probe, then one polling thread


def test_sustained_refuses_a_busy_amd_gpu(mi355x, tmp_path):
    mi355x.gpus[0].processes = [fakes.process(os.getpid()), fakes.process(4242)]
    code, out = bench("sustained", "--device", "rocm:0", *KERNEL, *SMALL, "--results", str(tmp_path))
    assert code == 2 and "rocm:0 is busy: other compute processes are on it (pid 4242 (1024 MiB))" in out


def test_sustained_with_amdsmi_permission_denied(mi355x, tmp_path):
    mi355x.break_fn("amdsmi_init", 10)
    code, out = bench("sustained", "--device", "rocm:0", *KERNEL, *SMALL, "--allow-busy", "--results", str(tmp_path))
    assert code == 2 and "amdsmi refused access while starting" in out and "render" in out


def test_sustained_without_amdsmi_is_an_error_not_a_fallback(mi355x, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    code, out = bench("sustained", "--device", "rocm:0", *KERNEL, *SMALL, "--allow-busy", "--results", str(tmp_path))
    assert code == 2 and "AMD telemetry needs the amdsmi Python package" in out


def test_sustained_without_an_amd_gpu(monkeypatch, tmp_path):
    fakes.install_fake_hip(monkeypatch, [])
    monkeypatch.setattr("harness.devices._rocm._device_file_state", lambda path: "missing")
    code, out = bench("sustained", "--device", "rocm:0", *KERNEL, *SMALL, "--results", str(tmp_path))
    assert code == 2 and "sees no AMD GPU, and /dev/kfd does not exist" in out
