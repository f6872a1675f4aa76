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
    with pytest.raises(ValueError, match="one clock per repeat"):
        decompose(time_a=[1.0, 1.0], time_b=[1.0], clock_a=[1.0], clock_b=[1.0])


def test_limiter_label():
    assert limiter_label([{"power_limited_frac": 0.99, "thermal_limited_frac": 0.0}]) == "power cap 99%"
    assert limiter_label([{"power_limited_frac": 0.0, "thermal_limited_frac": 0.0, "sm_clock_mhz": 1980.0}],
                         max_clock_mhz=1980.0) == "none (NVML at max clock)"
    assert limiter_label([{"reason_names": "hw_slowdown:0.80|gpu_idle:0.9"}]) == "hw slowdown"
    assert limiter_label([{}]) == "none"
    assert math.isfinite(geomean([1.0, 4.0])) and geomean([1.0, 4.0]) == pytest.approx(2.0)
