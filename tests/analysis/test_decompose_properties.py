"""Properties of the decomposition and its bootstrap, over generated repeats (hypothesis) and synthetic
data with a known ratio: the identity holds exactly, relabelling A/B inverts every factor, the interval
covers the true ratio about as often as its level says, and B's own repeats are what B resamples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis import VerdictRule, decompose, geomean

positive = st.floats(min_value=0.1, max_value=1e4, allow_nan=False, allow_infinity=False)
sides = st.integers(min_value=1, max_value=6).flatmap(
    lambda n: st.tuples(st.lists(positive, min_size=n, max_size=n), st.lists(positive, min_size=n, max_size=n)))
FAST = VerdictRule(resamples=200)


@settings(max_examples=40, deadline=None)
@given(a=sides, b=sides)
def test_time_is_cycles_times_clock_exactly(a, b):
    (ta, ca), (tb, cb) = a, b
    d = decompose(time_a=ta, time_b=tb, clock_a=ca, clock_b=cb, rule=FAST)
    assert d.time.value == pytest.approx(d.cycles.value * d.clock.value, rel=1e-12)
    assert d.time.value == pytest.approx(geomean(tb) / geomean(ta), rel=1e-12)
    assert d.clock.value == pytest.approx(geomean(ca) / geomean(cb), rel=1e-12)
    if d.time.low is not None:
        assert d.time.low <= d.time.high and d.clock.low <= d.clock.high and d.cycles.low <= d.cycles.high


@settings(max_examples=40, deadline=None)
@given(a=sides, b=sides)
def test_relabelling_a_and_b_inverts_every_factor_and_the_verdict(a, b):
    (ta, ca), (tb, cb) = a, b
    ab = decompose(time_a=ta, time_b=tb, clock_a=ca, clock_b=cb, rule=FAST)
    ba = decompose(time_a=tb, time_b=ta, clock_a=cb, clock_b=ca, rule=FAST)
    for x, y in ((ab.time, ba.time), (ab.cycles, ba.cycles), (ab.clock, ba.clock)):
        assert x.value * y.value == pytest.approx(1.0, rel=1e-12)
    assert (ab.verdict == "too few repeats") == (ba.verdict == "too few repeats")


def test_relabelling_with_equal_repeats_gives_reciprocal_intervals():
    # Same sizes: the resample matrices swap roles, so each resampled B/A is the inverse of an A/B one.
    rng = np.random.default_rng(5)
    ta, tb = list(1 + 0.01 * rng.standard_normal(6)), list(1.02 + 0.01 * rng.standard_normal(6))
    ab = decompose(time_a=ta, time_b=tb)
    ba = decompose(time_a=tb, time_b=ta)
    assert ab.verdict == "slower" and ba.verdict == "faster"
    assert 1 / ab.time.high == pytest.approx(ba.time.low, rel=0.01)
    assert 1 / ab.time.low == pytest.approx(ba.time.high, rel=0.01)


def test_interval_covers_a_known_ratio_at_about_its_level():
    # Log-normal repeats, 8 a side, true B/A = 1.03: the 95 % percentile interval covers 1.03 in 85-99 % of
    # 200 trials (the percentile bootstrap runs a little narrow on 8 repeats); a 50 % interval would not.
    rng = np.random.default_rng(11)
    true, hits, hits_50 = 1.03, 0, 0
    for trial in range(200):
        ta = np.exp(0.02 * rng.standard_normal(8))
        tb = true * np.exp(0.02 * rng.standard_normal(8))
        d = decompose(time_a=list(ta), time_b=list(tb), rule=VerdictRule(resamples=400, seed=trial))
        hits += d.time.low <= true <= d.time.high
        h = decompose(time_a=list(ta), time_b=list(tb), rule=VerdictRule(resamples=400, seed=trial, level=0.5))
        hits_50 += h.time.low <= true <= h.time.high
    assert 0.85 <= hits / 200 <= 0.99
    assert 0.35 <= hits_50 / 200 <= 0.65


def test_b_resamples_its_own_repeats():
    # A has 2 identical repeats; B has 5, the last twice as slow. Resampling B with A's indices (0..1) would
    # never draw it and give the interval [1, 1]; B's own indices draw it in about 2 of 3 resamples.
    d = decompose(time_a=[1.0, 1.0], time_b=[1.0, 1.0, 1.0, 1.0, 2.0], clock_a=[1.0, 1.0], clock_b=[1.0] * 4 + [0.5])
    assert d.time.low == pytest.approx(1.0) and d.time.high > 1.2
    assert d.cycles.low == pytest.approx(1.0) and d.cycles.high == pytest.approx(1.0)  # 2 x 0.5: work unchanged
    assert d.clock.low == pytest.approx(1.0) and d.clock.high > 1.2  # A over B: B's slow repeat ran at half clock
    # and A resamples its own: three distinct A repeats against one fixed B spread the interval.
    e = decompose(time_a=[1.0, 1.0, 1.0, 1.0, 2.0], time_b=[1.0, 1.0])
    assert e.time.high == pytest.approx(1.0) and e.time.low < 0.85


def test_interval_level_and_resample_count_are_the_rules():
    ta, tb = [1.0, 1.1, 0.9, 1.05], [1.1, 1.2, 1.0, 1.15]
    wide = decompose(time_a=ta, time_b=tb, rule=VerdictRule(level=0.99))
    mid = decompose(time_a=ta, time_b=tb, rule=VerdictRule(level=0.95))
    narrow = decompose(time_a=ta, time_b=tb, rule=VerdictRule(level=0.5))
    assert wide.time.low < mid.time.low < narrow.time.low < narrow.time.high < mid.time.high < wide.time.high
    boot = np.exp(np.log(tb)[np.random.default_rng(0).integers(0, 4, size=(2000, 4))].mean(axis=1))
    assert boot.size == 2000  # the rule's default: 2000 resamples with seed 0
    one = decompose(time_a=ta, time_b=tb, rule=VerdictRule(resamples=1))
    assert one.time.low == one.time.high  # a single resample: a point, not an interval


def test_min_repeats_gates_the_verdict():
    assert decompose(time_a=[1.0, 1.0], time_b=[2.0, 2.0]).verdict == "slower"
    d = decompose(time_a=[1.0, 1.0], time_b=[2.0, 2.0], rule=VerdictRule(min_repeats=3))
    assert d.verdict == "too few repeats" and d.time.low is None and d.time.high is None
    assert decompose(time_a=[1.0, 1.0, 1.0], time_b=[2.0, 2.0], rule=VerdictRule(min_repeats=2)).verdict == "slower"


def test_rule_ratio_and_decomposition_are_frozen_keyword_only_values():
    import dataclasses

    from harness.analysis import Decomposition, Ratio

    d = decompose(time_a=[1.0, 1.1], time_b=[1.2, 1.3])
    for value in (VerdictRule(), d.time, d):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)
    with pytest.raises(TypeError):
        VerdictRule(0.9)
    with pytest.raises(TypeError):
        Ratio(1.0)
    with pytest.raises(TypeError):
        Decomposition(d.time, None, None, "same")
