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


class QueuedChunks:
    """Chunks whose reported device time exceeds the host gap since the previous end (queued ahead)."""

    def __init__(self, clock, ends_ms, device_ms, launches=10, fail_at=None):
        self.clock, self.ends, self.device, self.launches, self.fail_at = clock, list(ends_ms), device_ms, launches, fail_at
        self.calls = 0
        self.finished = False

    def next(self):
        if self.calls == self.fail_at:
            raise RuntimeError("device lost")
        t = self.clock.now + self.ends[self.calls] * 1_000_000
        self.calls += 1
        return t, self.device * 1_000_000, self.launches

    def finish(self):
        self.finished = True


def test_chunk_start_never_precedes_the_previous_end():
    clock = FakeClock()
    src = QueuedChunks(clock, ends_ms=[500, 700, 1200] + [1200 + 500 * i for i in range(1, 40)], device_ms=500)
    out = run_protocol(lambda: src, protocol=SustainedProtocol(), idle_s=0.0, clock=clock, sleep=clock.sleep)
    c0, c1, c2 = out.chunks[:3]
    assert (c0.t_start_ns, c0.t_end_ns) == (0, 500_000_000)
    assert c1.t_start_ns == c0.t_end_ns  # 700 - 500 = 200 ms < 500 ms: clamped to the previous end
    assert c2.t_start_ns == 700_000_000  # 1200 - 500
    assert [c.index for c in out.chunks] == list(range(len(out.chunks)))


def test_callbacks_see_each_phase_and_chunk_in_order():
    clock = FakeClock()
    seen, starts, phases = [], [], []
    out = run_protocol(lambda: ScriptedChunks(clock, lambda t: 1000.0), protocol=SustainedProtocol(), idle_s=1.5,
                       clock=clock, sleep=clock.sleep, on_phase=phases.append,
                       on_chunk=lambda c, chk: seen.append((c.phase, chk)),
                       on_window_start=lambda: starts.append(len(seen)))
    assert phases == ["idle", "warmin", "window"]
    warm = [chk for p, chk in seen if p == "warmin"]
    assert len(warm) == len(out.warmin_chunks) and all(chk is not None for chk in warm)
    assert warm[-1].settled and out.settle is warm[-1] and not any(c.settled for c in warm[:-1])
    assert [chk for p, chk in seen if p == "window"] == [None] * len(out.window_chunks)
    assert starts == [len(out.warmin_chunks)]  # called once, between the last warm-in and first window chunk
    assert out.phases.idle == (0, 1_500_000_000)
    assert out.phases.warmin == (1_500_000_000, out.warmin_chunks[-1].t_end_ns)
    assert out.phases.window == (out.warmin_chunks[-1].t_end_ns, out.window_chunks[-1].t_end_ns)
    assert out.settled_after_s == pytest.approx((out.warmin_chunks[-1].t_end_ns - 1_500_000_000) * 1e-9)


def test_window_stops_at_window_s_exactly():
    out, _ = run(lambda t: 1000.0, window_s=1.5)
    assert len(out.window_chunks) == 3  # 3 x 0.5 s reaches 1.5 s: no fourth chunk
    out, _ = run(lambda t: 1000.0, window_s=1.6)
    assert len(out.window_chunks) == 4


def test_cap_is_reached_at_the_cap_not_after():
    out, _ = run(lambda t: 1000.0 * (1 + 0.01 * t), warmin_cap_s=3.0)
    assert not out.settled and len(out.warmin_chunks) == 6  # the chunk ending at 3.0 s is the last


def test_protocol_settings_reach_the_rule():
    # min 3 s: a flat kernel that would settle at 2 s waits; a trend window of 3 s needs 3 s of chunks.
    assert run(lambda t: 1000.0, warmin_min_s=3.0)[0].settled_after_s == pytest.approx(3.0)
    assert run(lambda t: 1000.0, settle_trend_window_s=3.0)[0].settled_after_s == pytest.approx(3.0)
    osc = lambda t: 1000.0 * (1.006 if round(t * 2) % 2 else 0.994)  # noqa: E731
    assert not run(osc, settle_block_chunks=1, warmin_cap_s=4.0)[0].settled
    assert run(osc, settle_block_chunks=2, warmin_cap_s=4.0)[0].settled
    drift = lambda t: 1000.0 * (1 + 0.001 * t)  # noqa: E731  0.1 %/s: 0.2 % over the 2 s window
    assert run(drift, warmin_cap_s=4.0)[0].settled
    assert not run(drift, warmin_cap_s=4.0, settle_trend_tol=0.001)[0].settled
    step = lambda t: 1000.0 * (1.002 if round(t * 2) % 2 else 1.0)  # noqa: E731
    assert run(step, settle_block_chunks=1, warmin_cap_s=4.0)[0].settled
    assert not run(step, settle_block_chunks=1, warmin_cap_s=4.0, settle_chunk_tol=0.001)[0].settled


def test_the_source_is_finished_when_a_chunk_fails():
    clock = FakeClock()
    src = QueuedChunks(clock, ends_ms=[500 * i for i in range(1, 10)], device_ms=500, fail_at=3)
    with pytest.raises(RuntimeError, match="device lost"):
        run_protocol(lambda: src, protocol=SustainedProtocol(), idle_s=0.0, clock=clock, sleep=clock.sleep)
    assert src.finished
