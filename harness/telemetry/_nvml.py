"""NVIDIA telemetry through NVML (`pynvml`, package nvidia-ml-py).

What the GPU supports is learned once, in `open()`: a reading that fails there (memory temperature on
a card without that sensor, say) is skipped from then on and explained by `describe()`. A reading that
worked at `open()` and fails later raises from `read()`, so the sampler thread records a visible gap.

Cumulative counters are read at most every `slow_period_s` (0.1 s), not on every poll: on the H200
(driver 580) `nvmlDeviceGetTotalEnergyConsumption` takes 3-4 ms (up to 17 ms) and its value only
changes every 100 ms, and fields 270/271 take about 1 ms, while everything else takes microseconds.
Reading them at 100 Hz would spend 40 % of a core and make the 10 ms poll miss ticks. Polls in
between have `energy_j`, `power_limited_ns` and `thermal_limited_ns` set to None; being cumulative,
they lose nothing but edge resolution.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from harness.errors import TelemetryError
from harness.telemetry._gpm import GpmReader
from harness.telemetry._nvml_device import close_nvml, import_nvml, nvml_error_name, open_nvml_device
from harness.telemetry._reasons import join_reason_names
from harness.telemetry._sample import Sample
from harness.telemetry._vendor import VendorSampler

__all__ = ["NvmlSampler"]

# Field ids (nvml.h); literal so that a pynvml without the constant name still works.
FI_POWER_INSTANT = 186  # mW
FI_MEMORY_TEMP = 82  # degrees C
FI_POWER_CAP_NS = 74  # cumulative ns the SW power cap held the clock down
FI_POWER_BRAKE_NS = 271  # cumulative ns the HW power brake did
FI_SW_THERMAL_NS = 269
FI_HW_THERMAL_NS = 270
_FAST_FIELDS = (FI_POWER_INSTANT, FI_MEMORY_TEMP)
_SLOW_FIELDS = (FI_POWER_CAP_NS, FI_POWER_BRAKE_NS, FI_SW_THERMAL_NS, FI_HW_THERMAL_NS)  # cumulative counters
_FIELDS = _FAST_FIELDS + _SLOW_FIELDS
_SLOW_READS = frozenset({"energy"})
_FIELD_LABELS = {
    FI_POWER_INSTANT: "instant power (field 186)",
    FI_MEMORY_TEMP: "memory temperature (field 82)",
    FI_POWER_CAP_NS: "SW power cap time (field 74)",
    FI_POWER_BRAKE_NS: "HW power brake time (field 271)",
    FI_SW_THERMAL_NS: "SW thermal time (field 269)",
    FI_HW_THERMAL_NS: "HW thermal time (field 270)",
}
# Union member of c_nvmlValue_t for each NVML_VALUE_TYPE_* (0..6).
_VALUE_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

_NOT_OPEN = {"nvml": "not opened yet: open() probes what this GPU supports"}


class NvmlSampler(VendorSampler):
    """Polls one NVIDIA GPU, chosen by PCI bus id, and drains NVML's buffered power samples and GPM.

    `nvml` injects a stand-in for the `pynvml` module (tests); by default `pynvml` is imported in
    `open()`. `clock` is the time base of every `t_ns` (the sampler thread's clock); `wall_clock` is
    only used to map the driver's wall-clock timestamps onto it. `slow_period_s` paces the costly
    cumulative counters (see the module docstring).

    >>> s = NvmlSampler("0000:1B:00.0")  # doctest: +SKIP
    >>> s.open(); s.read().sm_clock_mhz; s.close()  # doctest: +SKIP
    1980.0
    """

    name = "nvml"

    def __init__(
        self,
        pci_bus_id: str,
        *,
        gpm: bool = True,
        nvml: Any = None,
        clock: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], int] = time.time_ns,
        slow_period_s: float = 0.1,
    ) -> None:
        self.pci_bus_id = pci_bus_id
        self._want_gpm = gpm
        self._nvml_arg = nvml
        self._clock = clock
        self._wall_clock = wall_clock
        self._slow_period_ns = round(slow_period_s * 1e9)
        self._next_slow_ns: int | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self._caps: dict[str, str] = dict(_NOT_OPEN)
        self._reads: dict[str, tuple[str, Callable[[], Any]]] = {}  # key -> (label, reader)
        self._fields: tuple[int, ...] = ()
        self._buffer_ok = False
        self._last_seen_us = 0
        self._wall_minus_clock_ns = 0
        self._gpm: GpmReader | None = None
        self._gpm_pending: list[Sample] = []

    # -- lifecycle (open and close: VendorSampler's) --------------------------------------------

    def _connect(self) -> str:
        nvml = import_nvml(self._nvml_arg)
        self._handle, bus_id = open_nvml_device(nvml, self.pci_bus_id)
        self._nvml, self._caps = nvml, {}
        return bus_id

    def _disconnect(self) -> None:
        try:
            if self._gpm is not None:
                self._gpm.close()
        except Exception:
            pass  # the snapshot dies with the NVML context anyway
        finally:
            self._gpm = None
            self._gpm_pending = []
            close_nvml(self._nvml)
            self._nvml = None
            self._reads, self._fields, self._buffer_ok, self._next_slow_ns = {}, (), False, None

    def describe(self) -> dict[str, str]:
        caps = dict(self._caps)
        if self._gpm is not None and self._gpm.unsupported_metrics:
            missing = ", ".join(f"{k} ({v})" for k, v in self._gpm.unsupported_metrics.items())
            caps["GPM utilisation"] = f"GPM utilisation: these metrics are not reported on this GPU: {missing}"
        return caps

    # -- probing ---------------------------------------------------------------------------------

    def _why(self, e: BaseException) -> str:
        nvml = self._nvml
        name = nvml_error_name(nvml, e)
        value = getattr(e, "value", None)
        if value == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
            return f"not supported on this GPU ({name})"
        if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", object()):
            return f"not readable by this user ({name})"
        if value == getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", object()):
            return f"not in this driver's NVML ({name})"
        return f"failed at open ({name}: {e})"

    def _probe(self, key: str, label: str, calls: list[tuple[str, Callable[[Any], Any]]]) -> None:
        """Try each (pynvml function, call) in turn; keep the first that works as the reader of `key`."""
        reasons = []
        for fn_name, call in calls:
            fn = getattr(self._nvml, fn_name, None)
            if fn is None:
                reasons.append(f"this nvidia-ml-py has no {fn_name}")
                continue
            try:
                call(fn)
            except self._nvml.NVMLError as e:
                reasons.append(self._why(e))
                continue
            self._reads[key] = (label, lambda fn=fn, call=call: call(fn))
            self._caps[label] = "ok"
            return
        self._caps[label] = f"{label}: " + "; ".join(dict.fromkeys(reasons))

    def _probe_all(self) -> None:
        nvml, h = self._nvml, self._handle
        self._probe("sm", "SM clock", [("nvmlDeviceGetClockInfo", lambda f: f(h, nvml.NVML_CLOCK_SM))])
        if "sm" not in self._reads:
            raise TelemetryError(
                f"NVML cannot read the SM clock of GPU {self.pci_bus_id} ({self._caps['SM clock']}). The SM "
                "clock is what this harness measures, so NVML telemetry is useless here; use "
                "--telemetry none and rely on the in-band clock probe."
            )
        self._probe("mem", "memory clock", [("nvmlDeviceGetClockInfo", lambda f: f(h, nvml.NVML_CLOCK_MEM))])
        self._probe("power_avg", "average power", [("nvmlDeviceGetPowerUsage", lambda f: f(h))])
        self._probe("energy", "energy", [("nvmlDeviceGetTotalEnergyConsumption", lambda f: f(h))])
        temp = lambda f: f(h, nvml.NVML_TEMPERATURE_GPU)  # noqa: E731
        # nvmlDeviceGetTemperature is deprecated (gone in CUDA 14); the V form is missing from older drivers.
        self._probe("temp", "GPU temperature",
                    [("nvmlDeviceGetTemperatureV", temp), ("nvmlDeviceGetTemperature", temp)])
        self._probe(
            "reasons",
            "clock-event reasons",
            [("nvmlDeviceGetCurrentClocksEventReasons", lambda f: f(h)),
             ("nvmlDeviceGetCurrentClocksThrottleReasons", lambda f: f(h))],
        )
        self._probe_fields()
        self._probe_buffer()
        self._probe_gpm()

    def _probe_fields(self) -> None:
        try:
            values = self._field_values(_FIELDS)
        except self._nvml.NVMLError as e:
            values = {fid: e for fid in _FIELDS}
        self._fields = tuple(fid for fid in _FIELDS if not isinstance(values[fid], BaseException))

        def state(fid: int) -> str:
            return f"{_FIELD_LABELS[fid]} {self._why(values[fid])}"

        def bare(fid: int) -> str:
            return f"field {fid} {self._why(values[fid])}"

        self._caps["instant power"] = "ok" if FI_POWER_INSTANT in self._fields else (
            f"instant power: {bare(FI_POWER_INSTANT)}; power_w stays empty (power_avg_w is the 1 s average)")
        self._caps["memory temperature"] = "ok" if FI_MEMORY_TEMP in self._fields else (
            f"memory temperature: {bare(FI_MEMORY_TEMP)}")
        for label, ids in (("power-limited time", (FI_POWER_CAP_NS, FI_POWER_BRAKE_NS)),
                           ("thermal-limited time", (FI_SW_THERMAL_NS, FI_HW_THERMAL_NS))):
            bad = [state(fid) for fid in ids if fid not in self._fields]
            if not bad:
                self._caps[label] = "ok"
            elif len(bad) == len(ids):
                self._caps[label] = f"{label}: not available ({'; '.join(bad)})"
            else:
                self._caps[label] = f"{label}: partial, the sum leaves out {'; '.join(bad)}"

    def _field_values(self, ids: tuple[int, ...]) -> dict[int, Any]:
        """{field id: value, or the NVMLError of that one field}. Each field carries its own nvmlReturn."""
        nvml = self._nvml
        out: dict[int, Any] = {}
        for fid, fv in zip(ids, nvml.nvmlDeviceGetFieldValues(self._handle, list(ids))):
            ret = int(fv.nvmlReturn)
            if ret != nvml.NVML_SUCCESS:
                out[fid] = nvml.NVMLError(ret)
            else:
                out[fid] = getattr(fv.value, _VALUE_MEMBER[int(fv.valueType)])
        return out

    def _probe_buffer(self) -> None:
        nvml = self._nvml
        fn = getattr(nvml, "nvmlDeviceGetSamples", None)
        label = "power sample buffer"
        if fn is None:
            self._caps[label] = f"{label}: this nvidia-ml-py has no nvmlDeviceGetSamples"
            return
        # Offset between the driver's wall-clock stamps and our clock, measured once: both tick at
        # the same rate, and re-measuring would make mapped stamps jump if NTP stepped the wall clock.
        self._wall_minus_clock_ns = self._wall_clock() - self._clock()
        try:
            _, samples = fn(self._handle, nvml.NVML_TOTAL_POWER_SAMPLES, 0)
            # Start after what the driver already holds: those readings predate this run.
            self._last_seen_us = max((int(s.timeStamp) for s in samples), default=0)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) != nvml.NVML_ERROR_NOT_FOUND:
                self._caps[label] = f"{label}: {self._why(e)}"
                return
            self._last_seen_us = 0  # NotFound: the buffer is empty, not unsupported
        self._buffer_ok = True
        self._caps[label] = "ok"

    def _probe_gpm(self) -> None:
        nvml, label = self._nvml, "GPM utilisation"
        if not self._want_gpm:
            self._caps[label] = f"{label}: off (gpm=False)"
            return
        if getattr(nvml, "nvmlGpmQueryDeviceSupport", None) is None:
            self._caps[label] = f"{label}: this nvidia-ml-py has no GPM functions"
            return
        try:
            supported = bool(nvml.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice)
            if not supported:
                self._caps[label] = f"{label}: not supported on this GPU (GPM needs Hopper or newer)"
                return
            reader = GpmReader(nvml, self._handle, clock=self._clock, describe_error=self._describe_error)
            reader.start()
        except nvml.NVMLError as e:
            self._caps[label] = f"{label}: {self._why(e)}"
            return
        self._gpm = reader
        self._caps[label] = "ok"

    def _describe_error(self, e: BaseException) -> str:
        return f"{nvml_error_name(self._nvml, e)}: {e}"

    # -- reading ---------------------------------------------------------------------------------

    def read(self) -> Sample:
        if self._handle is None:
            raise TelemetryError("NvmlSampler.read() before open(): call open() first.")
        t0 = self._clock()
        slow = self._next_slow_ns is None or t0 >= self._next_slow_ns
        if slow:
            self._next_slow_ns = t0 + self._slow_period_ns
        got: dict[str, Any] = {}
        for key, (label, fn) in self._reads.items():
            if slow or key not in _SLOW_READS:
                got[key] = self._checked(label, fn)
        ids = tuple(f for f in self._fields if slow or f not in _SLOW_FIELDS)
        fields = self._checked("field values", lambda: self._field_values(ids)) if ids else {}
        for fid, v in fields.items():
            if isinstance(v, BaseException):
                raise RuntimeError(f"NVML {_FIELD_LABELS[fid]} read failed: {self._describe_error(v)}")
        t_ns = (t0 + self._clock()) // 2
        reasons = got.get("reasons")
        sample = Sample(
            t_ns=t_ns,
            source="poll",
            sm_clock_mhz=float(got["sm"]),
            mem_clock_mhz=_scaled(got.get("mem"), 1.0),
            power_w=_scaled(fields.get(FI_POWER_INSTANT), 1e-3),
            power_avg_w=_scaled(got.get("power_avg"), 1e-3),
            energy_j=_scaled(got.get("energy"), 1e-3),
            temp_c=_scaled(got.get("temp"), 1.0),
            mem_temp_c=_scaled(fields.get(FI_MEMORY_TEMP), 1.0),
            reasons=None if reasons is None else int(reasons),
            reason_names=None if reasons is None else join_reason_names(int(reasons)),
            power_limited_ns=_summed(fields, (FI_POWER_CAP_NS, FI_POWER_BRAKE_NS)),
            thermal_limited_ns=_summed(fields, (FI_SW_THERMAL_NS, FI_HW_THERMAL_NS)),
        )
        self._step_gpm()
        return sample

    def _step_gpm(self) -> None:
        # Stepped from read() as well as drain(): drains come every ~100 ms, so with timing jitter
        # half of them would fall just short of GPM's 100 ms minimum and the interval would become
        # 200 ms (seen on the H200). Checked on every 10 ms poll, intervals stay within 100-110 ms.
        # A snapshot costs ~0.04 ms; the Sample waits in _gpm_pending for the next drain().
        if self._gpm is not None:
            self._gpm_pending.extend(self._gpm.poll())

    def _checked(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self._nvml.NVMLError as e:
            raise RuntimeError(f"NVML {what} read failed: {self._describe_error(e)}") from e

    def drain(self) -> list[Sample]:
        if self._handle is None:
            return []
        out = self._drain_power() if self._buffer_ok else []
        self._step_gpm()
        out.extend(self._gpm_pending)
        self._gpm_pending = []
        return out

    def _drain_power(self) -> list[Sample]:
        nvml = self._nvml
        try:
            vtype, raw = nvml.nvmlDeviceGetSamples(self._handle, nvml.NVML_TOTAL_POWER_SAMPLES, self._last_seen_us)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) == nvml.NVML_ERROR_NOT_FOUND:
                return []  # nothing newer than last_seen
            return [Sample(t_ns=self._clock(), source="power_buffer", error=f"power buffer: {self._describe_error(e)}")]
        member = _VALUE_MEMBER[int(vtype)]
        out = []
        for s in raw:
            ts_us = int(s.timeStamp)
            if ts_us <= self._last_seen_us:
                continue  # the driver may hand back the boundary sample again
            mw = getattr(s.sampleValue, member)
            t_ns = ts_us * 1000 - self._wall_minus_clock_ns
            out.append(Sample(t_ns=t_ns, source="power_buffer", power_w=mw / 1000.0))
            self._last_seen_us = max(self._last_seen_us, ts_us)
        return out


def _scaled(value: Any, factor: float) -> float | None:
    return None if value is None else float(value) * factor


def _summed(fields: dict[int, Any], ids: tuple[int, ...]) -> int | None:
    present = [int(fields[i]) for i in ids if i in fields]
    return sum(present) if present else None
