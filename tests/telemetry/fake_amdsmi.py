"""Fakes for the AMD tests: a stand-in for the `amdsmi` module, and a HIP build's `torch.cuda` surface.

The fake amdsmi mirrors the 7.0.2 wheel (amdsmi_interface.py / amdsmi_exception.py): the same function
names, exception classes (AmdSmiLibraryException(err_code) with err_code and get_error_info), status
codes, and metrics dicts with every key the wheel returns, "N/A" where the wheel puts its max-integer
sentinel. `test_fake_matches_the_real_wheel` checks the names against the wheel's source when it is
installed. A GPU holds plain values the tests set; `advance()` moves its counters like the firmware
would, and `live=True` does that from the real clock (for end-to-end runs). Tests inject the fake
explicitly (an argument, or `sys.modules["amdsmi"]`); nothing falls back to it.

Shapes that follow the real sources (fake_amdsmi.md beside this file says which source each comes from):
init/shutdown are a bool, not a count, and a shutdown invalidates every handle; energy counts are in
2^-16 J while amdsmi_get_energy_count reports the constant 15.3 uJ; residency counters are uint32;
amdsmi_get_lib_version's "build" is one character; a partitioned GPU has one BDF per partition, the
function being the partition id, and amdsmi_get_gpu_enumeration_info gives each one's hip_id.
"""

from __future__ import annotations

import copy
import enum
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

STATUS = {"INVAL": 1, "NOT_SUPPORTED": 2, "FAIL_LOAD_MODULE": 4, "NO_PERM": 10, "INIT_ERROR": 18, "NOT_FOUND": 31,
          "NOT_INIT": 32, "DRIVER_NOT_LOADED": 34, "NO_DATA": 40}
ENERGY_UNIT_UJ = 1e6 / 65536  # the firmware's count: 2^-16 J
AMDSMI_RESOLUTION_UJ = 15.3  # what amdsmi_get_energy_count says, whatever the firmware counts in
U32 = 1 << 32
_INFO = {1: "AMDSMI_STATUS_INVAL - Invalid parameters", 2: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
         4: "AMDSMI_STATUS_FAIL_LOAD_MODULE - Fail to load lib", 10: "AMDSMI_STATUS_NO_PERM - Permission Denied",
         18: "AMDSMI_STATUS_INIT_ERROR - Initialization error", 31: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
         32: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
         34: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
         40: "AMDSMI_STATUS_NO_DATA - No data was found for given input"}
NA = "N/A"


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code):
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _INFO.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self):
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self, detailed=True):
        return self.err_info if detailed else self.err_info.split(" - ")[0]

    def get_error_code(self):
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self):
        super().__init__(9)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self):
        super().__init__(8)


class AmdSmiParameterException(AmdSmiException):
    pass


class AmdSmiKeyException(AmdSmiException):
    pass


class AmdSmiBdfFormatException(AmdSmiException):
    pass


