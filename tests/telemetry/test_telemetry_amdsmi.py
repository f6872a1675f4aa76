"""The amdsmi backend against a fake amdsmi 7.0.2: values, "N/A", copies, counters, limits, and bad installs."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import SimpleNamespace

import pytest
from fake_amdsmi import FakeAmdGpu, FakeAmdsmi, process

from harness.analysis import summarize_window
from harness.analysis._chiplets import chiplet_spread
from harness.errors import TelemetryError
from harness.telemetry import (
    AMD_POWER_REASONS,
    AMD_THERMAL_REASONS,
    AmdsmiSampler,
    Sampler,
    SamplerThread,
    amdsmi_gpu_processes,
    create_sampler,
    decode_amd_reasons,
)
from harness.telemetry._amdsmi_device import CACHE_VAR, amdsmi_versions, import_amdsmi

MS = 1_000_000
BUS = "0000:c1:00.0"


@pytest.fixture(autouse=True)
def cache_var(monkeypatch):
    """The sampler sets AMDSMI_GPU_METRICS_CACHE_MS=0 in os.environ; put it back after each test."""
    monkeypatch.setenv(CACHE_VAR, "1")


@pytest.fixture
def gpu() -> FakeAmdGpu:
    return FakeAmdGpu()


@pytest.fixture
def amd(gpu) -> FakeAmdsmi:
    return FakeAmdsmi([gpu])  # injected as an argument; never found on its own


def opened(amd, clock) -> AmdsmiSampler:
    s = AmdsmiSampler(BUS, amdsmi=amd, clock=clock)
    s.open()
    return s


# -- values ----------------------------------------------------------------------------------------


def test_read_maps_the_702_metrics(amd, gpu, clock):
    gpu.metrics["current_gfxclks"] = [2400, 2385, 2390, 2310, 2400, 2395, 2400, 2380]
    s = opened(amd, clock)
    x = s.read()
    assert x.source == "poll" and x.error is None and x.t_ns == clock.now
    assert x.sm_clock_mhz == 2310.0  # the slowest XCD is the clock of record
    assert x.chiplet_clocks_mhz == (2400.0, 2385.0, 2390.0, 2310.0, 2400.0, 2395.0, 2400.0, 2380.0)
    assert x.power_w == 160.0 and x.power_avg_w is None  # average_socket_power is "N/A" on this GPU
    assert x.mem_clock_mhz == 2000.0 and x.temp_c == 45.0 and x.mem_temp_c == 38.0
    assert x.energy_j == pytest.approx(4_200_000_000 / 65536)  # counts of 2^-16 J
    assert x.reasons == 0 and x.reason_names == ""
    assert x.power_limited_ns == 0 and x.thermal_limited_ns == 0
    assert s.pci_bus_id == "00000000:C1:00.0"
    caps = s.describe()
    assert caps["XCD clocks"].startswith("ok: 8 XCD clocks in slots 0-7")
    assert caps["energy"].startswith("ok: energy_accumulator x 2^-16 J (15.2588 uJ) per count, the firmware's unit")
    assert "amdsmi reports counter_resolution 15.3 uJ" in caps["energy"]
    assert caps["average power"].startswith("average power: average_socket_power is 'N/A' on this GPU")
    assert caps["throttle_status"].startswith("unverified: throttle_status reads False")  # v1.8 has no such field
    assert isinstance(s, Sampler) and s.drain() == []
    s.close()
    assert amd.init_count == 0 and "XCD clocks" in s.describe()


def test_na_slots_and_partial_xcd_lists_are_skipped(amd, gpu, clock):
    gpu.metrics["current_gfxclks"] = [2400, 2350, "N/A", 2390] + ["N/A"] * 4
    s = opened(amd, clock)
    assert s.describe()["XCD clocks"].startswith("ok: 3 XCD clocks in slots 0-1, 3")
    x = s.read()
    assert x.chiplet_clocks_mhz == (2400.0, 2350.0, 2390.0) and x.sm_clock_mhz == 2350.0
    gpu.advance(1)
    gpu.metrics["current_gfxclks"] = [2300, 2380]  # a shorter list, as a partition reports it
    x = s.read()
    assert x.chiplet_clocks_mhz == (2300.0, 2380.0) and x.sm_clock_mhz == 2300.0


def test_a_read_without_any_numeric_clock_is_a_visible_gap(amd, gpu, clock):
    s = opened(amd, clock)
    gpu.advance(1)
    gpu.metrics["current_gfxclks"] = ["N/A"] * 8
    th = SamplerThread(s, period_s=0.01, clock=clock)
    th.tick()
    (x,) = th.samples()
    assert x.sm_clock_mhz is None and "no numeric GFX clock" in x.error


def test_older_metrics_without_xcd_list_residency_or_violation_api(amd, gpu, clock):
    m = gpu.metrics
    for key in ("current_gfxclks", "accumulation_counter", "ppt_residency_acc", "socket_thm_residency_acc",
                "prochot_residency_acc", "vr_thm_residency_acc", "hbm_thm_residency_acc"):
        del m[key]  # keys missing across ROCm versions
    m.update(current_gfxclk=2100, throttle_status=False, temperature_hotspot="N/A", temperature_edge=52)
    amd.hide("amdsmi_get_violation_status")
    s = opened(amd, clock)
    x = s.read()
    assert (x.sm_clock_mhz, x.chiplet_clocks_mhz, x.temp_c, x.reasons, x.reason_names) == (2100.0, None, 52.0, 0, "")
    assert x.power_limited_ns is None and x.thermal_limited_ns is None
    gpu.advance(1)
    m["throttle_status"] = True
    x = s.read()
    assert x.reasons == 0x20 and x.reason_names == "throttle_status"
    caps = s.describe()
    assert "current_gfxclk is the clock of record" in caps["XCD clocks"]
    assert "residency counters need ROCm 6.3+" in caps["power-limited time"]
    assert "no amdsmi_get_violation_status" in caps["violation status"]
    assert "temperature_edge instead" in caps["hotspot temperature"]


def test_energy_is_counts_times_resolution(amd, gpu, clock):
    s = opened(amd, clock)
    e0 = s.read().energy_j
    gpu.advance(10, power_w=1000.0)
    clock.advance(10 * MS)
    assert s.read().energy_j - e0 == pytest.approx(10.0, rel=1e-4)  # 1000 W for 10 ms


def test_energy_is_in_the_firmwares_unit_whatever_amdsmi_reports(amd, gpu, clock):
    """Item 3: the firmware counts 2^-16 J (kgd_pp_interface.h); amdsmi's 15.3 uJ (rocm_smi.cc) is 0.27 % off."""
    s = opened(amd, clock)
    e0 = s.read().energy_j
    gpu.advance(1000, power_w=500.0)
    clock.advance(1000 * MS)
    assert s.read().energy_j - e0 == pytest.approx(500.0, rel=1e-5)  # 15.3 uJ per count would give 501.4 J
    s.close()
    amd.break_fn("amdsmi_get_energy_count", 2)
    s.open()
    assert s.read().energy_j == pytest.approx(gpu.metrics["energy_accumulator"] / 65536)
    assert "(amdsmi_get_energy_count failed: AMDSMI_STATUS_NOT_SUPPORTED (2);" in s.describe()["energy"]


