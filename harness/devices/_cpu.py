from __future__ import annotations

import os
import platform
import time
from typing import Callable

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
        # A CPU run is never refused for a busy machine (a shared CI host always is); how busy it was is
        # measured and recorded instead, by `contention`.
        return []

    def contention(self, *, interval_s: float = 0.1, min_cpu_pct: float = 10.0) -> dict:
        """How busy the host is: load averages and the processes (other than this one and its children)
        that used more than `min_cpu_pct` of one core over `interval_s`. Recorded before and after a run."""
        return self.start_contention(interval_s=interval_s, min_cpu_pct=min_cpu_pct)()

    def start_contention(self, *, interval_s: float = 0.1, min_cpu_pct: float = 10.0, clock=time.monotonic,
                         sleep=time.sleep) -> Callable[[], dict]:
        """`contention`, in two halves: the processes' CPU times are read now, and the returned `finish()` reads
        them again once at least `interval_s` has passed, sleeping only what is left of it. A run starts it before
        its own set-up or teardown and finishes it after, so that work overlaps the interval instead of adding
        0.1 s of sleep at each end of every run; `interval_s` in the result is the interval measured."""
        out: dict = {"checked": True, "cpu_count": os.cpu_count(), "min_cpu_pct": min_cpu_pct}
        try:
            out["load_avg"] = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            out["load_avg"] = None
        try:
            import psutil
        except ImportError as exc:
            out["busy_processes"] = None
            out["error"] = f"psutil missing ({exc}); busy processes not checked"
            out["interval_s"] = interval_s
            return lambda: out
        me = psutil.Process()
        mine = {me.pid, *(c.pid for c in me.children(recursive=True))}
        procs = []
        for p in psutil.process_iter(["pid", "name"]):
            if p.pid in mine:
                continue
            try:
                p.cpu_percent(None)
                procs.append(p)
            except (psutil.Error, OSError):
                pass
        started = clock()

        def finish() -> dict:
            left = interval_s - (clock() - started)
            if left > 0:
                sleep(left)
            out["interval_s"] = round(clock() - started, 3)
            busy = []
            for p in procs:
                try:
                    pct = p.cpu_percent(None)  # over the time since the first reading, whatever it was
                except (psutil.Error, OSError):
                    continue
                if pct >= min_cpu_pct:
                    busy.append({"pid": p.pid, "name": p.info.get("name"), "cpu_pct": round(pct, 1)})
            out["busy_processes"] = sorted(busy, key=lambda b: -b["cpu_pct"])[:20]
            out["busy_cpu_pct"] = round(sum(b["cpu_pct"] for b in busy), 1)
            return out

        return finish

    def default_telemetry(self) -> str:
        return "host"
