from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from harness.telemetry import normalize_pci_bus_id

__all__ = ["Device", "DeviceIdentity", "Mark", "ProcessInfo", "normalize_pci_bus_id"]


@dataclass(frozen=True, kw_only=True)
class DeviceIdentity:
    """Who the device is; stored with every run."""

    kind: str
    index: int | None
    name: str
    pci_bus_id: str | None = None
    uuid: str | None = None
    driver: str | None = None
    runtime: str | None = None  # CUDA / HIP runtime version PyTorch was built with
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: float | None = None
    # The rest of the machine's fingerprint (the history store tells a machine event from a code change by it):
    # read from the vendor library where it answers, None where it does not; never set by the harness.
    serial: str | None = None
    vbios: str | None = None
    ecc: str | None = None  # "on" / "off" (current mode; "on, off pending" when a change awaits a reset)
    mig: str | None = None  # "on" / "off" likewise
    clock_policy: str | None = None  # "default", or the application clocks that differ from their defaults

    def machine(self) -> dict[str, Any]:
        """The fingerprint fields a run row keeps in machine_json (UUID, serial, VBIOS, ECC, MIG, clock policy)."""
        return {"gpu_uuid": self.uuid, "gpu_serial": self.serial, "vbios": self.vbios, "ecc": self.ecc,
                "mig": self.mig, "clock_policy": self.clock_policy}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    used_memory_bytes: int | None
    name: str | None = None


@dataclass(frozen=True)
class Mark:
    """A point on the device's own timeline (a CUDA event, or a host timestamp on the CPU)."""

    handle: Any


@runtime_checkable
class Device(Protocol):
    kind: str  # "cuda", "rocm" or "cpu"
    spec: str  # as the user gave it, e.g. "cuda:0"
    supports_graphs: bool

    @property
    def torch_device(self) -> Any: ...

    def identity(self) -> DeviceIdentity: ...

    def synchronize(self) -> None: ...

    def mark(self) -> Mark:
        """Record a point on the current stream's timeline."""

    def wait(self, mark: Mark) -> None:
        """Block the host until the stream has passed `mark`."""

    def elapsed_ns(self, start: Mark, end: Mark) -> int: ...

    def other_processes(self) -> list[ProcessInfo]:
        """Compute processes other than this one on the device (empty when idle or unknowable)."""

    def default_telemetry(self) -> str: ...