def test_xcds_in_deep_sleep_are_not_the_clock_of_record(amd, gpu, clock):
    """Item 2: amd-smi takes <= 140 MHz as deep sleep; a sleeping XCD runs no work and must not set the clock."""
    gpu.metrics["current_gfxclks"] = [2400, 2390, 105, 2380, 2400, 140, 2400, 2395]
    s = opened(amd, clock)
    x = s.read()
    assert x.sm_clock_mhz == 2380.0 and x.chiplet_clocks_mhz == (2400.0, 2390.0, 2380.0, 2400.0, 2400.0, 2395.0)
    assert "deep sleep and left out" in s.describe()["XCD clocks"]
    gpu.advance(1)
    gpu.metrics["current_gfxclks"] = [120, 105, 110, 105, 105, 105, 105, 105]  # an idle GPU: every XCD asleep
    x = s.read()
    assert x.sm_clock_mhz == 105.0 and len(x.chiplet_clocks_mhz) == 8
    assert chiplet_spread([x])["chiplet_spread_mhz"] == 15.0


def test_uint32_residency_counters_wrap_without_a_glitch(amd, gpu, clock):
    """Item 8: accumulation_counter and *_residency_acc are uint32 in gpu_metrics v1.6+ and wrap."""
    gpu.metrics.update(accumulation_counter=(1 << 32) - 4, ppt_residency_acc=(1 << 32) - 2)
    s = opened(amd, clock)
    s.read()
    gpu.advance(10, ppt=1.0)  # both counters pass 2^32 and start again near 0
    clock.advance(10 * MS)
    x = s.read()
    assert gpu.metrics["accumulation_counter"] == 6 and gpu.metrics["ppt_residency_acc"] == 8
    assert x.error is None and x.power_limited_ns == 10 * MS and x.reason_names == "ppt_power"
    gpu.advance(10)
    clock.advance(10 * MS)
    gpu.metrics["accumulation_counter"] -= 15  # below the last reading by a little: a fall, not a wrap
    assert "residency counters went backwards" in s.read().error


