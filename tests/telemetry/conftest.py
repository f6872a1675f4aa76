"""Fakes for the telemetry tests: a clock, and a stand-in for the `pynvml` module.

The fake NVML mirrors pynvml's names and values (constants, NVMLError and its NVMLError_* subclasses,
the c_nvmlValue_t union in field values and samples), checked against the real module when it is
installed. Devices hold plain values the tests set; `break_fn` makes a function raise an NVML error.
"""

from __future__ import annotations

import ctypes
import string
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

_ERRORS = {
    "NVML_ERROR_UNINITIALIZED": 1, "NVML_ERROR_INVALID_ARGUMENT": 2, "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4, "NVML_ERROR_ALREADY_INITIALIZED": 5, "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_INSUFFICIENT_SIZE": 7, "NVML_ERROR_INSUFFICIENT_POWER": 8, "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_TIMEOUT": 10, "NVML_ERROR_IRQ_ISSUE": 11, "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13, "NVML_ERROR_CORRUPTED_INFOROM": 14, "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_RESET_REQUIRED": 16, "NVML_ERROR_OPERATING_SYSTEM": 17, "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_IN_USE": 19, "NVML_ERROR_MEMORY": 20, "NVML_ERROR_NO_DATA": 21, "NVML_ERROR_UNKNOWN": 999,
}
_ERROR_TEXT = {3: "Not Supported", 4: "Insufficient Permissions", 6: "Not Found", 12: "NVML Shared Library Not Found",
               13: "Function Not Found", 15: "GPU is lost"}


class NVMLError(Exception):
    """Same construction rule as pynvml: NVMLError(code) returns an instance of the code's subclass."""

    _valClassMapping: dict[int, type] = {}

    def __new__(typ, value):
        if typ is NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return _ERROR_TEXT.get(self.value, f"NVML Error with code {self.value}")


ERROR_CLASSES: dict[str, type] = {}
for _name, _val in _ERRORS.items():
    _cls_name = "NVMLError_" + string.capwords(_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
    _cls = type(_cls_name, (NVMLError,), {"__new__": (lambda v: lambda typ, *a: NVMLError.__new__(typ, v))(_val)})
    NVMLError._valClassMapping[_val] = _cls
    ERROR_CLASSES[_cls_name] = _cls


class c_nvmlValue_t(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong), ("siVal", ctypes.c_int),
                ("usVal", ctypes.c_ushort)]


_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def _value(vtype: int, v) -> c_nvmlValue_t:
    u = c_nvmlValue_t()
    setattr(u, _MEMBER[vtype], v)
    return u


class FakeClock:
    """Integer nanoseconds that move only when told to."""

    def __init__(self, start: int = 0) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += int(ns)


@dataclass
class FakeDevice:
    bus_id: bytes = b"00000000:1B:00.0"
    sm_mhz: int = 1755
    mem_mhz: int = 2619
    power_mw: int = 690_123
    energy_mj: int = 123_456_789
    temp_c: int = 61
    reasons: int = 0x4
    # field id -> (value type, value), or an int NVML error code for "this field fails"
    fields: dict = field(default_factory=lambda: {
        186: (1, 691_500), 82: (1, 70), 74: (3, 5_000), 271: (3, 7), 269: (3, 100), 270: (3, 20)})
    power_samples: list = field(default_factory=list)  # (wall-clock µs, mW)
    gpm_supported: bool = True
    gpm_values: dict = field(default_factory=lambda: {2: 95.0, 5: 69.6, 12: 17.9})
    gpm_unsupported: set = field(default_factory=set)
    processes: list = field(default_factory=list)  # (pid, bytes or None)
    no_permission: bool = False


class FakeGpmSample:
    def __init__(self, n: int) -> None:
        self.n, self.t, self.filled, self.freed = n, None, False, False


