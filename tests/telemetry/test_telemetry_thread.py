from __future__ import annotations

import threading
import time

import pytest

from harness.errors import ConfigError
from harness.telemetry import Sample, SamplerThread

MS = 1_000_000


class Scripted:
    """A sampler whose reads take `read_cost_ns` of fake time and can be told to fail."""

    name = "scripted"

    def __init__(self, clock, read_cost_ns: int = 0) -> None:
        self.clock = clock
        self.read_cost_ns = read_cost_ns
        self.fail_reads = False
        self.fail_drain = False
        self.drains = 0
        self.pending: list[Sample] = []

    def open(self) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> dict[str, str]:
        return {}

    def read(self) -> Sample:
        t = self.clock()
        self.clock.advance(self.read_cost_ns)
        if self.fail_reads:
            raise OSError("sensor gone")
        return Sample(t_ns=t, sm_clock_mhz=1000.0)

    def drain(self) -> list[Sample]:
        self.drains += 1
        if self.fail_drain:
            raise RuntimeError("buffer broke")
        out, self.pending = self.pending, []
        return out


def poll_times(th, start):
    return [(s.t_ns - start) // MS for s in th.samples() if s.source == "poll"]


def test_deadlines_are_absolute_so_slow_reads_do_not_drift(clock):
    start = clock.now
    th = SamplerThread(Scripted(clock, read_cost_ns=3 * MS), period_s=0.010, clock=clock)
    for _ in range(6):
        clock.advance(round(th.tick() * 1e9))
    assert poll_times(th, start) == [0, 10, 20, 30, 40, 50]
    assert th.skipped_ticks == 0


def test_late_wakeup_skips_missed_ticks_instead_of_bursting(clock):
    start = clock.now
    th = SamplerThread(Scripted(clock), period_s=0.010, drain_period_s=1.0, clock=clock)
    assert th.tick() == pytest.approx(0.010)
    clock.advance(10 * MS)
    th.tick()
    clock.advance(35 * MS)  # woke 25 ms late: ticks at 20, 30 and 40 ms were missed
    wait = th.tick()
    assert wait == pytest.approx(0.005)  # next tick is 50 ms, on the original grid
    assert th.tick() == pytest.approx(0.005)  # calling again early does nothing
    assert poll_times(th, start) == [0, 10, 45]
    assert th.skipped_ticks == 2


def test_a_read_slower_than_the_period_skips_ticks(clock):
    start = clock.now
    th = SamplerThread(Scripted(clock, read_cost_ns=25 * MS), period_s=0.010, drain_period_s=1.0, clock=clock)
    for _ in range(3):
        clock.advance(round(th.tick() * 1e9))
    assert poll_times(th, start) == [0, 30, 60]
    assert th.skipped_ticks == 6  # 10, 20, 40, 50, 70, 80 ms


def test_drain_runs_on_its_own_period(clock):
    sampler = Scripted(clock)
    th = SamplerThread(sampler, period_s=0.010, drain_period_s=0.1, clock=clock)
    while clock.now < 1_000 * MS + 1_000 * MS:  # one second of fake time from the fixture's start
        clock.advance(round(th.tick() * 1e9))
    assert sampler.drains == 10  # at 0, 100, ..., 900 ms
    assert len([s for s in th.samples() if s.source == "poll"]) == 100


def test_failed_reads_become_error_samples_and_polling_continues(clock):
    sampler = Scripted(clock)
    th = SamplerThread(sampler, period_s=0.010, drain_period_s=1.0, clock=clock)
    th.tick()
    sampler.fail_reads = True
    clock.advance(10 * MS)
    th.tick()
    gap = th.last_poll()
    assert gap.error == "OSError: sensor gone" and gap.t_ns == clock.now and gap.sm_clock_mhz is None
    sampler.fail_reads = False
    clock.advance(10 * MS)
    th.tick()
    assert th.last_poll().error is None and th.last_poll().sm_clock_mhz == 1000.0
    assert [s.error is None for s in th.samples()] == [True, False, True]


def test_failed_drain_is_recorded(clock):
    sampler = Scripted(clock)
    sampler.fail_drain = True
    th = SamplerThread(sampler, clock=clock)
    th.tick()
    (err,) = [s for s in th.samples() if s.source == "drain"]
    assert err.error == "RuntimeError: buffer broke"


def test_buffered_samples_are_sorted_in_and_windows_are_half_open(clock):
    sampler = Scripted(clock)
    th = SamplerThread(sampler, period_s=0.010, drain_period_s=0.1, clock=clock)
    start = th.mark()
    assert start == clock.now
    while clock.now < start + 95 * MS:
        clock.advance(round(th.tick() * 1e9))
    # The driver's readings from the past arrive with the next drain.
    sampler.pending = [Sample(t_ns=start + 15 * MS, source="power_buffer", power_w=1.0),
                       Sample(t_ns=start + 35 * MS, source="power_buffer", power_w=2.0)]
    clock.advance(round(th.tick() * 1e9))
    th.tick()
    ts = [s.t_ns for s in th.samples()]
    assert ts == sorted(ts)
    window = th.samples_between(start + 10 * MS, start + 40 * MS)
    assert [((s.t_ns - start) // MS, s.source) for s in window] == [
        (10, "poll"), (15, "power_buffer"), (20, "poll"), (30, "poll"), (35, "power_buffer")]
    assert th.samples_between(start + 40 * MS, start + 40 * MS) == []


def test_thread_with_fake_clock_and_sleep(clock):
    sampler = Scripted(clock)
    end = clock.now + 500 * MS
    reached = threading.Event()

    def sleep(seconds: float) -> None:
        if clock.now >= end:
            reached.set()
            time.sleep(0.001)  # fake time stands still until stop(); yield the CPU meanwhile
        else:
            clock.advance(round(seconds * 1e9))

    start = clock.now
    with SamplerThread(sampler, period_s=0.010, drain_period_s=0.1, clock=clock, sleep=sleep) as th:
        assert reached.wait(timeout=30)
    drains_at_stop = sampler.drains
    th.stop()  # idempotent
    assert poll_times(th, start) == list(range(0, 501, 10))
    assert drains_at_stop == 7  # 0..500 ms every 100 ms, plus the final drain at stop
    assert sampler.drains == drains_at_stop
    with pytest.raises(RuntimeError, match="twice"):
        th.start()


def test_real_thread_takes_at_least_one_reading_even_if_stopped_at_once(clock):
    th = SamplerThread(Scripted(clock), clock=clock)
    th.start()
    th.stop()
    assert [s.source for s in th.samples()] == ["poll"]


def test_stop_before_start_and_bad_periods(clock):
    SamplerThread(Scripted(clock)).stop()
    with pytest.raises(ConfigError):
        SamplerThread(Scripted(clock), period_s=0)
    with pytest.raises(ConfigError):
        SamplerThread(Scripted(clock), drain_period_s=-1)


def test_last_poll_is_none_before_any_reading(clock):
    assert SamplerThread(Scripted(clock), clock=clock).last_poll() is None