def test_a_busy_or_identity_call_while_sampling_keeps_the_samplers_handle(amd, gpu, clock):
    """Item 5: libamd_smi's init is a bool: one shutdown ends every user's handles, so the harness counts users."""
    s = opened(amd, clock)
    assert amdsmi_gpu_processes(BUS, amdsmi=amd) == []  # opens and closes amdsmi while the sampler holds it
    amdsmi_versions(amd)
    gpu.advance(1)
    x = s.read()
    assert x.error is None and x.sm_clock_mhz == 2400.0 and "amdsmi_shut_down" not in amd.calls
    s.close()
    assert amd.init_count == 0 and amd.calls["amdsmi_init"] == 1 and amd.calls["amdsmi_shut_down"] == 1


def test_throttle_status_false_is_not_called_ok(amd, gpu, clock):
    """Item 7: MI300 firmware can give False where it means "not filled"; only True proves it works."""
    s = opened(amd, clock)  # the fake's default: False, as amdsmi gives it for a table without the field
    assert s.describe()["throttle_status"].startswith("unverified: throttle_status reads False")
    assert s.read().reason_names == ""
    gpu.advance(1)
    gpu.metrics["throttle_status"] = True
    assert s.read().reason_names == "throttle_status"
    gpu.metrics["throttle_status"] = "N/A"
    s.close()
    s.open()
    assert s.describe()["throttle_status"].startswith("throttle_status: N/A on this GPU")


def test_energy_counter_going_backwards_flags_the_sample_and_never_goes_negative(amd, gpu, clock):
    s = opened(amd, clock)
    got = [s.read()]

    def step(glitch: int = 0):
        gpu.advance(10, power_w=1000.0)
        clock.advance(10 * MS)
        gpu.metrics["energy_accumulator"] -= glitch
        x = s.read()
        gpu.metrics["energy_accumulator"] += glitch
        got.append(x)
        return x

    step()
    bad = step(glitch=2_000_000)  # a misread below the last good reading
    assert bad.error.startswith("energy counter went backwards (energy_accumulator ")
    assert "reading dropped, the previous one stays the baseline" in bad.error
    assert bad.energy_j is None and bad.sm_clock_mhz == 2400.0  # the other readings are kept for inspection
    good = step()
    assert good.error is None and good.energy_j - got[1].energy_j == pytest.approx(20.0, rel=1e-4)  # nothing lost
    gpu.metrics["energy_accumulator"] = 1_000  # a restart (driver reload): every reading is now lower
    first, second = step(), step()
    assert "went backwards" in first.error and "twice in a row, taken as a restart" in second.error
    after = step()
    assert after.error is None and after.energy_j - good.energy_j == pytest.approx(10.0, rel=1e-4)
    energies = [x.energy_j for x in got if x.energy_j is not None]
    assert energies == sorted(energies)


