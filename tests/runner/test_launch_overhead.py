"""measure_launch_overhead on a driven device: a virtual timeline where an eager launch costs the kernel's time
plus a gap and the host a fixed issue time, a graph replay only the kernels' time."""

from __future__ import annotations

import pytest

from harness.runner import measure_launch_overhead


class Timeline:
    """Device time advances per launch by kernel_ns (+ gap_ns when eager); the host clock by host_ns per eager
    launch. mark() reads the device time."""

    def __init__(self, *, kernel_ns, gap_ns, host_ns, graphs=True):
        self.kind, self.spec, self.supports_graphs = "cuda", "cuda:0", graphs
        self.kernel_ns, self.gap_ns, self.host_ns = kernel_ns, gap_ns, host_ns
        self.device_ns = self.host_clock = 0
        self.calls = 0

    def synchronize(self):
        pass

    def mark(self):
        return self.device_ns

    def wait(self, mark):
        pass

    def elapsed_ns(self, a, b):
        return b - a

    def launch(self):
        self.calls += 1
        self.device_ns += self.kernel_ns + self.gap_ns
        self.host_clock += self.host_ns

    def graph(self, device, launch, n):
        def replay():
            self.device_ns += n * self.kernel_ns
        return replay


def test_graph_eager_and_host_time_per_launch_are_told_apart():
    t = Timeline(kernel_ns=5000, gap_ns=3000, host_ns=7000)
    got = measure_launch_overhead(t, t.launch, launches=50, repeats=3, graph=t.graph, clock=lambda: t.host_clock)
    assert (got.graph_ns, got.eager_ns, got.host_ns) == (5000, 8000, 7000)
    assert got.overhead_ns == 3000 and got.host_bound  # issuing (7 us) is slower than the kernel (5 us)
    assert t.calls == 1 + 3 * 50  # one warm-up launch, never timed
    assert "eager adds 3.00 us (+60%)" in got.sentence("k") and "host-bound" in got.sentence("k")
    d = got.as_dict()
    assert d["overhead_ns"] == 3000 and d["host_bound"] is True and d["launches"] == 50


def test_a_long_kernel_is_device_bound_and_a_device_without_graphs_has_no_graph_figure():
    t = Timeline(kernel_ns=200_000, gap_ns=0, host_ns=6000, graphs=False)
    got = measure_launch_overhead(t, t.launch, launches=10, repeats=2, clock=lambda: t.host_clock)
    assert got.graph_ns is None and got.overhead_ns is None and not got.host_bound
    assert "no CUDA graph" in got.sentence("k")
    with pytest.raises(ValueError):
        measure_launch_overhead(t, t.launch, launches=0)
