from __future__ import annotations

import platform
import time

from harness.devices._base import DeviceIdentity, Mark, ProcessInfo

__all__ = ["CpuDevice"]


class CpuDevice:
    """The host CPU as a device: launches are synchronous, so host timestamps are device timestamps."""

    kind = "cpu"
    supports_graphs = False

    def __init__(self, spec: str = "cpu") -> None:
        self.spec = spec

    @property
    def torch_device(self):
        import torch

        return torch.device("cpu")

    def identity(self) -> DeviceIdentity:
        import os

        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        name = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        return DeviceIdentity(kind="cpu", index=None, name=name, sm_count=os.cpu_count())

    def synchronize(self) -> None:
        pass

    def mark(self) -> Mark:
        return Mark(time.perf_counter_ns())

    def wait(self, mark: Mark) -> None:
        pass

    def elapsed_ns(self, start: Mark, end: Mark) -> int:
        return int(end.handle - start.handle)

    def other_processes(self) -> list[ProcessInfo]:
        return []

    def default_telemetry(self) -> str:
        return "host"