def test_a_repeated_firmware_timestamp_is_a_stale_sample_without_values(amd, gpu, clock):
    s = opened(amd, clock)
    s.read()
    x = s.read()  # the firmware has not refreshed its table
    assert x.source == "stale" and x.error is None and x.t_ns == clock.now
    assert all(getattr(x, f) is None for f in ("sm_clock_mhz", "power_w", "energy_j", "power_limited_ns", "reasons"))
    gpu.advance(1)
    assert s.read().source == "poll"
    assert s.describe()["repeated readings"].endswith("(1 of 3 reads so far were copies)")


def test_residency_counters_become_the_limited_fraction_of_a_window(amd, gpu, clock):
    gpu.metrics["current_gfxclks"] = [2400, 2380, 2350, 2390, 2400, 2400, 2395, 2385]
    s = opened(amd, clock)
    samples = [s.read()]
    t0 = clock.now
    for i in range(100):
        gpu.advance(10, power_w=1200.0, ppt=0.6 if i % 2 else 0.0, thermal=0.1)  # limited in every other 10 ms
        clock.advance(10 * MS)
        samples.append(s.read())
    x = samples[-1]
    assert x.power_limited_ns == 300 * MS and x.thermal_limited_ns == 100 * MS  # 50 x 6 ms; 100 x 1 ms
    assert x.reason_names == "ppt_power|socket_thermal" and x.reasons == 0x3
    assert samples[-2].reason_names == "socket_thermal"
    chunk = SimpleNamespace(t_start_ns=t0, t_end_ns=clock.now, device_ns=clock.now - t0, launches=100)
    w = summarize_window(window_chunks=[chunk], samples=samples, probes=[], flops_per_launch=1e9, sm_count=None)
    assert w["power_limited_frac"] == pytest.approx(0.3)
    assert w["thermal_limited_frac"] == pytest.approx(0.1)
    assert w["sm_clock_mhz"] == 2350.0
    assert w["energy_j"] == pytest.approx(1200.0 * 1.0, rel=1e-3)
    assert w["sample_errors_in_window"] == 0
    spread = chiplet_spread(samples)
    assert spread["slowest_chiplet"] == 2 and spread["slowest_chiplet_share"] == 1.0
    assert spread["chiplet_spread_mhz"] == 50.0 and spread["chiplet_count"] == 8


def test_a_stalled_accumulation_counter_carries_its_interval_forward(amd, gpu, clock):
    s = opened(amd, clock)
    s.read()
    gpu.advance(10, accumulate=False)  # fresh table, but no accumulation step
    clock.advance(10 * MS)
    assert s.read().power_limited_ns == 0
    gpu.advance(10, ppt=0.5)
    clock.advance(10 * MS)
    assert s.read().power_limited_ns == 10 * MS  # half of the 20 ms since the last step


def test_residency_na_in_one_reading_and_residency_going_backwards(amd, gpu, clock):
    s = opened(amd, clock)
    s.read()
    gpu.advance(10, ppt=1.0)
    clock.advance(10 * MS)
    saved, gpu.metrics["ppt_residency_acc"] = gpu.metrics["ppt_residency_acc"], "N/A"
    x = s.read()
    assert x.power_limited_ns is None and x.error is None
    gpu.metrics["ppt_residency_acc"] = saved
    gpu.advance(10, ppt=1.0)
    clock.advance(10 * MS)
    assert s.read().power_limited_ns == 20 * MS  # the next good reading covers the gap
    gpu.advance(10)
    clock.advance(10 * MS)
    gpu.metrics["accumulation_counter"] -= 100_000
    x = s.read()
    assert x.error.startswith("residency counters went backwards (accumulation_counter ")
    assert x.power_limited_ns == 20 * MS


