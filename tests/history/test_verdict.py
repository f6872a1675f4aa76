"""The verdict against history: prediction intervals, the floor with few nights, and cycles vs clock vs control."""

from __future__ import annotations

import math
import random

import pytest

from harness.history import MIN_NIGHTS, judge_series, predict


def test_prediction_interval_is_the_t_interval_of_a_new_night():
    nights = [100.0, 101.0, 99.0, 100.5, 99.5]
    p = predict(nights, 100.0, level=0.95)
    logs = [math.log(v) for v in nights]
    m = sum(logs) / 5
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / 4)
    assert math.log(p.high) == pytest.approx(2.7764451 * sd * math.sqrt(1 + 1 / 5), rel=1e-6)
    assert p.centre == pytest.approx(math.exp(m)) and p.outside == "" and p.nights == 5
    assert predict(nights, 104.0, level=0.95).outside == "above" and predict(nights, 96.0, level=0.95).outside == "below"
    assert predict(nights[:MIN_NIGHTS - 1], 100.0) is None


def test_the_interval_holds_its_level_on_normal_nights():
    rng = random.Random(3)
    outside = total = 0
    for _ in range(3000):
        nights = [math.exp(rng.gauss(0, 0.002)) for _ in range(10)]
        outside += bool(predict(nights, math.exp(rng.gauss(0, 0.002)), level=0.95).outside)
        total += 1
    assert 0.04 < outside / total < 0.06


def _row(time, cycles=None, clock=None, **kw):
    return {"status": "timed", "time_ns": time, "cycles_per_launch": cycles, "clock_mhz": clock,
            "cycles_clock": "inband" if cycles else None, **kw}


def _nights(n, *, time=1e6, cycles=1.5e6, clock=1500.0, sd=0.001, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        c, k = cycles * math.exp(rng.gauss(0, sd)), clock * math.exp(rng.gauss(0, sd))
        out.append(_row(c / k * 1e3, c, k))
    return out


def test_slower_cycles_fail_as_the_code_and_a_clock_drop_is_the_machine():
    nights = _nights(10)
    code = judge_series("k", role="kernel", tonight=_row(1.03e6, 1.545e6, 1500.0), comparable=nights, threshold=0.02)
    assert code.verdict == "slower" and code.cycles.outside == "above" and "cycles (the code)" in code.sentence
    clock = judge_series("k", role="kernel", tonight=_row(1.03e6, 1.5e6, 1456.0), comparable=nights, threshold=0.02)
    assert clock.verdict == "machine" and clock.cycles.outside == "" and clock.clock.outside == "below"
    assert "No control was timed" in clock.sentence
    ctl = judge_series("c", role="control", tonight=_row(1.03e6), comparable=[_row(r["time_ns"]) for r in nights],
                       threshold=0.02)
    shared = judge_series("k", role="kernel", tonight=_row(1.03e6, 1.5e6, 1456.0), comparable=nights, threshold=0.02,
                          control=ctl)
    assert "The control (c) moved too" in shared.sentence
    small = judge_series("k", role="kernel", tonight=_row(1.01e6, 1.515e6, 1500.0), comparable=nights, threshold=0.02)
    assert small.verdict == "same"  # outside the interval, but within the threshold


def test_without_a_clock_the_control_tells_the_machine_from_the_code():
    nights = [_row(1e6 * (1 + 0.001 * (i % 3 - 1))) for i in range(10)]
    ctl_moved = judge_series("c", role="control", tonight=_row(1.05e6), comparable=nights, threshold=0.02)
    ctl_still = judge_series("c", role="control", tonight=_row(1.0e6), comparable=nights, threshold=0.02)
    assert judge_series("k", role="kernel", tonight=_row(1.05e6), comparable=nights, threshold=0.02,
                        control=ctl_moved).verdict == "machine"
    lone = judge_series("k", role="kernel", tonight=_row(1.05e6), comparable=nights, threshold=0.02, control=ctl_still)
    assert lone.verdict == "slower" and "did not move" in lone.sentence


def test_few_nights_judge_at_a_wider_floor_and_too_few_or_an_event_do_not_judge():
    many = judge_series("k", role="kernel", tonight=_row(1e6, 1.5e6, 1500.0), comparable=_nights(10), threshold=0.02)
    few = judge_series("k", role="kernel", tonight=_row(1e6, 1.5e6, 1500.0), comparable=_nights(4), threshold=0.02)
    assert few.floor > many.floor and "the smallest change this can call is" in few.sentence
    assert "against the last 10 comparable nights" in many.sentence
    two = judge_series("k", role="kernel", tonight=_row(1e6), comparable=_nights(2), threshold=0.02)
    assert two.verdict == "too few nights" and two.time is None
    event = judge_series("k", role="kernel", tonight=_row(1e6), comparable=[], threshold=0.02,
                         event="machine: driver 580 -> 590")
    assert event.verdict == "event" and "an event, not a regression: machine: driver 580 -> 590" in event.sentence
    broken = judge_series("k", role="kernel", tonight={"status": "not timed (error)"}, comparable=_nights(5),
                          threshold=0.02)
    assert broken.verdict == "not timed"
