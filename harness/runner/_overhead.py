"""The launch overhead a timed figure still holds: one kernel's time per launch inside a CUDA graph, eager back to
back, and the host's cost of issuing one eager launch.

The sustained protocol times CUDA graphs of many launches (`graph_replay_s`, `max_graph_launches`), so the
figure of a microsecond kernel holds neither Python's nor the driver's launch cost, only what the GPU itself
spends between two kernels of a graph. `measure_launch_overhead` sets the three side by side on the same inputs:
- graph: device time per launch of one replay of a graph of `launches` launches;
- eager: device time per launch of `launches` eager launches issued back to back (what a loop would time);
- host: the host's time to issue one eager launch. Where it is at least the graph's time per launch the eager
  loop cannot keep the GPU busy: eager timings of that kernel measure the host, not the kernel.
Each is the median over `repeats`; a device without graphs (the CPU) has no graph figure.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

from harness.runner._launch import _graph

__all__ = ["LaunchOverhead", "measure_launch_overhead"]


@dataclass(frozen=True, kw_only=True)
class LaunchOverhead:
    launches: int  # launches per graph and per eager loop
    repeats: int
    graph_ns: float | None  # median device time per launch inside a graph (None: no graphs on this device)
    eager_ns: float  # median device time per launch, eager, back to back
    host_ns: float  # median host time to issue one eager launch

    @property
    def overhead_ns(self) -> float | None:
        """Per launch, what eager launching adds to the graph's time (None without a graph)."""
        return None if self.graph_ns is None else self.eager_ns - self.graph_ns

    @property
    def host_bound(self) -> bool:
        """The host issues one launch no faster than the device runs it: an eager loop starves the GPU."""
        return self.host_ns >= (self.graph_ns if self.graph_ns is not None else self.eager_ns)

    def as_dict(self) -> dict:
        return {**asdict(self), "overhead_ns": self.overhead_ns, "host_bound": self.host_bound}

    def sentence(self, name: str) -> str:
        us = lambda ns: f"{ns / 1e3:.2f} us"  # noqa: E731
        graph = "no CUDA graph on this device" if self.graph_ns is None else (
            f"graph {us(self.graph_ns)}, eager adds {us(self.overhead_ns)} ({self.overhead_ns / self.graph_ns:+.0%})")
        bound = "host-bound eagerly" if self.host_bound else "device-bound eagerly"
        return (f"{name}: per launch eager {us(self.eager_ns)}, {graph}; the host issues a launch in {us(self.host_ns)} "
                f"({bound}); median of {self.repeats} x {self.launches} launches")


def measure_launch_overhead(device, launch: Callable[[], object], *, launches: int = 200, repeats: int = 5,
                            graph: Callable | None = None, clock: Callable[[], int] = time.perf_counter_ns
                            ) -> LaunchOverhead:
    """Graph, eager and host time per launch of `launch` on `device` (see the module). `graph(device, launch, n)`
    returns a callable that replays n launches (default: the runner's own graph capture); `clock` is the host's."""
    if launches < 1 or repeats < 1:
        raise ValueError(f"launches ({launches}) and repeats ({repeats}) must be at least 1")
    launch()  # compiled and warmed before anything is timed
    device.synchronize()
    eager, host, replayed = [], [], []
    for _ in range(repeats):
        start = device.mark()
        t0 = clock()
        for _ in range(launches):
            launch()
        t1 = clock()
        end = device.mark()
        device.wait(end)
        eager.append(device.elapsed_ns(start, end) / launches)
        host.append((t1 - t0) / launches)
    if device.supports_graphs:
        if graph is None:
            replay = _graph(device, launch, launches).enqueue
        else:
            replay = graph(device, launch, launches)
        replay()
        device.synchronize()
        for _ in range(repeats):
            start = device.mark()
            replay()
            end = device.mark()
            device.wait(end)
            replayed.append(device.elapsed_ns(start, end) / launches)
    return LaunchOverhead(launches=launches, repeats=repeats, graph_ns=statistics.median(replayed) if replayed else None,
                          eager_ns=statistics.median(eager), host_ns=statistics.median(host))