def test_violation_status_is_called_once_at_open_never_per_poll(amd, gpu, clock):
    s = opened(amd, clock)
    for _ in range(5):
        gpu.advance(10)
        s.read()
    assert amd.calls["amdsmi_get_violation_status"] == 1
    assert s.describe()["violation status"].startswith("ok: at open ppt_pwr 0%")
    gpu.violation_code = 2
    s.close()
    s.open()
    assert "not supported on this GPU" in s.describe()["violation status"]


def test_one_polling_thread(amd, gpu, clock):
    s = opened(amd, clock)
    th = SamplerThread(s, period_s=0.005)
    with th:
        while not amd.calls.get("amdsmi_get_gpu_metrics_info", 0) > 3:
            gpu.advance(1)
        with pytest.raises(TelemetryError, match="called from thread 'MainThread' while 'telemetry-amdsmi' polls it"):
            s.read()
    assert len(amd.metrics_threads) == 2  # the probe in open(), then only the sampler thread
    gpu.advance(1)
    assert s.read().error is None  # that thread has ended: the next reader takes over


# -- names, opening, and what goes wrong -----------------------------------------------------------


def test_reason_names_factory_and_exports(amd):
    assert decode_amd_reasons(0x3F) == ("ppt_power", "socket_thermal", "prochot", "vr_thermal", "hbm_thermal",
                                        "throttle_status")
    assert decode_amd_reasons(0x40) == ("unknown_0x40",)
    assert AMD_POWER_REASONS == {"ppt_power"}
    assert AMD_THERMAL_REASONS == {"socket_thermal", "prochot", "vr_thermal", "hbm_thermal"}
    with pytest.raises(TelemetryError, match="--telemetry amdsmi needs the GPU's PCI bus id"):
        create_sampler("amdsmi", pci_bus_id=None)
    s = create_sampler("amdsmi", pci_bus_id=BUS, amdsmi=amd)
    assert isinstance(s, AmdsmiSampler) and amd.calls == {}
    for suffix in ("_amdsmi", "_amdsmi_device", "_amdsmi_partition"):
        module = importlib.import_module(f"harness.telemetry.{suffix}")
        assert all(hasattr(module, n) for n in module.__all__)


@pytest.mark.parametrize("fn, code, words", [
    ("amdsmi_init", 34, ["amdgpu kernel driver is not loaded", "lsmod | grep amdgpu"]),
    ("amdsmi_init", 10, ["refused access while starting", "/dev/kfd", "render", "--group-add"]),
    ("amdsmi_get_processor_handles", 10, ["refused access while listing GPUs", "usermod -aG render,video"]),
    ("amdsmi_init", 18, ["could not initialise", "/opt/rocm/share/amd_smi"]),
    ("amdsmi_get_gpu_metrics_info", 2, ["cannot read the GPU metrics table", "AMDSMI_STATUS_NOT_SUPPORTED (2)"]),
])
def test_library_errors_at_open(amd, clock, fn, code, words):
    amd.break_fn(fn, code)
    with pytest.raises(TelemetryError) as e:
        opened(amd, clock)
    for w in words:
        assert w in str(e.value)
    assert amd.init_count == 0  # shut down again on every failure


def test_no_amd_gpu_and_a_bus_id_amdsmi_does_not_see(clock):
    with pytest.raises(TelemetryError, match="amdsmi sees no AMD GPU on this machine"):
        opened(FakeAmdsmi(gpus=[]), clock)
    with pytest.raises(TelemetryError) as e:
        AmdsmiSampler("0000:01:00.0", amdsmi=(amd := FakeAmdsmi()), clock=clock).open()
    assert "no GPU with PCI bus id 00000000:01:00.0" in str(e.value) and "00000000:C1:00.0" in str(e.value)
    assert amd.init_count == 0


