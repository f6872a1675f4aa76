from __future__ import annotations

import os

import pytest

from harness.telemetry import HostSampler, Sampler

S = 1_000_000_000


def put(root, rel: str, text) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


@pytest.fixture
def sysfs(tmp_path):
    cpu = "sys/devices/system/cpu"
    put(tmp_path, f"{cpu}/online", "0-1,3")
    for n, khz in [(0, 2_000_000), (1, 3_000_000), (2, 9_999_999), (3, 2_500_000)]:  # cpu2 offline
        put(tmp_path, f"{cpu}/cpu{n}/cpufreq/scaling_cur_freq", khz)
    rapl = "sys/class/powercap/intel-rapl:0"
    put(tmp_path, f"{rapl}/energy_uj", 999_000_000)
    put(tmp_path, f"{rapl}/max_energy_range_uj", 1_000_000_000)
    put(tmp_path, "sys/class/thermal/thermal_zone0/type", "acpitz")
    put(tmp_path, "sys/class/thermal/thermal_zone0/temp", 27800)
    put(tmp_path, "sys/class/thermal/thermal_zone1/type", "x86_pkg_temp")
    put(tmp_path, "sys/class/thermal/thermal_zone1/temp", 54000)
    return tmp_path


def test_reads_frequencies_energy_power_and_package_temperature(sysfs, clock):
    s = HostSampler(str(sysfs), clock=clock)
    s.open()
    assert s.describe() == {"CPU frequency": "ok", "package energy": "ok", "package power": "ok", "temperature": "ok"}
    first = s.read()
    assert first.chiplet_clocks_mhz == (2000.0, 3000.0, 2500.0)  # online cpus only, in cpu order
    assert first.sm_clock_mhz == pytest.approx(2500.0)  # mean over cores
    assert first.temp_c == 54.0  # x86_pkg_temp preferred over the first zone
    assert first.energy_j == pytest.approx(999.0) and first.power_w is None  # power needs two readings
    # The counter wraps at max_energy_range_uj: 999 J -> 1 J means 2 J were used.
    put(sysfs, "sys/class/powercap/intel-rapl:0/energy_uj", 1_000_000)
    clock.advance(S // 2)
    second = s.read()
    assert second.energy_j == pytest.approx(1001.0)
    assert second.power_w == pytest.approx(4.0)
    put(sysfs, "sys/class/powercap/intel-rapl:0/energy_uj", 31_000_000)
    clock.advance(S)
    assert s.read().power_w == pytest.approx(30.0)
    assert s.drain() == []
    assert isinstance(s, Sampler)


def test_first_thermal_zone_when_there_is_no_package_sensor(sysfs):
    (sysfs / "sys/class/thermal/thermal_zone1/type").write_text("acpitz2\n")
    s = HostSampler(str(sysfs))
    s.open()
    assert s.read().temp_c == 27.8


def test_without_online_list_every_cpu_directory_counts(sysfs):
    os.remove(sysfs / "sys/devices/system/cpu/online")
    s = HostSampler(str(sysfs))
    s.open()
    assert len(s.read().chiplet_clocks_mhz) == 4


def test_a_core_going_offline_mid_run_is_skipped(sysfs):
    s = HostSampler(str(sysfs))
    s.open()
    os.remove(sysfs / "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq")
    assert s.read().chiplet_clocks_mhz == (2000.0, 2500.0)


def test_energy_vanishing_mid_run_raises_so_the_thread_records_a_gap(sysfs):
    s = HostSampler(str(sysfs))
    s.open()
    os.remove(sysfs / "sys/class/powercap/intel-rapl:0/energy_uj")
    with pytest.raises(OSError):
        s.read()


def test_nothing_exposed_still_samples_and_says_what_is_missing(tmp_path, clock):
    s = HostSampler(str(tmp_path), clock=clock)
    s.open()
    x = s.read()
    assert x.t_ns == clock.now and x.error is None
    assert (x.sm_clock_mhz, x.chiplet_clocks_mhz, x.energy_j, x.power_w, x.temp_c) == (None,) * 5
    d = s.describe()
    assert d["CPU frequency"].startswith("CPU frequency: not exposed (no cpufreq in ")
    assert d["package energy"].startswith("package energy: not exposed (no ")
    assert d["package power"] == "package power: derived from package energy, which is unavailable"
    assert d["temperature"].startswith("temperature: not exposed")


def test_rapl_permission_denied_is_described(sysfs, monkeypatch):
    from harness.telemetry import _host

    real = _host._read_text

    def deny_energy(path):
        if path.endswith("energy_uj") and "max_" not in path:
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(_host, "_read_text", deny_energy)
    s = HostSampler(str(sysfs))
    s.open()
    assert "not readable by this user" in s.describe()["package energy"]
    assert s.read().energy_j is None


def test_this_machine_does_not_crash_and_describes_itself():
    s = HostSampler()
    s.open()
    x = s.read()
    y = s.read()
    s.close()
    assert y.t_ns >= x.t_ns and x.error is None
    d = s.describe()
    assert set(d) == {"CPU frequency", "package energy", "package power", "temperature"}
    for key, text in d.items():
        assert text == "ok" or text.startswith(f"{key}: ")
    has_cpufreq = os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    assert (d["CPU frequency"] == "ok") == has_cpufreq
    assert (x.sm_clock_mhz is not None) == has_cpufreq
