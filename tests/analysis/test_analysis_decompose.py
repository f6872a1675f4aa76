"""time = cycles / clock over repeats: the identity, the bootstrap and the verdict rule, on synthetic repeats."""

import math
import random

import pytest

from harness.analysis import VerdictRule, decompose, geomean, limiter_label


def repeats(center: float, spread: float, n: int = 3, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_factors_multiply_back_to_the_time_ratio_for_every_resample_seed():
    for seed in range(20):
        rng = random.Random(seed)
        ta, tb = repeats(3.9, 0.01, seed=seed), repeats(4.0, 0.01, n=rng.randint(1, 5), seed=seed + 100)
        ca, cb = repeats(1500, 0.01, seed=seed + 1), repeats(1480, 0.01, n=len(tb), seed=seed + 2)
        d = decompose(time_a=ta, time_b=tb, clock_a=ca, clock_b=cb, rule=VerdictRule(seed=seed))
        assert d.time.value == pytest.approx(d.cycles.value * d.clock.value, rel=1e-12)
        # Each factor is the ratio of geometric means of its own quantity.
        assert d.time.value == pytest.approx(geomean(tb) / geomean(ta), rel=1e-12)
        assert d.clock.value == pytest.approx(geomean(ca) / geomean(cb), rel=1e-12)
        cyc_a = [t * c for t, c in zip(ta, ca)]
        cyc_b = [t * c for t, c in zip(tb, cb)]
        assert d.cycles.value == pytest.approx(geomean(cyc_b) / geomean(cyc_a), rel=1e-12)


def test_bootstrap_is_deterministic_for_a_seed_and_brackets_the_estimate():
    ta, tb = repeats(3.9, 0.004, n=5), repeats(3.95, 0.004, n=5, seed=7)
    one = decompose(time_a=ta, time_b=tb, rule=VerdictRule(seed=3))
    two = decompose(time_a=ta, time_b=tb, rule=VerdictRule(seed=3))
    other = decompose(time_a=ta, time_b=tb, rule=VerdictRule(seed=4))
    assert (one.time.low, one.time.high) == (two.time.low, two.time.high)
    assert (one.time.low, one.time.high) != (other.time.low, other.time.high)
    assert one.time.low <= one.time.value <= one.time.high
    assert one.cycles is None and one.clock is None  # no clocks given: time only


@pytest.mark.parametrize("b_over_a, spread, verdict", [
    (1.02, 0.001, "slower"),   # interval excludes 1, change 2 % > 0.5 %
    (0.98, 0.001, "faster"),
    (1.003, 0.0002, "same"),   # interval excludes 1 but |change| 0.3 % is under the 0.5 % threshold
    (1.01, 0.05, "same"),      # 1 % slower on average but repeats scatter by 5 %: interval holds 1
])
def test_verdict_rule(b_over_a, spread, verdict):
    ta = repeats(4.0, spread, n=4, seed=1)
    tb = [t * b_over_a for t in repeats(4.0, spread, n=4, seed=2)]
    assert decompose(time_a=ta, time_b=tb).verdict == verdict


def test_no_verdict_from_a_single_repeat():
    d = decompose(time_a=[4.0], time_b=[4.4])
    assert d.verdict == "too few repeats" and d.time.low is None
    assert d.time.value == pytest.approx(1.1)


def test_rule_describes_itself_and_rejects_nonsense():
    assert "excludes 1" in VerdictRule().describe() and "0.5%" in VerdictRule().describe()
    with pytest.raises(ValueError):
        VerdictRule(level=1.5)
    with pytest.raises(ValueError):
        decompose(time_a=[1.0, -1.0], time_b=[1.0])
    with pytest.raises(ValueError, match="^one clock per repeat is needed on each side$"):
        decompose(time_a=[1.0, 1.0], time_b=[1.0], clock_a=[1.0], clock_b=[1.0])


def test_limiter_label():
    assert limiter_label([{"power_limited_frac": 0.99, "thermal_limited_frac": 0.0}]) == "power cap 99%"
    assert limiter_label([{"power_limited_frac": 0.0, "thermal_limited_frac": 0.0, "sm_clock_mhz": 1980.0}],
                         max_clock_mhz=1980.0) == "none (NVML at max clock)"
    assert limiter_label([{"reason_names": "hw_slowdown:0.80|gpu_idle:0.9"}]) == "hw slowdown"
    assert limiter_label([{}]) == "none"
    assert math.isfinite(geomean([1.0, 4.0])) and geomean([1.0, 4.0]) == pytest.approx(2.0)


# Edges of the rule, the interval and the limiter label: each at the boundary and one step past it.

def test_rule_bounds_each_refused_alone():
    assert VerdictRule(min_repeats=1, resamples=1, min_change=0.0).min_repeats == 1  # the smallest valid rule
    for bad in (dict(min_change=-1e-9), dict(resamples=0), dict(min_repeats=0)):
        with pytest.raises(ValueError, match=r"^min_change >= 0, resamples >= 1 and min_repeats >= 1 are required$"):
            VerdictRule(**bad)


def test_rule_description_gives_every_parameter():
    text = VerdictRule(level=0.9, resamples=500, seed=7, min_change=0.01, min_repeats=3).describe()
    assert text.startswith("slower / faster: the 90% bootstrap interval of time B/A (over repeats, 500 resamples, ")
    assert "seed 7) excludes 1 and |B/A - 1| > 1.0%; same otherwise; " in text
    assert text.endswith("no verdict with fewer than 3 repeats a side")


def test_an_interval_excludes_one_only_with_both_ends_strictly_on_one_side():
    from harness.analysis import Ratio

    assert Ratio(value=1.1, low=1.0 + 1e-12, high=1.2).excludes_one()
    assert Ratio(value=0.9, low=0.8, high=1.0 - 1e-12).excludes_one()
    assert not Ratio(value=1.1, low=1.0, high=1.2).excludes_one()  # touching 1 is not excluding it
    assert not Ratio(value=0.9, low=0.8, high=1.0).excludes_one()
    assert not Ratio(value=1.2, low=1.1, high=None).excludes_one() and not Ratio(value=0.8, low=None, high=0.9).excludes_one()
    assert Ratio(value=1.25).change == pytest.approx(0.25)


def test_empty_zero_or_missing_times_are_refused():
    with pytest.raises(ValueError, match="^decompose needs at least one repeat on each side$"):
        decompose(time_a=[], time_b=[1.0])
    with pytest.raises(ValueError, match="^decompose needs at least one repeat on each side$"):
        decompose(time_a=[1.0], time_b=[])
    for bad in ([1.0, 0.0], [None, 1.0]):
        with pytest.raises(ValueError, match="^times must be positive numbers$"):
            decompose(time_a=[1.0, 1.0], time_b=bad)


def test_a_clock_list_of_the_wrong_length_on_b_is_refused():
    with pytest.raises(ValueError, match="^one clock per repeat is needed on each side$"):
        decompose(time_a=[1.0, 1.0], time_b=[1.0, 1.0], clock_a=[1.0, 1.0], clock_b=[1.0])


def test_a_missing_or_zero_clock_gives_no_cycles_or_clock_factor():
    for clocks in ([1500.0, None], [1500.0, 0.0]):
        d = decompose(time_a=[1.0, 1.1], time_b=[1.2, 1.3], clock_a=[1500.0, 1500.0], clock_b=clocks)
        assert d.cycles is None and d.clock is None and d.time.value == pytest.approx(geomean([1.2, 1.3]) / geomean([1.0, 1.1]))


def test_resamples_draw_the_first_repeat_of_each_side_too():
    # Only the first repeat differs: a resample that never drew index 0 would give a point at 1.
    d = decompose(time_a=[1.0] * 4, time_b=[2.0, 1.0, 1.0, 1.0])
    assert d.time.low == pytest.approx(1.0) and d.time.high > 1.2
    e = decompose(time_a=[2.0, 1.0, 1.0, 1.0], time_b=[1.0] * 4)
    assert e.time.high == pytest.approx(1.0) and e.time.low < 0.85


def test_a_change_exactly_at_the_minimum_is_not_a_verdict():
    ta, tb = [1.0, 1.0001, 0.9999], [1.01, 1.0101, 1.0099]
    change = decompose(time_a=ta, time_b=tb).time.change
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(min_change=change)).verdict == "same"
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(min_change=math.nextafter(change, 0))).verdict == "slower"


