"""The sustained protocol driven by scripted chunk times and a fake clock: no device, no real time."""

import pytest

from harness.config import SustainedProtocol
from harness.runner import run_protocol


class FakeClock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += int(s * 1e9)


class ScriptedChunks:
    """Each chunk lasts chunk_s of device time; its time per launch follows `curve(t_s)`."""

    def __init__(self, clock, curve, chunk_s=0.5, launches=100):
        self.clock, self.curve, self.chunk_ns, self.launches = clock, curve, int(chunk_s * 1e9), launches
        self.t0 = clock()
        self.finished = False

    def next(self):
        self.clock.now += self.chunk_ns
        per_launch = self.curve((self.clock.now - self.t0) * 1e-9)
        return self.clock.now, int(per_launch * self.launches), self.launches

    def finish(self):
        self.finished = True


def run(curve, **proto):
    clock = FakeClock()
    sources = []

    def factory():
        sources.append(ScriptedChunks(clock, curve))
        return sources[-1]

    phases = []
    out = run_protocol(factory, protocol=SustainedProtocol(**proto), idle_s=2.0, clock=clock, sleep=clock.sleep,
                       on_phase=phases.append)
    assert sources[0].finished
    return out, phases


def test_constant_kernel_settles_after_trend_window_and_times_window():
    out, phases = run(lambda t: 1000.0)
    assert phases == ["idle", "warmin", "window"]
    assert out.settled and out.settled_after_s == pytest.approx(2.0)
    w = out.window_chunks
    assert len(w) == 8  # 4 s window of 0.5 s chunks
    assert out.phases.idle == (0, 2_000_000_000)
    assert out.phases.window[0] == out.warmin_chunks[-1].t_end_ns  # window follows warm-in with no gap


def test_drifting_kernel_settles_only_when_drift_stops():
    # 2 % slower over the first 6 s, then flat: the settle point must be after 6 s.
    out, _ = run(lambda t: 1000.0 * (1 + 0.02 * min(t, 6.0) / 6.0))
    assert out.settled
    assert out.settled_after_s >= 6.0


def test_cap_marks_unsettled_and_still_records_window():
    out, _ = run(lambda t: 1000.0 * (1 + 0.01 * t), warmin_cap_s=5.0)
    assert not out.settled and out.settled_after_s is None
    assert out.settle.reason == "still drifting" or "disagree" in out.settle.reason
    assert out.warmin_chunks[-1].t_end_ns - out.phases.warmin[0] >= 5e9
    assert len(out.window_chunks) == 8


def test_chunk_start_is_end_minus_device_time():
    out, _ = run(lambda t: 1000.0)
    c = out.chunks[3]
    assert c.t_end_ns - c.t_start_ns == c.device_ns
    assert c.time_ns == pytest.approx(1000.0)