def test_no_clock_at_all_refuses_to_open(amd, gpu, clock):
    gpu.metrics.update(current_gfxclks=["N/A"] * 8, current_gfxclk="N/A", average_gfxclk_frequency="N/A")
    with pytest.raises(TelemetryError, match="reports no GFX clock"):
        opened(amd, clock)


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """Write a package called amdsmi whose import does what `body` says; return a function that installs it."""
    before = set(sys.modules)

    def install(body: str) -> None:
        (tmp_path / "amdsmi").mkdir()
        (tmp_path / "amdsmi" / "__init__.py").write_text(body)
        monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
        monkeypatch.syspath_prepend(str(tmp_path))

    yield install
    for name in set(sys.modules) - before:
        if name == "amdsmi" or name.startswith("amdsmi."):
            del sys.modules[name]


def test_package_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # `import amdsmi` now raises ImportError
    with pytest.raises(TelemetryError, match="needs the amdsmi Python package"):
        create_sampler("amdsmi", pci_bus_id=BUS).open()


def test_package_installed_but_libamd_smi_missing(fake_package, capsys):
    # What amdsmi_wrapper.py 7.0.2 does without ROCm: print the OSError, then look the library up anyway.
    fake_package(
        'print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory")\n'
        'print("Unable to find libamd_smi.so library try installing amd-smi-lib from your package manager")\n'
        "_libraries = {}\n_libraries['libamd_smi.so']\n"
    )
    with pytest.raises(TelemetryError) as e:
        create_sampler("amdsmi", pci_bus_id=BUS).open()
    assert "installed, but ROCm's libamd_smi.so cannot be loaded (/opt/rocm/lib/libamd_smi.so: cannot open" in str(e.value)
    assert "ROCM_PATH" in str(e.value) and "--telemetry none" in str(e.value)
    assert capsys.readouterr().out == ""  # the wrapper's print is quoted, not leaked


@pytest.mark.skipif(importlib.util.find_spec("amdsmi") is None, reason="the amdsmi wheel is not installed")
def test_the_real_wheel_without_rocm(fake_package, monkeypatch):
    """The installed wheel for real (fake_package only cleans sys.modules up afterwards)."""
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    try:
        import_amdsmi()
    except TelemetryError as e:
        assert "libamd_smi.so cannot be loaded" in str(e) or "does not match" in str(e)
    else:
        pytest.skip("libamd_smi.so is present: this machine has ROCm")


def test_package_newer_than_the_library(fake_package):
    fake_package('raise AttributeError("/opt/rocm-7.0.1/lib/libamd_smi.so: undefined symbol: '
                 'amdsmi_get_gpu_partition_metrics_info")\n')
    with pytest.raises(TelemetryError) as e:
        create_sampler("amdsmi", pci_bus_id=BUS).open()
    assert "does not match ROCm's libamd_smi.so" in str(e.value) and "pip install /opt/rocm/share/amd_smi" in str(e.value)


def test_cache_variable_is_zero_before_the_library_loads(fake_package, monkeypatch):
    fake_package("import os\nCACHE_AT_IMPORT = os.environ.get('AMDSMI_GPU_METRICS_CACHE_MS')\n")
    module, note = import_amdsmi()
    assert module.CACHE_AT_IMPORT == "0" and note.startswith("ok: AMDSMI_GPU_METRICS_CACHE_MS was 1, set to 0")
    monkeypatch.setenv(CACHE_VAR, "100")
    _, note = import_amdsmi()  # loaded already, as PyTorch's ROCm build does at import
    assert "was 100 when amdsmi was already loaded" in note and "may come too late" in note


def test_gpu_processes_and_versions(amd, gpu):
    gpu.processes = [process(4242), process(77, mem="N/A", name="N/A")]
    assert amdsmi_gpu_processes(BUS, amdsmi=amd) == [(4242, 1 << 30, "python3"), (77, None, None)]
    for code, words in ((10, "refused access while listing the processes"), (1, "cannot check that the GPU is otherwise")):
        amd.break_fn("amdsmi_get_gpu_process_list", code)
        with pytest.raises(TelemetryError, match=words):
            amdsmi_gpu_processes(BUS, amdsmi=amd)
    # Item 9: the wheel returns one character of the build string, so it is not shown.
    assert amdsmi_versions(amd) == {"package": "7.0.2", "library": "26.0.2", "rocm": "7.0.2"}
    assert amd.init_count == 0