class AmdSmiInitFlags(enum.IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2


class AmdSmiClkType(enum.IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    SOC = 3
    MEM = 4


def metrics_702(**overrides) -> dict:
    """A gpu_metrics dict with every key amdsmi 7.0.2 returns, valued like an idle MI355X (v1.8 table)."""
    xcp = lambda n, v: [[v] * 8 for _ in range(n)]  # noqa: E731  8 partitions x 8 XCCs
    m = {
        "common_header.structure_size": 1544, "common_header.format_revision": 1, "common_header.content_revision": 8,
        "temperature_edge": NA, "temperature_hotspot": 45, "temperature_mem": 38, "temperature_vrgfx": NA,
        "temperature_vrsoc": 41, "temperature_vrmem": NA, "average_gfx_activity": 0, "average_umc_activity": 0,
        "average_mm_activity": NA, "average_socket_power": NA, "energy_accumulator": 4_200_000_000,
        "system_clock_counter": 9_000_000_000_000, "average_gfxclk_frequency": NA, "average_socclk_frequency": NA,
        "average_uclk_frequency": NA, "average_vclk0_frequency": NA, "average_dclk0_frequency": NA,
        "average_vclk1_frequency": NA, "average_dclk1_frequency": NA, "current_gfxclk": NA, "current_socclk": NA,
        "current_uclk": 2000, "current_vclk0": NA, "current_dclk0": NA, "current_vclk1": NA, "current_dclk1": NA,
        "throttle_status": False, "current_fan_speed": NA, "pcie_link_width": 16, "pcie_link_speed": 320,
        "gfx_activity_acc": 0, "mem_activity_acc": 0, "temperature_hbm": [NA, NA, NA, NA],
        "firmware_timestamp": 90_000_000_000, "voltage_soc": NA, "voltage_gfx": NA, "voltage_mem": NA,
        "indep_throttle_status": NA, "current_socket_power": 160, "vcn_activity": [0, NA, NA, NA],
        "gfxclk_lock_status": 0, "xgmi_link_width": 16, "xgmi_link_speed": 38, "pcie_bandwidth_acc": 0,
        "pcie_bandwidth_inst": 0, "pcie_l0_to_recov_count_acc": 0, "pcie_replay_count_acc": 0,
        "pcie_replay_rover_count_acc": 0, "xgmi_read_data_acc": [0] * 8, "xgmi_write_data_acc": [0] * 8,
        "current_gfxclks": [2400] * 8, "current_socclks": [1000, 1000, 1000, 1000], "current_vclk0s": [NA] * 4,
        "current_dclk0s": [NA] * 4, "jpeg_activity": [0] * 32, "pcie_nak_sent_count_acc": 0,
        "pcie_nak_rcvd_count_acc": 0, "accumulation_counter": 900_000, "prochot_residency_acc": 0,
        "ppt_residency_acc": 1_000, "socket_thm_residency_acc": 0, "vr_thm_residency_acc": 0, "hbm_thm_residency_acc": 0,
        "num_partition": 1, "xcp_stats.gfx_busy_inst": xcp(8, NA), "xcp_stats.jpeg_busy": xcp(8, NA),
        "xcp_stats.vcn_busy": xcp(8, NA), "xcp_stats.gfx_busy_acc": xcp(8, NA),
        "xcp_stats.gfx_below_host_limit_acc": xcp(8, NA), "xcp_stats.gfx_below_host_limit_ppt_acc": xcp(8, NA),
        "xcp_stats.gfx_below_host_limit_thm_acc": xcp(8, NA), "xcp_stats.gfx_low_utilization_acc": xcp(8, NA),
        "xcp_stats.gfx_below_host_limit_total_acc": xcp(8, NA), "pcie_lc_perf_other_end_recovery": 0,
        "vram_max_bandwidth": 8_000_000, "xgmi_link_status": [1] * 8,
    }
    m.update(overrides)
    return m


@dataclass
class FakeAmdGpu:
    bdf: str = "0000:c1:00.0"  # what amdsmi_get_gpu_device_bdf returns: 4-digit domain, lower case
    metrics: dict = field(default_factory=metrics_702)
    script: list = field(default_factory=list)  # dicts returned (and consumed) before `metrics`
    hip_id: int = 0  # amdsmi_get_gpu_enumeration_info()["hip_id"]
    hip_uuid: str = "5f3c1a2b-0000-0000-0000-000000000000"
    processes: list = field(default_factory=list)  # dicts shaped like amdsmi_get_gpu_process_list's
    violation_code: int | None = None  # an amdsmi status to raise from amdsmi_get_violation_status
    power_cap_uw: int = 1_400_000_000
    max_gfx_mhz: int = 2400
    driver: str = "6.14.14"
    live: bool = False  # advance from the real clock on every metrics read
    live_power_w: float = 1000.0
    live_ppt_share: float = 0.25
    live_thermal_share: float = 0.0
    _live_t: int | None = None
    _carry: dict = field(default_factory=dict)  # fractional residency steps not yet counted

    def advance(self, ms: int, *, power_w: float = 1000.0, ppt: float = 0.0, thermal: float = 0.0,
                accumulate: bool = True) -> None:
        """Move the firmware's counters by `ms` milliseconds: one accumulation step and 100,000 10-ns ticks per ms."""
        m = self.metrics
        m["firmware_timestamp"] += 100_000 * ms
        m["system_clock_counter"] += 1_000_000 * ms
        m["energy_accumulator"] += round(power_w * ms * 1e-3 / (ENERGY_UNIT_UJ * 1e-6))
        m["current_socket_power"] = round(power_w)
        if accumulate and "accumulation_counter" in m:  # keys an older metrics table lacks stay absent
            m["accumulation_counter"] = (m["accumulation_counter"] + ms) % U32  # uint32 in the firmware
            for key, share in (("ppt_residency_acc", ppt), ("socket_thm_residency_acc", thermal)):
                due = self._carry.get(key, 0.0) + share * ms  # whole steps only, like the firmware's counter
                m[key] = (m[key] + int(due + 1e-9)) % U32
                self._carry[key] = due - int(due + 1e-9)

    def read(self) -> dict:
        if self.script:
            return self.script.pop(0)
        if self.live:
            now = time.monotonic_ns()
            ms = 0 if self._live_t is None else (now - self._live_t) // 1_000_000
            if self._live_t is None or ms:  # the firmware refreshes its table once per ms
                self._live_t = now if self._live_t is None else self._live_t + ms * 1_000_000
                self.advance(int(ms), power_w=self.live_power_w, ppt=self.live_ppt_share, thermal=self.live_thermal_share)
        return copy.deepcopy(self.metrics)


class FakeAmdsmi:
    """A stand-in for the amdsmi module: attributes are its exceptions and enums, methods its functions."""

    __version__ = "7.0.2"
    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiRetryException = AmdSmiRetryException
    AmdSmiTimeoutException = AmdSmiTimeoutException
    AmdSmiParameterException = AmdSmiParameterException
    AmdSmiKeyException = AmdSmiKeyException
    AmdSmiBdfFormatException = AmdSmiBdfFormatException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiClkType = AmdSmiClkType

    def __init__(self, gpus: list[FakeAmdGpu] | None = None, *, rocm: str = "7.0.2") -> None:
        self.gpus = gpus if gpus is not None else [FakeAmdGpu()]
        self.rocm = rocm
        self.broken: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.init_count = 0  # 0 or 1: libamd_smi keeps a bool, a second init is a no-op
        self.generation = 0  # bumped by each real shutdown: handles from before it are dead
        self.metrics_threads: set[int] = set()

    def break_fn(self, name: str, code: int) -> None:
        """Make `name` raise AmdSmiLibraryException(code)."""
        self.broken[name] = code

    def hide(self, name: str) -> None:
        """Make `name` absent, as in an older amdsmi."""
        setattr(self, name, None)

    def _enter(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.broken:
            raise AmdSmiLibraryException(self.broken[name])

    def _gpu(self, h) -> FakeAmdGpu:
        if not self.init_count or h.generation != self.generation:
            raise AmdSmiLibraryException(STATUS["NOT_INIT"])  # amdsmi_shut_down ran since this handle was made
        return self.gpus[h.index]

    def amdsmi_init(self, flag=AmdSmiInitFlags.INIT_AMD_GPUS):
        self._enter("amdsmi_init")
        self.init_count = 1

    def amdsmi_shut_down(self):
        self._enter("amdsmi_shut_down")
        if self.init_count:
            self.generation += 1
        self.init_count = 0

    def amdsmi_get_processor_handles(self):
        self._enter("amdsmi_get_processor_handles")
        if not self.init_count:
            raise AmdSmiLibraryException(STATUS["NOT_INIT"])
        return [SimpleNamespace(index=i, generation=self.generation) for i in range(len(self.gpus))]

    def amdsmi_get_gpu_device_bdf(self, h):
        self._enter("amdsmi_get_gpu_device_bdf")
        return self._gpu(h).bdf

    def amdsmi_get_gpu_metrics_info(self, h):
        self._enter("amdsmi_get_gpu_metrics_info")
        self.metrics_threads.add(threading.get_ident())
        return self._gpu(h).read()

    def amdsmi_get_energy_count(self, h):
        self._enter("amdsmi_get_energy_count")
        g = self._gpu(h)
        return {"energy_accumulator": g.metrics["energy_accumulator"], "counter_resolution": AMDSMI_RESOLUTION_UJ,
                "timestamp": g.metrics["system_clock_counter"]}

    def amdsmi_get_violation_status(self, h):
        self._enter("amdsmi_get_violation_status")
        g = self._gpu(h)
        if g.violation_code is not None:
            raise AmdSmiLibraryException(g.violation_code)
        keys = ("prochot_thrm", "ppt_pwr", "socket_thrm", "vr_thrm", "hbm_thrm", "gfx_clk_below_host_limit")
        out = {"reference_timestamp": 1_760_000_000_000_000, "violation_timestamp": g.metrics["firmware_timestamp"],
               "acc_counter": g.metrics["accumulation_counter"]}
        for k in keys:
            out[f"acc_{k}"], out[f"per_{k}"], out[f"active_{k}"] = 0, 0, False
        out["acc_ppt_pwr"] = g.metrics["ppt_residency_acc"]
        return out

    def amdsmi_get_gpu_process_list(self, h):
        self._enter("amdsmi_get_gpu_process_list")
        return copy.deepcopy(self._gpu(h).processes)

    def amdsmi_get_gpu_driver_info(self, h):
        self._enter("amdsmi_get_gpu_driver_info")
        return {"driver_name": "amdgpu", "driver_version": self._gpu(h).driver, "driver_date": "2015/01/01 00:00"}

    def amdsmi_get_power_cap_info(self, h):
        self._enter("amdsmi_get_power_cap_info")
        cap = self._gpu(h).power_cap_uw
        return {"power_cap": cap, "default_power_cap": cap, "dpm_cap": 0, "min_power_cap": 0, "max_power_cap": cap}

    def amdsmi_get_clock_info(self, h, clock_type):
        self._enter("amdsmi_get_clock_info")
        assert isinstance(clock_type, AmdSmiClkType)
        return {"clk": 2400, "min_clk": 500, "max_clk": self._gpu(h).max_gfx_mhz, "clk_locked": False,
                "clk_deep_sleep": NA}

    def amdsmi_get_lib_version(self):
        self._enter("amdsmi_get_lib_version")
        assert self.init_count > 0, "amdsmi_get_lib_version needs amdsmi_init (AMDSMI_CHECK_INIT)"
        return {"major": 26, "minor": 0, "release": 2, "build": "2"}  # the wheel reads one char of the C string

    def amdsmi_get_gpu_enumeration_info(self, h):
        self._enter("amdsmi_get_gpu_enumeration_info")
        g = self._gpu(h)
        return {"drm_render": 128 + h.index, "drm_card": h.index, "hsa_id": h.index + 1, "hip_id": g.hip_id,
                "hip_uuid": g.hip_uuid}

    def amdsmi_get_rocm_version(self):
        self._enter("amdsmi_get_rocm_version")
        return True, self.rocm


def process(pid: int, mem: int | str = 1 << 30, name: str = "python3") -> dict:
    """One entry as amdsmi_get_gpu_process_list returns it (7.0.2)."""
    return {"name": name, "pid": pid, "mem": mem, "engine_usage": {"gfx": 0, "enc": 0},
            "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": mem}, "cu_occupancy": NA}


# -- a HIP build's torch.cuda, on a CPU machine ------------------------------------------------------


class FakeHipEvent:
    """torch.cuda.Event on the CPU: record() takes the host clock, so elapsed time is host time."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.t: int | None = None

    def record(self, stream=None) -> None:
        self.t = time.perf_counter_ns()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "FakeHipEvent") -> float:
        return (end.t - self.t) / 1e6  # ms, like torch


def hip_props(name: str = "AMD Instinct MI355X", *, bus: int = 0xC1, domain: int = 0, device: int = 0) -> SimpleNamespace:
    """torch.cuda.get_device_properties(i) as the HIP build fills it."""
    return SimpleNamespace(name=name, gcnArchName="gfx950:sramecc+:xnack-", multi_processor_count=256,
                           total_memory=288 << 30, pci_bus_id=bus, pci_domain_id=domain, pci_device_id=device,
                           uuid="GPU-5f3c1a2b-0000-0000-0000-000000000000", major=9, minor=5)


def install_fake_hip(monkeypatch, props: list | None = None, *, hip: str = "7.0.51831-a3e329ad8") -> list:
    """Make this CPU PyTorch look like a ROCm build with `props` GPUs (default: one MI355X)."""
    import torch

    props = [hip_props()] if props is None else props
    monkeypatch.setattr(torch.version, "hip", hip, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(props))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(props))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props[i])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "Event", FakeHipEvent)
    return props
