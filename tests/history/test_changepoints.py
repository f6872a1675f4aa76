"""Change points of one series: a step is found where it is, with the nights it may be at; noise, quantized
clocks and too-short series give none."""

from __future__ import annotations

import math
import random

import pytest

from harness.history import find_steps, noise_sigma


def _series(n, sd, steps=(), seed=0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        level = math.prod(f for at, f in steps if i >= at)
        out.append(1000.0 * level * math.exp(rng.gauss(0, sd)))
    return out


def test_a_step_is_found_at_its_night_with_its_size_and_location_interval():
    (st,) = find_steps(_series(80, 0.002, steps=((50, 1.02),)))
    assert abs(st.at - 50) <= 1 and st.lo <= 50 <= st.hi + 1
    assert st.ratio == pytest.approx(st.after / st.before, rel=1e-12)
    assert 1.015 < st.ratio < 1.025 and st.z > 5


def test_noise_alone_and_short_series_give_none():
    assert all(find_steps(_series(120, 0.002, seed=s)) == [] for s in range(20))
    assert find_steps([1.0, 1.1, 1.2]) == []


def test_a_quantized_clock_is_not_read_as_noise_free():
    # The H200's in-band clock reads in 15 MHz steps: most nights equal, a few a step up or down.
    rng = random.Random(1)
    clocks = [rng.choice((1500.0, 1515.0, 1515.0, 1515.0, 1515.0, 1530.0)) for _ in range(120)]
    assert noise_sigma([math.log(c) for c in clocks]) > 0.003
    assert find_steps(clocks) == []


def test_two_steps_in_opposite_directions():
    steps = find_steps(_series(150, 0.001, steps=((40, 1.01), (100, 1 / 1.01))))
    assert [abs(s.at - at) <= 1 for s, at in zip(steps, (40, 100))] == [True, True]
    assert steps[0].ratio > 1 > steps[1].ratio


def test_without_ruptures_short_series_pass_and_longer_ones_say_what_to_install(monkeypatch):
    import sys

    from harness.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ruptures", None)  # as on a GPU image without it
    assert find_steps([1.0, 1.1, 1.2]) == []  # three nights: nothing to find, nothing imported
    with pytest.raises(ConfigError, match="pip install 'ruptures>=1.1.9'"):
        find_steps(_series(10, 0.001))
