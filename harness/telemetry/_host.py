"""Host (CPU) telemetry from Linux sysfs: core frequencies, RAPL package energy and power, temperature.

For a CPU run the "clock of record" (`Sample.sm_clock_mhz`) is the *mean* current frequency of the
online cores, and `chiplet_clocks_mhz` holds every core's frequency in cpu-number order. A mean, not a
minimum as on chiplet GPUs, because idle cores park at low clocks and would make a minimum meaningless.

Virtual machines often expose none of these files. The sampler then still returns a Sample per read,
with `t_ns` set and the values None, and `describe()` says what is missing.
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable

from harness.telemetry._sample import Sample

__all__ = ["HostSampler"]

_CPU_DIR = "sys/devices/system/cpu"
_RAPL_DIR = "sys/class/powercap/intel-rapl:0"
_THERMAL_DIR = "sys/class/thermal"


def _read_text(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def _parse_cpu_list(text: str) -> list[int]:
    """'0-3,6,8-9' -> [0, 1, 2, 3, 6, 8, 9] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


class HostSampler:
    """Reads sysfs under `root` (injectable so tests can build a fake tree); `clock` stamps each Sample.

    >>> s = HostSampler()
    >>> s.open()
    >>> s.read().t_ns > 0
    True
    >>> s.close()
    """

    name = "host"

    def __init__(self, root: str = "/", *, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.root = root
        self._clock = clock
        self._freq_paths: list[str] = []
        self._energy_path: str | None = None
        self._energy_max_uj: int | None = None
        self._temp_path: str | None = None
        self._caps: dict[str, str] = {"host": "not opened yet: open() looks for what this machine exposes"}
        self._prev_uj: int | None = None
        self._prev_t: int | None = None
        self._total_uj = 0

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # -- lifecycle -------------------------------------------------------------------------------

    def open(self) -> None:
        self._caps = {}
        self._probe_freq()
        self._probe_rapl()
        self._probe_thermal()
        self._prev_uj = self._prev_t = None
        self._total_uj = 0

    def close(self) -> None:
        pass  # sysfs files are opened and closed per read

    def describe(self) -> dict[str, str]:
        return dict(self._caps)

    def drain(self) -> list[Sample]:
        return []  # sysfs has no buffered history

    # -- probing ---------------------------------------------------------------------------------

    def _probe_freq(self) -> None:
        cpu_dir = self._p(_CPU_DIR)
        label = "CPU frequency"
        try:
            cpus = _parse_cpu_list(_read_text(os.path.join(cpu_dir, "online")))
        except (OSError, ValueError):
            # No "online" list: take every cpuN directory there is.
            try:
                names = os.listdir(cpu_dir)
            except OSError:
                names = []
            cpus = sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"cpu(\d+)", n)))
        paths = [os.path.join(cpu_dir, f"cpu{c}", "cpufreq", "scaling_cur_freq") for c in cpus]
        readable = []
        denied = False
        for path in paths:
            try:
                int(_read_text(path))
                readable.append(path)
            except PermissionError:
                denied = True
            except (OSError, ValueError):
                pass
        self._freq_paths = readable
        if readable:
            self._caps[label] = "ok"
        elif denied:
            self._caps[label] = f"{label}: not readable by this user (permission denied on scaling_cur_freq)"
        else:
            self._caps[label] = f"{label}: not exposed (no cpufreq in {cpu_dir}/cpu*/)"

    def _probe_rapl(self) -> None:
        rapl = self._p(_RAPL_DIR)
        path = os.path.join(rapl, "energy_uj")
        self._energy_path = None
        try:
            int(_read_text(path))
        except PermissionError:
            # Since 2020 (CVE-2020-8694) kernels make energy_uj readable by root only.
            why = f"not readable by this user (permission denied on {path}; the kernel restricts RAPL to root)"
        except (OSError, ValueError):
            why = f"not exposed (no {rapl})"
        else:
            why = None
            self._energy_path = path
        try:
            self._energy_max_uj = int(_read_text(os.path.join(rapl, "max_energy_range_uj")))
        except (OSError, ValueError):
            self._energy_max_uj = None
        if why is not None:
            self._caps["package energy"] = f"package energy: {why}"
            self._caps["package power"] = "package power: derived from package energy, which is unavailable"
            return
        self._caps["package energy"] = "ok" if self._energy_max_uj else (
            "package energy: no max_energy_range_uj, so a counter wrap shows as a gap in power")
        self._caps["package power"] = "ok"

    def _probe_thermal(self) -> None:
        base = self._p(_THERMAL_DIR)
        try:
            zones = sorted((n for n in os.listdir(base) if re.fullmatch(r"thermal_zone\d+", n)),
                           key=lambda n: int(n[len("thermal_zone"):]))
        except OSError:
            zones = []
        usable: list[tuple[str, str]] = []  # (type, temp path)
        for zone in zones:
            temp = os.path.join(base, zone, "temp")
            try:
                int(_read_text(temp))
            except (OSError, ValueError):
                continue
            try:
                kind = _read_text(os.path.join(base, zone, "type"))
            except OSError:
                kind = ""
            usable.append((kind, temp))
        # The package sensor is the one that tracks the cores under load; otherwise take the first zone.
        preferred = [t for k, t in usable if k == "x86_pkg_temp"]
        self._temp_path = preferred[0] if preferred else (usable[0][1] if usable else None)
        if self._temp_path is not None:
            self._caps["temperature"] = "ok"
        else:
            self._caps["temperature"] = f"temperature: not exposed (no readable thermal zones in {base})"

    # -- reading ---------------------------------------------------------------------------------

    def read(self) -> Sample:
        t_ns = self._clock()
        clocks = self._read_freqs()
        energy_j, power_w = self._read_energy(t_ns)
        temp_c = int(_read_text(self._temp_path)) / 1000.0 if self._temp_path else None
        return Sample(
            t_ns=t_ns,
            source="poll",
            sm_clock_mhz=sum(clocks) / len(clocks) if clocks else None,
            chiplet_clocks_mhz=clocks,
            energy_j=energy_j,
            power_w=power_w,
            temp_c=temp_c,
        )

    def _read_freqs(self) -> tuple[float, ...] | None:
        if not self._freq_paths:
            return None
        clocks = []
        for path in self._freq_paths:
            try:
                clocks.append(int(_read_text(path)) / 1000.0)  # kHz -> MHz
            except (OSError, ValueError):
                continue  # a core taken offline since open(); the others still count
        if not clocks:
            raise OSError(f"no core frequency readable any more under {self._p(_CPU_DIR)}")
        return tuple(clocks)

    def _read_energy(self, t_ns: int) -> tuple[float | None, float | None]:
        if self._energy_path is None:
            return None, None
        raw = int(_read_text(self._energy_path))
        prev_uj, prev_t = self._prev_uj, self._prev_t
        self._prev_uj, self._prev_t = raw, t_ns
        if prev_uj is None or prev_t is None:
            self._total_uj = raw
            return raw / 1e6, None
        if raw >= prev_uj:
            delta = raw - prev_uj
        elif self._energy_max_uj:
            delta = self._energy_max_uj - prev_uj + raw  # the counter wrapped at max_energy_range_uj
        else:
            # Wrapped, range unknown: restart the cumulative count and leave power empty once.
            self._total_uj += raw
            return self._total_uj / 1e6, None
        self._total_uj += delta
        dt = t_ns - prev_t
        return self._total_uj / 1e6, (delta / 1e6) / (dt / 1e9) if dt > 0 else None