def test_limiter_label_at_its_thresholds():
    assert limiter_label([{"power_limited_frac": 0.05, "thermal_limited_frac": 0.05}]) == "power cap 5%, thermal 5%"
    assert limiter_label([{"power_limited_frac": 0.0499, "thermal_limited_frac": 0.0499}]) == "none"
    assert limiter_label([{"thermal_limited_frac": 0.4}]) == "thermal 40%"
    # A reason by name counts when it is active in at least half of the samples of some repeat.
    assert limiter_label([{"reason_names": "hw_slowdown:0.50"}]) == "hw slowdown"
    assert limiter_label([{"reason_names": "hw_slowdown:0.49"}, {"reason_names": "hw_slowdown:0.2"}]) == "none"
    assert limiter_label([{"reason_names": "sw_thermal:0.6|hw_slowdown:0.9"}]) == "hw slowdown, sw thermal"


def test_limiter_names_a_power_or_thermal_reason_only_without_its_counter():
    rows = [{"reason_names": "sw_power_cap:0.9|sw_thermal:0.7"}]
    assert limiter_label(rows) == "sw power cap, sw thermal"
    counted = [{**rows[0], "power_limited_frac": 0.8, "thermal_limited_frac": 0.6}]
    assert limiter_label(counted) == "power cap 80%, thermal 60%"  # not named twice
    assert limiter_label([{**rows[0], "power_limited_frac": 0.0}]) == "sw thermal"


def test_at_max_clock_within_one_mhz():
    row = {"power_limited_frac": 0.0, "sm_clock_mhz": 1979.0}
    assert limiter_label([row], max_clock_mhz=1980.0) == "none (NVML at max clock)"
    assert limiter_label([{**row, "sm_clock_mhz": 1978.5}], max_clock_mhz=1980.0) == "none"
    assert limiter_label([row]) == "none"  # no maximum known: nothing said about it


def test_the_interval_has_equal_tails():
    # B's logs are symmetric about 0 (pairs +-d) and A is constant, so the bootstrap distribution of B/A is
    # symmetric in log: an equal-tailed interval sits as far below the estimate as above it (a 50 % one
    # shows a misplaced tail most: its quantiles are where the distribution is dense).
    import numpy as np

    d = np.random.default_rng(2).uniform(0.005, 0.03, 15)
    tb = list(np.exp(np.concatenate([d, -d])))
    r = decompose(time_a=[1.0] * 4, time_b=tb, rule=VerdictRule(level=0.5, resamples=4000)).time
    below, above = math.log(r.value / r.low), math.log(r.high / r.value)
    assert r.value == pytest.approx(1.0) and 0.85 < below / above < 1.15
