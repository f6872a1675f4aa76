"""AMD Instinct telemetry through amdsmi (the pip package over ROCm's libamd_smi.so).

Written against the amdsmi 7.0.2 wheel's source and tested with dicts shaped like its output; it has not
run on AMD hardware here. One call per poll, `amdsmi_get_gpu_metrics_info`, carries every reading:

    sm_clock_mhz        min over the awake XCDs' current_gfxclks (one per XCD; current_gfxclk before v1.4)
    chiplet_clocks_mhz  the awake XCDs' current_gfxclks entries, in slot order
    mem_clock_mhz       current_uclk
    power_w / _avg_w    current_socket_power / average_socket_power (W)
    energy_j            energy_accumulator x 2^-16 J (the firmware's unit; amdsmi's counter_resolution is not used)
    temp_c, mem_temp_c  temperature_hotspot (temperature_edge when hotspot is N/A), temperature_mem
    *_limited_ns        residency counters turned into host-clock ns (below)
    reasons             AMD_REASONS bits: which residency counters advanced, and throttle_status

Decisions, and why:

- Clock of record: the slowest XCD, because the slowest chiplet sets the kernel's time. "N/A" slots (unused
  in a partition, or not reported) are skipped; the tuple keeps slot order, so `chiplet_spread` can say
  which chiplet was slowest. Positions are XCD numbers while skipped slots are trailing, as the firmware
  fills the list; `describe()` records the slots seen at open. An XCD at or below 140 MHz is in deep
  sleep (amd-smi's own threshold, amdsmi_cli/amdsmi_commands.py): it runs no work, so it is skipped too,
  unless every XCD sleeps (an idle GPU), when all are kept and the slowest is the clock.
- Energy: the firmware counts in 2^-16 J (15.2587890625 uJ; kgd_pp_interface.h, gpu_metrics v1.4+),
  while amdsmi_get_energy_count's counter_resolution is a constant 15.3 (rocm_smi.cc), 0.27 % off.
  So energy_j is always counts x 2^-16 J; the resolution amdsmi reports is recorded in `describe()`.
- Repeated readings: one with the previous firmware_timestamp is a copy (table not refreshed yet, or
  amdsmi's cache). It becomes Sample(source="stale") with no values and no error: a copy is the firmware's
  pace, not a failure, and its counters stamped with a later host time would bias every rate. Analysis
  reads "poll" samples only, so copies drop out of every figure but stay visible in the timeline.
- Limited time: over the interval between two fresh readings, d ppt_residency_acc / d accumulation_counter
  is the share of it the power limit held. That share times the interval's host time is added to a
  running total, so `power_limited_ns` is a cumulative ns counter on the host clock and
  summarize_window's d counter / d time is the time-weighted limited fraction, as with NVML. Thermal:
  the largest share among socket, PROCHOT, VR and HBM thermal in each interval (limits can hold at once,
  so a sum could exceed the interval; the max is exact when one dominates). An interval in which
  accumulation_counter did not advance is carried into the next one.
- Limiter bits: amdsmi_get_violation_status derives its active_* flags from these same counters, between
  two metrics reads taken 100 ms apart inside the call (ROCm amdsmi, src/amd_smi/amd_smi.cc), so it cannot
  be polled every 10 ms. It is called once in open() (support and first values, in `describe()`); each
  poll sets the same flags by the same rule: a residency counter advanced during the interval.
- throttle_status: a bool in the Python API (the per-reason bits never reach Python), "N/A" or False on MI300 and
  newer (gpu_metrics v1.8 has no such field, so False is amdsmi's filler). When true, "throttle_status" joins reason_names; it is neither
  a power nor a thermal reason. False proves nothing (not filled reads the same), so `describe()` calls it
  unverified rather than ok.
- Residency and accumulation counters are uint32 in gpu_metrics v1.6+ (amdsmi widens them to uint64), so
  at 1 kHz accumulation_counter wraps after ~50 days: a fall that is a 2^32 wrap is counted as one.
- Counters that go backwards (seen on the energy counter under concurrent reads): the sample gets
  error="energy counter went backwards ..." and no energy, and the previous reading stays the baseline,
  since a glitch is followed by a consistent reading. Twice in a row is taken as a restart (driver
  reload, GPU reset): the new reading becomes the baseline and the change in between is lost; that
  sample is flagged too. Energy is never negative. Residency counters are treated the same way.
- One polling thread: the thread that reads owns the sampler while it lives (the SamplerThread, which
  drains from it too); a read from another thread meanwhile raises: concurrent reads made the energy
  counter go back.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from harness.errors import TelemetryError
from harness.telemetry._amdsmi_device import (
    NOT_SUPPORTED,
    amdsmi_error_text,
    amdsmi_status,
    close_amdsmi,
    import_amdsmi,
    open_amdsmi_device,
)
from harness.telemetry._amdsmi_values import U32_WRAP, CounterBaseline, as_float, as_list, as_number
from harness.telemetry._sample import Sample
from harness.telemetry._vendor import VendorSampler

__all__ = ["AmdsmiSampler", "AMD_REASONS", "AMD_POWER_REASONS", "AMD_THERMAL_REASONS", "decode_amd_reasons"]

AMD_REASONS: dict[int, str] = {
    0x1: "ppt_power",  # package power tracking: the socket power limit
    0x2: "socket_thermal",
    0x4: "prochot",  # processor-hot signal (thermal)
    0x8: "vr_thermal",  # voltage regulator temperature
    0x10: "hbm_thermal",
    0x20: "throttle_status",  # the firmware's one throttle bool: some limit, which one not said
}
AMD_POWER_REASONS: frozenset[str] = frozenset({"ppt_power"})
AMD_THERMAL_REASONS: frozenset[str] = frozenset({"socket_thermal", "prochot", "vr_thermal", "hbm_thermal"})
_BIT = {name: bit for bit, name in AMD_REASONS.items()}
# (metrics key, reason name, violation-status key), in AMD_REASONS order
_RESIDENCY = (
    ("ppt_residency_acc", "ppt_power", "ppt_pwr"),
    ("socket_thm_residency_acc", "socket_thermal", "socket_thrm"),
    ("prochot_residency_acc", "prochot", "prochot_thrm"),
    ("vr_thm_residency_acc", "vr_thermal", "vr_thrm"),
    ("hbm_thm_residency_acc", "hbm_thermal", "hbm_thrm"),
)
ENERGY_UNIT_UJ = 1e6 / 65536  # 2^-16 J per count: kgd_pp_interface.h, gpu_metrics v1.4+ "Energy (15.259uJ (2^-16) units)"
AMDSMI_RESOLUTION_UJ = 15.3  # what amdsmi_get_energy_count reports: a constant in rocm_smi.cc, not the firmware's unit
DEEP_SLEEP_MHZ = 140  # amd-smi treats a clock at or below this as deep sleep (amdsmi_cli/amdsmi_commands.py)
_NOT_OPEN = {"amdsmi": "not opened yet: open() probes what this GPU reports"}


def decode_amd_reasons(mask: int) -> tuple[str, ...]:
    """Names of the AMD_REASONS bits set in `mask`, lowest first.

    >>> decode_amd_reasons(0x21)
    ('ppt_power', 'throttle_status')
    """
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            names.append(AMD_REASONS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return tuple(names)


class AmdsmiSampler(VendorSampler):
    """Polls one AMD GPU, chosen by PCI bus id, through amdsmi.

    `amdsmi` injects a stand-in for the module (tests); by default `amdsmi` is imported in `open()`,
    after AMDSMI_GPU_METRICS_CACHE_MS=0 is set. `clock` is the time base of every `t_ns`.

    >>> s = AmdsmiSampler("0000:c1:00.0")  # doctest: +SKIP
    >>> s.open(); s.read().sm_clock_mhz; s.close()  # doctest: +SKIP
    2100.0
    """

    name = "amdsmi"

    def __init__(self, pci_bus_id: str, *, amdsmi: Any = None, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.pci_bus_id = pci_bus_id
        self._amdsmi_arg = amdsmi
        self._clock = clock
        self._amd: Any = None
        self._handle: Any = None
        self._caps: dict[str, str] = dict(_NOT_OPEN)
        self._cache_note = ""
        self._reset()

    def _reset(self) -> None:
        self._reader: threading.Thread | None = None
        self._last_fw: int | float | None = None
        self._reads = self._stale = 0
        self._clock_mode = "xcd"
        self._temp_key = "temperature_hotspot"
        self._resolution_uj: float | None = None
        self._energy = CounterBaseline("energy counter", ("energy_accumulator",))
        self._energy_j = 0.0
        self._res_keys: tuple[tuple[str, str], ...] = ()  # (metrics key, reason name) of the counters that work
        self._residency: CounterBaseline | None = None
        self._power_ns = self._thermal_ns = 0.0
        self._active: frozenset[str] = frozenset()

    # -- lifecycle (open and close: VendorSampler's) --------------------------------------------

    def _connect(self) -> str:
        module, self._cache_note = import_amdsmi(self._amdsmi_arg)
        self._handle, bus_id = open_amdsmi_device(module, self.pci_bus_id)
        self._amd, self._caps = module, {}
        self._reset()
        return bus_id

    def _disconnect(self) -> None:
        close_amdsmi(self._amd)
        self._amd = self._reader = None

    def describe(self) -> dict[str, str]:
        caps = dict(self._caps)
        if self._handle is not None and "repeated readings" in caps and self._reads:
            caps["repeated readings"] += f" ({self._stale} of {self._reads} reads so far were copies)"
        return caps

    def drain(self) -> list[Sample]:
        return []  # the metrics table has no history to drain

    # -- probing ---------------------------------------------------------------------------------

    def _probe_all(self) -> None:
        amd, caps = self._amd, self._caps
        try:
            m = amd.amdsmi_get_gpu_metrics_info(self._handle)
        except amd.AmdSmiException as e:
            raise TelemetryError(
                f"amdsmi cannot read the GPU metrics table of {self.pci_bus_id} ({amdsmi_error_text(e)}). Every "
                "reading (clocks, power, energy, limits) comes from that table, so AMD telemetry is useless here; "
                "use --telemetry none."
            ) from None
        caps["metrics cache"] = self._cache_note
        slots = [i for i, v in enumerate(as_list(m.get("current_gfxclks"))) if as_number(v) is not None]
        if slots:
            caps["XCD clocks"] = (f"ok: {len(slots)} XCD clocks in slots {_ranges(slots)}; the slowest awake one is the "
                                  f"clock of record (an XCD at or below {DEEP_SLEEP_MHZ} MHz is in deep sleep and left out)")
        elif as_number(m.get("current_gfxclk")) is not None:
            self._clock_mode = "scalar"
            caps["XCD clocks"] = ("XCD clocks: current_gfxclks is missing or all N/A (metrics before v1.4), so the "
                                  "one current_gfxclk is the clock of record and no per-chiplet spread is recorded")
        elif as_number(m.get("average_gfxclk_frequency")) is not None:
            self._clock_mode = "average"
            caps["XCD clocks"] = ("XCD clocks: no current GFX clock in the metrics; average_gfxclk_frequency (the "
                                  "firmware's average, not the current clock) is the clock of record")
        else:
            raise TelemetryError(
                f"amdsmi reports no GFX clock for GPU {self.pci_bus_id} (current_gfxclks, current_gfxclk and "
                "average_gfxclk_frequency are all N/A or missing). The clock is what this harness measures, so AMD "
                "telemetry is useless here; use --telemetry none."
            )
        self._cap(m, "current_socket_power", "instant power", "power_w stays empty; power_avg_w has average_socket_power")
        self._cap(m, "average_socket_power", "average power", "power_avg_w stays empty")
        self._cap(m, "current_uclk", "memory clock", "mem_clock_mhz stays empty")
        self._cap(m, "temperature_mem", "memory temperature", "mem_temp_c stays empty")
        if as_number(m.get("temperature_hotspot")) is None and as_number(m.get("temperature_edge")) is not None:
            self._temp_key = "temperature_edge"
            caps["hotspot temperature"] = "hotspot temperature: N/A on this GPU; temp_c is temperature_edge instead"
        else:
            self._cap(m, "temperature_hotspot", "hotspot temperature", "temp_c stays empty")
        self._probe_energy(m)
        fw = "repeated readings"
        caps[fw] = ("ok: a reading with the previous firmware_timestamp is a copy, returned as source='stale' "
                    "without values" if as_number(m.get("firmware_timestamp")) is not None else
                    f"{fw}: firmware_timestamp is N/A, so copies cannot be told apart and count as fresh polls")
        self._probe_residency(m)
        throttle = m.get("throttle_status")
        if throttle is True:
            caps["throttle_status"] = ("ok: True at open, recorded as the reason 'throttle_status' while true (a bool: "
                                       "which limit is not said)")
        elif throttle is False:
            caps["throttle_status"] = ("unverified: throttle_status reads False, which a firmware that never fills it "
                                       "(MI300 and newer) reads too; it is recorded as a reason only when true, and the "
                                       "limited times come from the residency counters")
        else:
            caps["throttle_status"] = "throttle_status: N/A on this GPU (MI300 and newer report it so)"

    def _cap(self, m: dict, key: str, label: str, consequence: str) -> None:
        ok = as_number(m.get(key)) is not None
        why = "missing from this amdsmi's metrics" if key not in m else f"{m.get(key)!r} on this GPU"
        self._caps[label] = "ok" if ok else f"{label}: {key} is {why}; {consequence}"

    def _probe_energy(self, m: dict) -> None:
        if as_number(m.get("energy_accumulator")) is None:
            self._caps["energy"] = "energy: energy_accumulator is N/A or missing; energy_j stays empty"
            return
        self._resolution_uj = ENERGY_UNIT_UJ
        said, fn = "this amdsmi has no amdsmi_get_energy_count", getattr(self._amd, "amdsmi_get_energy_count", None)
        try:
            if fn is not None:
                res = as_number(fn(self._handle).get("counter_resolution"))
                said = f"amdsmi reports counter_resolution {res:g} uJ" if res is not None else "amdsmi reports no resolution"
        except self._amd.AmdSmiException as e:
            said = f"amdsmi_get_energy_count failed: {amdsmi_error_text(e)}"
        self._caps["energy"] = (f"ok: energy_accumulator x 2^-16 J ({ENERGY_UNIT_UJ:.4f} uJ) per count, the firmware's "
                                f"unit in kgd_pp_interface.h ({said}; rocm_smi hard-codes {AMDSMI_RESOLUTION_UJ}, "
                                "0.27 % off, so it is not used)")

    def _probe_residency(self, m: dict) -> None:
        caps = self._caps
        if as_number(m.get("accumulation_counter")) is not None:
            self._res_keys = tuple((k, n) for k, n, _ in _RESIDENCY if as_number(m.get(k)) is not None)
        names = {n for _, n in self._res_keys}
        if self._res_keys:
            self._residency = CounterBaseline("residency counters", ("accumulation_counter", *(k for k, _ in self._res_keys)),
                                              wrap=U32_WRAP)
        missing = "residency counters need ROCm 6.3+ and an MI300 or newer; N/A or missing here"
        caps["power-limited time"] = ("ok: d ppt_residency_acc / d accumulation_counter x interval" if "ppt_power" in names
                                      else f"power-limited time: {missing}")
        thermal = sorted(names & AMD_THERMAL_REASONS)
        caps["thermal-limited time"] = (f"ok: per interval the largest share among {', '.join(thermal)}" if thermal
                                        else f"thermal-limited time: {missing}")
        fn = getattr(self._amd, "amdsmi_get_violation_status", None)
        label = "violation status"
        if fn is None:
            caps[label] = f"{label}: this amdsmi has no amdsmi_get_violation_status (ROCm 6.3+)"
            return
        try:
            v = fn(self._handle)  # blocks ~100 ms: once here, never per poll
        except self._amd.AmdSmiException as e:
            where = "not supported on this GPU (MI300 and newer)" if amdsmi_status(e) == NOT_SUPPORTED else "failed"
            caps[label] = f"{label}: {where} ({amdsmi_error_text(e)}); limiter bits still come from residency counters"
            return
        seen = ", ".join(f"{key} {v.get('per_' + key)}%" for _, _, key in _RESIDENCY)
        caps[label] = (f"ok: at open {seen}. Polled flags use the same rule (a residency counter advanced) from "
                       "each poll's metrics, since the call itself takes 100 ms")

    # -- reading ---------------------------------------------------------------------------------

    def read(self) -> Sample:
        if self._handle is None:
            raise TelemetryError("AmdsmiSampler.read() before open(): call open() first.")
        me = threading.current_thread()
        if self._reader is not None and self._reader is not me and self._reader.is_alive():
            raise TelemetryError(
                f"AmdsmiSampler.read() was called from thread {me.name!r} while {self._reader.name!r} polls it. amdsmi "
                "must be polled from one thread: concurrent reads have made its energy counter go backwards. Let one "
                "SamplerThread own the sampler."
            )
        self._reader = me  # a reader that has finished hands over to the next (one SamplerThread after another)
        amd = self._amd
        t0 = self._clock()
        try:
            m = amd.amdsmi_get_gpu_metrics_info(self._handle)
        except amd.AmdSmiException as e:
            raise RuntimeError(f"amdsmi GPU metrics read failed: {amdsmi_error_text(e)}") from e
        t = (t0 + self._clock()) // 2
        self._reads += 1
        fw = as_number(m.get("firmware_timestamp"))
        if fw is not None and fw == self._last_fw:
            self._stale += 1
            return Sample(t_ns=t, source="stale")
        clocks, clock = self._clocks(m)
        self._last_fw = fw
        problems: list[str] = []
        energy_j = self._read_energy(m, t, problems)
        power_ns, thermal_ns = self._read_residency(m, t, problems)
        throttle = m.get("throttle_status")
        reasons = None
        if self._res_keys or isinstance(throttle, bool):
            names = set(self._active) | ({"throttle_status"} if throttle is True else set())
            reasons = sum(_BIT[n] for n in names)
        temp = as_number(m.get(self._temp_key))
        return Sample(
            t_ns=t,
            source="poll",
            sm_clock_mhz=clock,
            chiplet_clocks_mhz=clocks,
            mem_clock_mhz=as_float(m.get("current_uclk")),
            power_w=as_float(m.get("current_socket_power")),
            power_avg_w=as_float(m.get("average_socket_power")),
            energy_j=energy_j,
            temp_c=None if temp is None else float(temp),
            mem_temp_c=as_float(m.get("temperature_mem")),
            reasons=reasons,
            reason_names=None if reasons is None else "|".join(decode_amd_reasons(reasons)),
            power_limited_ns=power_ns,
            thermal_limited_ns=thermal_ns,
            error="; ".join(problems) or None,
        )

    def _clocks(self, m: dict) -> tuple[tuple[float, ...] | None, float]:
        xcd = tuple(float(v) for v in as_list(m.get("current_gfxclks")) if as_number(v) is not None)
        if xcd and self._clock_mode == "xcd":
            awake = tuple(c for c in xcd if c > DEEP_SLEEP_MHZ) or xcd  # all asleep: an idle GPU, keep them all
            return awake, min(awake)
        for key in ("current_gfxclk",) + (("average_gfxclk_frequency",) if self._clock_mode == "average" else ()):
            value = as_number(m.get(key))
            if value is not None:
                return None, float(value)
        raise RuntimeError("amdsmi GPU metrics carried no numeric GFX clock this time (current_gfxclks all N/A)")

    def _read_energy(self, m: dict, t: int, problems: list[str]) -> float | None:
        raw = as_number(m.get("energy_accumulator"))
        if raw is None or self._resolution_uj is None:
            return None
        first = self._energy.base is None
        deltas, problem = self._energy.step((int(raw),), t)
        if problem:
            problems.append(problem)
            return None
        if first:
            self._energy_j = int(raw) * self._resolution_uj * 1e-6
        elif deltas is not None:
            self._energy_j += deltas[0] * self._resolution_uj * 1e-6
            self._energy.accept((int(raw),), t)
        return self._energy_j

    def _read_residency(self, m: dict, t: int, problems: list[str]) -> tuple[int | None, int | None]:
        counter = self._residency
        if counter is None:
            return None, None
        values = [as_number(m.get(k)) for k in counter.keys]
        if any(v is None for v in values):
            return None, None  # N/A this time: the baseline stays, the next good reading covers the gap
        values_int = tuple(int(v) for v in values)  # type: ignore[arg-type]
        deltas, problem = counter.step(values_int, t)
        if problem:
            problems.append(problem)
        elif deltas is not None and deltas[0] > 0:
            shares = {name: min(d / deltas[0], 1.0) for (_, name), d in zip(self._res_keys, deltas[1:])}
            span = t - (counter.t if counter.t is not None else t)
            self._power_ns += shares.get("ppt_power", 0.0) * span
            self._thermal_ns += max((s for n, s in shares.items() if n in AMD_THERMAL_REASONS), default=0.0) * span
            self._active = frozenset(n for n, s in shares.items() if s > 0)
            counter.accept(values_int, t)
        names = {n for _, n in self._res_keys}
        return (round(self._power_ns) if "ppt_power" in names else None,
                round(self._thermal_ns) if names & AMD_THERMAL_REASONS else None)


def _ranges(slots: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    runs: list[list[int]] = []
    for slot in slots:
        if runs and slot == runs[-1][-1] + 1:
            runs[-1].append(slot)
        else:
            runs.append([slot])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)
