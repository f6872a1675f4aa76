"""Choosing a telemetry backend by name (`--telemetry nvml|amdsmi|host|replay|none`). Nothing is opened here."""

from __future__ import annotations

import time
from typing import Any, Callable

from harness.errors import TelemetryError
from harness.telemetry._sample import Sample, Sampler

__all__ = ["create_sampler", "NullSampler", "SAMPLER_NAMES"]

SAMPLER_NAMES: tuple[str, ...] = ("nvml", "host", "replay", "none", "amdsmi")


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
    if name == "nvml":
        from harness.telemetry._nvml import NvmlSampler

        if pci_bus_id is None:
            raise TelemetryError(
                "--telemetry nvml needs the GPU's PCI bus id, and none was given (the device may not be a CUDA "
                "GPU, or PyTorch did not report its bus id). Use --telemetry host or --telemetry none on a "
                "machine without an NVIDIA GPU."
            )
        return NvmlSampler(pci_bus_id, **kw)
    if name == "host":
        from harness.telemetry._host import HostSampler

        return HostSampler(**kw)
    if name == "replay":
        from harness.telemetry._replay import ReplaySampler

        path = kw.pop("path", None)
        if path is None:
            raise TelemetryError(
                "--telemetry replay needs the recording to play back: pass path= (a Parquet file written by "
                "write_samples). Replay is for tests and re-analysis only; it never stands in for live telemetry."
            )
        return ReplaySampler(path, **kw)
    if name == "none":
        return NullSampler(**kw)
    if name == "amdsmi":
        from harness.telemetry._amdsmi import AmdsmiSampler

        if pci_bus_id is None:
            raise TelemetryError(
                "--telemetry amdsmi needs the GPU's PCI bus id, and none was given (the device may not be an AMD "
                "GPU, or PyTorch did not report its bus id). Use --device rocm:N (or rocm:<PCI bus id>), or "
                "--telemetry host or --telemetry none on a machine without an AMD GPU."
            )
        return AmdsmiSampler(pci_bus_id, **kw)
    raise TelemetryError(
        f"Unknown telemetry backend {name!r}. Choose one of: {', '.join(SAMPLER_NAMES)} "
        "(nvml for NVIDIA GPUs, amdsmi for AMD GPUs, host for CPU sysfs, replay for a recording, none for off)."
    )
