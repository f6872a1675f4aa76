from __future__ import annotations

import itertools
import sys

import pytest

from harness.errors import TelemetryError
from harness.telemetry import NvmlSampler, SamplerThread, normalize_pci_bus_id, nvml_compute_processes

MS = 1_000_000
BUS = "0000:1b:00.0"


def opened(fake, clock, **kw) -> NvmlSampler:
    s = NvmlSampler(BUS, nvml=fake, clock=clock, wall_clock=lambda: clock() + 1_700_000_000_000_000_000, **kw)
    s.open()
    return s


# -- values and units ------------------------------------------------------------------------------


def test_read_converts_units_and_decodes_reasons(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    x = s.read()
    assert x.source == "poll" and x.error is None and x.t_ns == clock.now
    assert x.sm_clock_mhz == 1755.0 and x.mem_clock_mhz == 2619.0
    assert x.power_w == pytest.approx(691.5)  # field 186, mW
    assert x.power_avg_w == pytest.approx(690.123)  # nvmlDeviceGetPowerUsage, mW
    assert x.energy_j == pytest.approx(123_456.789)  # mJ
    assert x.temp_c == 61.0 and x.mem_temp_c == 70.0
    assert x.reasons == 0x4 and x.reason_names == "sw_power_cap"
    assert x.power_limited_ns == 5_007  # fields 74 + 271
    assert x.thermal_limited_ns == 120  # fields 269 + 270
    assert set(s.describe().values()) == {"ok"}
    assert s.pci_bus_id == "00000000:1B:00.0"


def test_costly_cumulative_counters_are_read_at_most_every_slow_period(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    energy_calls = fake_nvml.calls["nvmlDeviceGetTotalEnergyConsumption"]
    got = []
    for _ in range(25):  # 0, 10, ..., 240 ms
        got.append(s.read())
        clock.advance(10 * MS)
    with_energy = [i * 10 for i, x in enumerate(got) if x.energy_j is not None]
    assert with_energy == [0, 100, 200]
    assert [i * 10 for i, x in enumerate(got) if x.power_limited_ns is not None] == with_energy
    assert [i * 10 for i, x in enumerate(got) if x.thermal_limited_ns is not None] == with_energy
    assert fake_nvml.calls["nvmlDeviceGetTotalEnergyConsumption"] - energy_calls == 3
    assert all(x.power_w == pytest.approx(691.5) and x.sm_clock_mhz == 1755.0 for x in got)  # every poll


def test_several_reasons_and_no_reason(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    fake_nvml.devices[0].reasons = 0x4 | 0x40
    assert s.read().reason_names == "sw_power_cap|hw_thermal"
    fake_nvml.devices[0].reasons = 0
    x = s.read()
    assert x.reasons == 0 and x.reason_names == ""


# -- optional reads are learned at open ------------------------------------------------------------


def test_unsupported_optional_reads_are_skipped_and_described(fake_nvml, clock):
    dev = fake_nvml.devices[0]
    dev.fields[82] = fake_nvml.NVML_ERROR_NOT_SUPPORTED
    dev.fields[270] = fake_nvml.NVML_ERROR_NOT_SUPPORTED
    dev.fields[271] = fake_nvml.NVML_ERROR_NOT_SUPPORTED
    fake_nvml.break_fn("nvmlDeviceGetTemperature", fake_nvml.NVML_ERROR_NOT_SUPPORTED)
    s = opened(fake_nvml, clock)
    calls_at_open = fake_nvml.calls["nvmlDeviceGetTemperature"]
    x = s.read()
    s.read()
    assert x.error is None and x.mem_temp_c is None and x.temp_c is None
    assert x.thermal_limited_ns == 100 and x.power_limited_ns == 5_000
    assert fake_nvml.calls["nvmlDeviceGetTemperature"] == calls_at_open  # not retried after open
    d = s.describe()
    assert d["memory temperature"] == (
        "memory temperature: field 82 not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)")
    assert "not supported on this GPU (NVML_ERROR_NOT_SUPPORTED)" in d["GPU temperature"]
    thermal = d["thermal-limited time"]
    assert thermal.startswith("thermal-limited time: partial") and "field 270" in thermal
    assert d["SM clock"] == "ok"


def test_field_values_call_unsupported_leaves_field_readings_empty(fake_nvml, clock):
    fake_nvml.break_fn("nvmlDeviceGetFieldValues", fake_nvml.NVML_ERROR_NOT_SUPPORTED)
    s = opened(fake_nvml, clock)
    x = s.read()
    assert x.power_w is None and x.power_avg_w == pytest.approx(690.123)
    assert x.power_limited_ns is None and x.thermal_limited_ns is None
    assert "power_w stays empty" in s.describe()["instant power"]
    assert s.describe()["power-limited time"].startswith("power-limited time: not available")


def test_reasons_fall_back_to_the_older_throttle_name(fake_nvml, clock):
    fake_nvml.hide("nvmlDeviceGetCurrentClocksEventReasons")
    s = opened(fake_nvml, clock)
    assert s.read().reasons == 0x4
    assert fake_nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2
    assert s.describe()["clock-event reasons"] == "ok"


def test_reasons_fall_back_when_the_driver_lacks_the_new_function(fake_nvml, clock):
    fake_nvml.break_fn("nvmlDeviceGetCurrentClocksEventReasons", fake_nvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    s = opened(fake_nvml, clock)
    assert s.read().reason_names == "sw_power_cap"


def test_sm_clock_unreadable_refuses_to_start_and_shuts_nvml_down(fake_nvml, clock):
    fake_nvml.break_fn("nvmlDeviceGetClockInfo", fake_nvml.NVML_ERROR_NOT_SUPPORTED)
    with pytest.raises(TelemetryError, match="cannot read the SM clock"):
        opened(fake_nvml, clock)
    assert fake_nvml.init_count == 0


# -- a read that worked at open and fails later -----------------------------------------------------


def test_failing_read_mid_run_is_a_gap_then_sampling_resumes(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    th = SamplerThread(s, period_s=0.010, drain_period_s=10.0, clock=clock)
    th.tick()
    clock.advance(10 * MS)
    fake_nvml.break_fn("nvmlDeviceGetPowerUsage", fake_nvml.NVML_ERROR_GPU_IS_LOST)
    th.tick()
    clock.advance(10 * MS)
    del fake_nvml.broken["nvmlDeviceGetPowerUsage"]
    th.tick()
    polls = [x for x in th.samples() if x.source == "poll"]
    assert [p.error is None for p in polls] == [True, False, True]
    gap = polls[1]
    assert gap.error == "RuntimeError: NVML average power read failed: NVML_ERROR_GPU_IS_LOST: GPU is lost"
    assert gap.sm_clock_mhz is None and gap.t_ns == polls[0].t_ns + 10 * MS
    assert polls[2].sm_clock_mhz == 1755.0


def test_field_failing_mid_run_raises(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    fake_nvml.devices[0].fields[186] = fake_nvml.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(RuntimeError, match=r"instant power \(field 186\) read failed"):
        s.read()


# -- the driver's power buffer --------------------------------------------------------------------


def test_power_buffer_drains_only_new_samples_mapped_to_the_monotonic_clock(fake_nvml, clock):
    wall_offset = 1_700_000_000_000_000_000
    base_us = (clock.now + wall_offset) // 1000
    dev = fake_nvml.devices[0]
    dev.power_samples = [(base_us - 40_000, 100_000), (base_us - 20_000, 200_000)]  # from before open
    s = opened(fake_nvml, clock)
    assert s.drain() == []  # what the driver held at open predates the run
    dev.power_samples += [(base_us + 20_000, 650_000), (base_us + 40_000, 690_500)]
    got = s.drain()
    assert [x.source for x in got] == ["power_buffer", "power_buffer"]
    assert [x.power_w for x in got] == [650.0, 690.5]
    assert [x.t_ns for x in got] == [clock.now + 20 * MS, clock.now + 40 * MS]
    assert s.drain() == []  # the driver repeats the boundary sample; it is not duplicated
    dev.power_samples.append((base_us + 60_000, 700_000))
    assert [x.power_w for x in s.drain()] == [700.0]


def test_power_buffer_not_found_at_open_means_empty_not_unsupported(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    assert s.describe()["power sample buffer"] == "ok"
    fake_nvml.devices[0].power_samples = [(5, 300_000)]
    assert [x.power_w for x in s.drain()] == [300.0]


def test_power_buffer_unsupported_is_not_asked_again(fake_nvml, clock):
    fake_nvml.break_fn("nvmlDeviceGetSamples", fake_nvml.NVML_ERROR_NOT_SUPPORTED)
    s = opened(fake_nvml, clock, gpm=False)
    assert s.drain() == [] and s.drain() == []
    assert fake_nvml.calls["nvmlDeviceGetSamples"] == 1
    assert "not supported on this GPU" in s.describe()["power sample buffer"]


def test_power_buffer_error_mid_run_is_an_error_sample(fake_nvml, clock):
    s = opened(fake_nvml, clock, gpm=False)
    fake_nvml.break_fn("nvmlDeviceGetSamples", fake_nvml.NVML_ERROR_GPU_IS_LOST)
    (x,) = s.drain()
    assert x.source == "power_buffer" and x.power_w is None and "NVML_ERROR_GPU_IS_LOST" in x.error


# -- GPM ------------------------------------------------------------------------------------------


def test_gpm_metrics_every_100_ms_or_more_and_no_leaked_samples(fake_nvml, clock):
    t0 = clock.now
    s = opened(fake_nvml, clock)
    got = []
    for _ in range(12):  # drains at 0, 30, 60, ..., 330 ms
        got += [x for x in s.drain() if x.source == "gpm"]
        clock.advance(30 * MS)
    # Baseline at 0; 30-90 ms are too soon; 120 pairs with 0; 240 pairs with 120; 270-330 too soon.
    assert [x.t_ns - t0 for x in got] == [120 * MS, 240 * MS]
    assert [(a - t0, b - t0) for a, b in fake_nvml.gpm_pairs] == [(0, 120 * MS), (120 * MS, 240 * MS)]
    assert fake_nvml.gpm_leaked() == [2]  # only the retained baseline is live
    s.close()
    assert fake_nvml.gpm_leaked() == []
    x = got[0]
    assert (x.sm_util_pct, x.tensor_util_pct, x.fp32_util_pct) == (95.0, 69.6, 17.9)
    assert x.sm_clock_mhz is None and x.error is None


def test_gpm_is_stepped_by_polls_so_drain_jitter_does_not_double_the_interval(fake_nvml, clock):
    t0 = clock.now
    s = opened(fake_nvml, clock, gpm=True)
    th = SamplerThread(s, period_s=0.010, drain_period_s=0.1, clock=clock)
    late = [300_000, 100_000, 200_000]  # wake-ups 0.1-0.3 ms late, varying as real ones do
    for i in itertools.count():
        if clock.now >= t0 + 450 * MS:
            break
        clock.advance(round(th.tick() * 1e9) + late[i % 3])
    gpm = [x for x in th.samples() + s.drain() if x.source == "gpm"]  # the newest waits for the next drain
    intervals = [(b - a) / MS for a, b in fake_nvml.gpm_pairs]
    assert len(gpm) == 4 and all(100 <= i < 110 for i in intervals), intervals
    assert [x.t_ns for x in gpm] == [b for _, b in fake_nvml.gpm_pairs]


def test_gpm_unsupported_device_gpm_off_and_missing_metric(fake_nvml, clock, kit):
    fake_nvml.devices[0].gpm_supported = False
    s = opened(fake_nvml, clock)
    assert "not supported on this GPU" in s.describe()["GPM utilisation"]
    s.close()
    s = opened(fake_nvml, clock, gpm=False)
    assert s.describe()["GPM utilisation"] == "GPM utilisation: off (gpm=False)"
    s.close()
    dev = kit.FakeDevice(gpm_unsupported={12})
    fake = kit.FakeNvml(clock, [dev])
    s = opened(fake, clock)
    clock.advance(100 * MS)
    (x,) = [x for x in s.drain() if x.source == "gpm"]
    assert x.fp32_util_pct is None and x.sm_util_pct == 95.0
    assert "NVML_GPM_METRIC_FP32_UTIL (NVML_ERROR_NOT_SUPPORTED)" in s.describe()["GPM utilisation"]
    s.close()
    assert "NVML_GPM_METRIC_FP32_UTIL" in s.describe()["GPM utilisation"]


def test_gpm_sample_failure_mid_run_is_an_error_sample_without_leaks(fake_nvml, clock):
    s = opened(fake_nvml, clock)
    clock.advance(150 * MS)
    fake_nvml.break_fn("nvmlGpmSampleGet", fake_nvml.NVML_ERROR_GPU_IS_LOST)
    (x,) = [x for x in s.drain() if x.source == "gpm"]
    assert x.error.startswith("GPM sample: NVML_ERROR_GPU_IS_LOST")
    del fake_nvml.broken["nvmlGpmSampleGet"]
    (y,) = [x for x in s.drain() if x.source == "gpm"]
    assert y.error is None and y.sm_util_pct == 95.0
    s.close()
    assert fake_nvml.gpm_leaked() == []
    assert fake_nvml.init_count == 0


# -- finding the device ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given", ["0000:1b:00.0", "00000000:1B:00.0", "1b:00.0", "0:1B:0", b"00000000:1B:00.0\x00", " 0000:1B:00.0 "]
)
def test_pci_bus_id_normalisation(given):
    assert normalize_pci_bus_id(given) == "00000000:1B:00.0"


def test_bad_pci_bus_id_says_what_form_is_expected():
    with pytest.raises(TelemetryError, match="not a PCI bus id"):
        normalize_pci_bus_id("cuda:0")


def test_device_is_found_by_bus_id_among_several(kit, clock):
    devs = [kit.FakeDevice(bus_id=b"00000000:1B:00.0", sm_mhz=1), kit.FakeDevice(bus_id=b"00000000:9A:00.0", sm_mhz=2)]
    fake = kit.FakeNvml(clock, devs)
    s = NvmlSampler("0000:9a:00.0", nvml=fake, clock=clock)
    s.open()
    assert s.read().sm_clock_mhz == 2.0


def test_no_such_device_lists_the_ids_nvml_sees(kit, clock):
    devs = [kit.FakeDevice(bus_id=b"00000000:1B:00.0"), kit.FakeDevice(bus_id=b"00000000:9A:00.0"),
            kit.FakeDevice(bus_id=b"00000000:C3:00.0", no_permission=True)]
    fake = kit.FakeNvml(clock, devs)
    with pytest.raises(TelemetryError) as e:
        NvmlSampler("0000:42:00.0", nvml=fake, clock=clock).open()
    msg = str(e.value)
    assert "00000000:42:00.0" in msg and "00000000:1B:00.0, 00000000:9A:00.0" in msg
    assert "device 2: NVML_ERROR_NO_PERMISSION" in msg
    assert fake.init_count == 0


def test_pynvml_missing_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(TelemetryError) as e:
        NvmlSampler(BUS).open()
    assert "pip install nvidia-ml-py" in str(e.value) and "--telemetry" in str(e.value)


@pytest.mark.parametrize(
    "code, words",
    [("NVML_ERROR_LIBRARY_NOT_FOUND", ["libnvidia-ml.so.1", "NVIDIA driver"]),
     ("NVML_ERROR_NO_PERMISSION", ["refused access", "/dev/nvidia"]),
     ("NVML_ERROR_DRIVER_NOT_LOADED", ["kernel driver is not loaded"]),
     ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", ["Reboot"])],
)
def test_init_failures_explain_the_fix(fake_nvml, clock, code, words):
    fake_nvml.break_fn("nvmlInit", getattr(fake_nvml, code))
    with pytest.raises(TelemetryError) as e:
        opened(fake_nvml, clock)
    for w in words:
        assert w in str(e.value)


def test_lifecycle(fake_nvml, clock):
    s = NvmlSampler(BUS, nvml=fake_nvml, clock=clock)
    assert "not opened" in s.describe()["nvml"]
    with pytest.raises(TelemetryError, match="before open"):
        s.read()
    assert s.drain() == []
    s.open()
    s.open()  # already open: no second nvmlInit
    assert fake_nvml.init_count == 1
    s.close()
    s.close()
    assert fake_nvml.init_count == 0
    assert s.describe()["SM clock"] == "ok"  # what the GPU supported is still known after close


# -- other processes ------------------------------------------------------------------------------


def test_compute_processes(fake_nvml):
    fake_nvml.devices[0].processes = [(4242, 1 << 30), (77, None)]
    assert nvml_compute_processes(BUS, nvml=fake_nvml) == [(4242, 1 << 30), (77, None)]
    assert fake_nvml.init_count == 0


def test_compute_processes_failure_and_unknown_bus_id(fake_nvml):
    fake_nvml.break_fn("nvmlDeviceGetComputeRunningProcesses", fake_nvml.NVML_ERROR_NO_PERMISSION)
    with pytest.raises(TelemetryError, match="cannot check that the GPU is otherwise idle"):
        nvml_compute_processes(BUS, nvml=fake_nvml)
    with pytest.raises(TelemetryError, match="PCI bus id"):
        nvml_compute_processes(None, nvml=fake_nvml)
    assert fake_nvml.init_count == 0


# -- the fake matches pynvml ----------------------------------------------------------------------


def test_fake_matches_pynvml_names_and_values(kit, fake_nvml):
    pynvml = pytest.importorskip("pynvml")
    for name, value in kit.ERRORS.items():
        assert getattr(pynvml, name) == value, name
    for cls_name, cls in kit.ERROR_CLASSES.items():
        assert type(pynvml.NVMLError(cls().value)).__name__ == cls_name
        assert isinstance(kit.NVMLError(cls().value), cls)
    for name in ["NVML_SUCCESS", "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_TEMPERATURE_GPU", "NVML_TOTAL_POWER_SAMPLES",
                 "NVML_GPM_METRIC_SM_UTIL", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", "NVML_GPM_METRIC_FP32_UTIL",
                 "NVML_GPM_METRICS_GET_VERSION"]:
        assert getattr(fake_nvml, name) == getattr(pynvml, name), name
    assert pynvml.NVML_FI_DEV_POWER_INSTANT == 186 and pynvml.NVML_FI_DEV_MEMORY_TEMP == 82
    assert pynvml.NVML_FI_DEV_PERF_POLICY_POWER == 74
    assert pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN == 269
    assert pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN == 270
    assert pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN == 271
    real_union = [f[0] for f in pynvml.c_nvmlValue_t._fields_]
    assert real_union == ["dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal"]
    metric_fields = [f[0] for f in pynvml.c_nvmlGpmMetric_t._fields_]
    assert {"metricId", "nvmlReturn", "value"} <= set(metric_fields)
    get_fields = [f[0] for f in pynvml.c_nvmlGpmMetricsGet_t._fields_]
    assert get_fields[:4] == ["version", "numMetrics", "sample1", "sample2"] and "metrics" in get_fields
