"""Choosing a telemetry backend by name (`--telemetry nvml|amdsmi|host|replay|none`). Nothing is opened here."""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from harness.errors import TelemetryError
from harness.telemetry._sample import Sample, Sampler

__all__ = ["create_sampler", "NullSampler", "SAMPLER_NAMES"]


class NullSampler:
    """Telemetry off: every read is a Sample with only `t_ns`, so timelines still line up."""

    name = "none"

    def __init__(self, *, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock = clock

    def open(self) -> None:
        pass

    def read(self) -> Sample:
        return Sample(t_ns=self._clock())

    def drain(self) -> list[Sample]:
        return []

    def describe(self) -> dict[str, str]:
        return {"telemetry": "telemetry is off (--telemetry none): no clock, power or temperature was recorded"}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class _Backend:
    """Where a backend's class lives (imported only when it is chosen) and the one argument it cannot do without."""

    module: str
    cls: str
    needs: str | None = None  # "pci_bus_id" or a keyword of the constructor, passed first
    missing: str = ""  # the error when `needs` is not given


_BACKENDS: dict[str, _Backend] = {
    "nvml": _Backend(
        "harness.telemetry._nvml", "NvmlSampler", needs="pci_bus_id",
        missing="--telemetry nvml needs the GPU's PCI bus id, and none was given (the device may not be a CUDA GPU, "
                "or PyTorch did not report its bus id). Use --telemetry host or --telemetry none on a machine "
                "without an NVIDIA GPU."),
    "host": _Backend("harness.telemetry._host", "HostSampler"),
    "replay": _Backend(
        "harness.telemetry._replay", "ReplaySampler", needs="path",
        missing="--telemetry replay needs the recording to play back: pass path= (a Parquet file written by "
                "write_samples). Replay is for tests and re-analysis only; it never stands in for live telemetry."),
    "none": _Backend(__name__, "NullSampler"),
    "amdsmi": _Backend(
        "harness.telemetry._amdsmi", "AmdsmiSampler", needs="pci_bus_id",
        missing="--telemetry amdsmi needs the GPU's PCI bus id, and none was given (the device may not be an AMD "
                "GPU, or PyTorch did not report its bus id). Use --device rocm:N (or rocm:<PCI bus id>), or "
                "--telemetry host or --telemetry none on a machine without an AMD GPU."),
}
SAMPLER_NAMES: tuple[str, ...] = tuple(_BACKENDS)


def create_sampler(name: str, *, pci_bus_id: str | None = None, **kw: Any) -> Sampler:
    """The backend called `name`, created but not opened; `kw` goes to its constructor.

    - "nvml": `NvmlSampler(pci_bus_id, gpm=..., nvml=...)`; needs `pci_bus_id`.
    - "amdsmi": `AmdsmiSampler(pci_bus_id, amdsmi=...)`; needs `pci_bus_id`. Not yet run on AMD hardware.
    - "host": `HostSampler(root=...)`.
    - "replay": `ReplaySampler(path)`; needs `path=` (a file written by `write_samples`).
    - "none": `NullSampler()`.

    >>> create_sampler("none").describe()
    {'telemetry': 'telemetry is off (--telemetry none): no clock, power or temperature was recorded'}
    """
    backend = _BACKENDS.get(name)
    if backend is None:
        raise TelemetryError(
            f"Unknown telemetry backend {name!r}. Choose one of: {', '.join(SAMPLER_NAMES)} "
            "(nvml for NVIDIA GPUs, amdsmi for AMD GPUs, host for CPU sysfs, replay for a recording, none for off)."
        )
    args: tuple = ()
    if backend.needs is not None:
        first = pci_bus_id if backend.needs == "pci_bus_id" else kw.pop(backend.needs, None)
        if first is None:
            raise TelemetryError(backend.missing)
        args = (first,)
    return getattr(importlib.import_module(backend.module), backend.cls)(*args, **kw)