class FakeNvml:
    """A stand-in for the pynvml module: attributes are constants, methods are the functions."""

    NVMLError = NVMLError
    NVML_SUCCESS = 0
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_TEMPERATURE_GPU = 0
    NVML_TOTAL_POWER_SAMPLES = 0
    NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_FP32_UTIL = 2, 5, 12
    NVML_GPM_METRICS_GET_VERSION = 1

    def __init__(self, clock: FakeClock, devices: list[FakeDevice] | None = None) -> None:
        self.clock = clock
        self.devices = devices if devices is not None else [FakeDevice()]
        self.broken: dict[str, int] = {}  # function name -> NVML error code it raises
        self.calls: dict[str, int] = {}
        self.init_count = 0
        self.gpm_allocated: list[FakeGpmSample] = []
        self.gpm_pairs: list[tuple[int, int]] = []  # (sample1.t, sample2.t) of each metrics call
        self.samples_inclusive = True  # return the sample at last_seen again, as a driver may

    def break_fn(self, name: str, code: int) -> None:
        self.broken[name] = code

    def hide(self, name: str) -> None:
        """Make `name` absent, as in an older nvidia-ml-py."""
        setattr(self, name, None)

    def _enter(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.broken:
            raise NVMLError(self.broken[name])

    def _dev(self, h) -> FakeDevice:
        return self.devices[h.index]

    def nvmlInit(self):
        self._enter("nvmlInit")
        self.init_count += 1

    def nvmlShutdown(self):
        self._enter("nvmlShutdown")
        self.init_count -= 1

    def nvmlDeviceGetCount(self):
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        self._enter("nvmlDeviceGetHandleByIndex")
        if self.devices[i].no_permission:
            raise NVMLError(4)
        return SimpleNamespace(index=i)

    def nvmlDeviceGetPciInfo(self, h):
        self._enter("nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=self._dev(h).bus_id)

    def nvmlDeviceGetClockInfo(self, h, kind):
        self._enter("nvmlDeviceGetClockInfo")
        return {1: self._dev(h).sm_mhz, 2: self._dev(h).mem_mhz}[kind]

    def nvmlDeviceGetPowerUsage(self, h):
        self._enter("nvmlDeviceGetPowerUsage")
        return self._dev(h).power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._enter("nvmlDeviceGetTotalEnergyConsumption")
        return self._dev(h).energy_mj

    def nvmlDeviceGetTemperature(self, h, sensor):
        self._enter("nvmlDeviceGetTemperature")
        assert sensor == 0
        return self._dev(h).temp_c

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return self._dev(h).reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._dev(h).reasons

    def nvmlDeviceGetFieldValues(self, h, ids):
        self._enter("nvmlDeviceGetFieldValues")
        out = []
        for fid in ids:
            spec = self._dev(h).fields.get(fid, 3)
            if isinstance(spec, int):
                out.append(SimpleNamespace(fieldId=fid, nvmlReturn=spec, valueType=0, value=c_nvmlValue_t()))
            else:
                out.append(SimpleNamespace(fieldId=fid, nvmlReturn=0, valueType=spec[0], value=_value(*spec)))
        return out

    def nvmlDeviceGetSamples(self, h, kind, last_seen):
        self._enter("nvmlDeviceGetSamples")
        assert kind == self.NVML_TOTAL_POWER_SAMPLES
        newer = [(ts, mw) for ts, mw in self._dev(h).power_samples
                 if ts > last_seen or (self.samples_inclusive and last_seen and ts == last_seen)]
        if not newer:
            raise NVMLError(6)
        return 1, [SimpleNamespace(timeStamp=ts, sampleValue=_value(1, mw)) for ts, mw in newer]

    def nvmlGpmQueryDeviceSupport(self, h):
        self._enter("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(version=1, isSupportedDevice=int(self._dev(h).gpm_supported))

    def nvmlGpmSampleAlloc(self):
        self._enter("nvmlGpmSampleAlloc")
        s = FakeGpmSample(len(self.gpm_allocated))
        self.gpm_allocated.append(s)
        return s

    def nvmlGpmSampleGet(self, h, s):
        self._enter("nvmlGpmSampleGet")
        s.t, s.filled = self.clock(), True
        return s

    def nvmlGpmSampleFree(self, s):
        self._enter("nvmlGpmSampleFree")
        assert not s.freed, "GPM sample freed twice"
        s.freed = True

    def c_nvmlGpmMetricsGet_t(self):
        metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(8)]
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None, metrics=metrics)

    def nvmlGpmMetricsGet(self, mg):
        self._enter("nvmlGpmMetricsGet")
        assert mg.version == self.NVML_GPM_METRICS_GET_VERSION
        s1, s2 = mg.sample1, mg.sample2
        assert s1.filled and s2.filled and not s1.freed and not s2.freed
        self.gpm_pairs.append((s1.t, s2.t))
        dev = self.devices[0]
        for m in mg.metrics[: mg.numMetrics]:
            if m.metricId in dev.gpm_unsupported:
                m.nvmlReturn = 3
            else:
                m.value = dev.gpm_values[m.metricId]
        return mg

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).processes]

    def gpm_leaked(self) -> list[int]:
        return [s.n for s in self.gpm_allocated if not s.freed]


for _name, _val in {**_ERRORS, **ERROR_CLASSES}.items():
    setattr(FakeNvml, _name, _val)


@pytest.fixture
def kit() -> SimpleNamespace:
    """The fake classes, for tests that build their own devices or check the fake against pynvml."""
    return SimpleNamespace(FakeNvml=FakeNvml, FakeDevice=FakeDevice, FakeClock=FakeClock, NVMLError=NVMLError,
                           ERRORS=_ERRORS, ERROR_CLASSES=ERROR_CLASSES)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1_000_000_000)


@pytest.fixture
def fake_nvml(clock: FakeClock) -> FakeNvml:
    return FakeNvml(clock)
