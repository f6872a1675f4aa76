"""time = cycles / clock over repeats: the identity, the t interval and the verdict rule, on synthetic repeats."""

import math
import random
import statistics

import pytest

from harness.analysis import Plan, VerdictRule, decompose, geomean, limiter_label


def repeats(center: float, spread: float, n: int = 3, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_factors_multiply_back_to_the_time_ratio_for_any_repeats():
    for seed in range(20):
        rng = random.Random(seed)
        ta, tb = repeats(3.9, 0.01, seed=seed), repeats(4.0, 0.01, n=rng.randint(1, 5), seed=seed + 100)
        ca, cb = repeats(1500, 0.01, seed=seed + 1), repeats(1480, 0.01, n=len(tb), seed=seed + 2)
        d = decompose(time_a=ta, time_b=tb, clock_a=ca, clock_b=cb)
        assert d.time.value == pytest.approx(d.cycles.value * d.clock.value, rel=1e-12)
        # Each factor is the ratio of geometric means of its own quantity.
        assert d.time.value == pytest.approx(geomean(tb) / geomean(ta), rel=1e-12)
        assert d.clock.value == pytest.approx(geomean(ca) / geomean(cb), rel=1e-12)
        cyc_a = [t * c for t, c in zip(ta, ca)]
        cyc_b = [t * c for t, c in zip(tb, cb)]
        assert d.cycles.value == pytest.approx(geomean(cyc_b) / geomean(cyc_a), rel=1e-12)


def test_the_interval_is_a_pure_function_and_brackets_the_estimate():
    import math

    ta, tb = repeats(3.9, 0.004, n=5), repeats(3.95, 0.004, n=5, seed=7)
    one, two = decompose(time_a=ta, time_b=tb), decompose(time_a=ta, time_b=tb)
    assert (one.time.low, one.time.high) == (two.time.low, two.time.high)
    assert one.time.low <= one.time.value <= one.time.high
    assert one.cycles is None and one.clock is None  # no clocks given: time only
    # Welch by hand: se^2 = s_a^2/n_a + s_b^2/n_b on the logs, t at the Welch-Satterthwaite df.
    from statistics import variance

    from harness.analysis import t_quantile

    la, lb = [math.log(x) for x in ta], [math.log(x) for x in tb]
    va, vb = variance(la) / 5, variance(lb) / 5
    df = (va + vb) ** 2 / (va ** 2 / 4 + vb ** 2 / 4)
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    assert one.time.df == pytest.approx(df) and one.time.method == "Welch t"
    assert math.log(one.time.high / one.time.value) == pytest.approx(half, rel=1e-9)


@pytest.mark.parametrize("b_over_a, spread, verdict", [
    (1.02, 0.001, "slower"),   # interval excludes 1, change 2 % > 0.5 %
    (0.98, 0.001, "faster"),
    (1.003, 0.0002, "slower, within threshold"),  # a real 0.3 % change, its equivalence interval inside 0.5 %
    (0.997, 0.0002, "faster, within threshold"),
    (1.0, 0.0002, "same"),     # the interval holds 1 and the equivalence interval lies inside +-0.5 %
    (1.01, 0.05, "unresolved"),  # 1 % slower on average but repeats scatter by 5 %: wider than the threshold
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
    text = VerdictRule().describe()
    assert "excludes 1" in text and "0.5 % (default)" in text and "unresolved" in text
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
    assert VerdictRule(min_repeats=2, threshold=0.0).min_repeats == 2  # the smallest valid rule
    for bad in (dict(threshold=-1e-9), dict(min_repeats=1)):
        with pytest.raises(ValueError, match=r"^threshold >= 0 and min_repeats >= 2 are required$"):
            VerdictRule(**bad)


def test_rule_description_gives_every_parameter():
    rule = VerdictRule(level=0.9, min_repeats=3).with_threshold(0.01, source="--fail-on-slowdown 1%")
    text = rule.describe()
    assert text.startswith("slower / faster: the 90% interval of time B/A excludes 1 and the estimate is beyond 1 % "
                           "(--fail-on-slowdown 1%); same: the 80% equivalence interval lies inside +-that threshold")
    assert "unresolved otherwise (a gate does not pass it)" in text
    assert text.endswith("no verdict with fewer than 3 repeats a side or 2 degrees of freedom")
    assert VerdictRule().with_threshold(None, source="x") == VerdictRule()


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


def test_a_change_exactly_at_the_threshold_is_not_a_slowdown_beyond_it():
    ta, tb = [1.0, 1.0001, 0.9999], [1.01, 1.0101, 1.0099]
    change = decompose(time_a=ta, time_b=tb).time.change
    # Real (the interval excludes 1) but not beyond the threshold, nor shown within it: its size is unresolved.
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(threshold=change)).verdict == "unresolved"
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(threshold=math.nextafter(change, 0))).verdict == "slower"


def test_unresolved_turns_same_exactly_where_the_equivalence_interval_fits():
    ta, tb = [1.0, 1.01, 0.99], [1.0, 1.012, 0.992]
    r = decompose(time_a=ta, time_b=tb).time
    assert not r.excludes_one() and r.eq_low < 1 < r.eq_high and r.low < r.eq_low and r.eq_high < r.high
    edge = max(r.eq_high - 1, 1 - r.eq_low)  # the smallest threshold whose +-band holds the equivalence interval
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(threshold=edge)).verdict == "unresolved"
    assert decompose(time_a=ta, time_b=tb, rule=VerdictRule(threshold=edge * (1 + 1e-9))).verdict == "same"


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


def test_the_interval_has_equal_tails_in_log_time():
    r = decompose(time_a=[1.0, 1.01, 0.99, 1.0], time_b=[1.1, 1.12, 1.09, 1.1]).time
    assert math.log(r.value / r.low) == pytest.approx(math.log(r.high / r.value), rel=1e-12)
    assert r.resolution == pytest.approx(r.high / r.value - 1, rel=1e-12)


INTERLEAVED = dict(time_a=[1.00, 1.02, 0.99, 1.01, 1.00, 1.03], time_b=[1.10, 1.13, 1.08, 1.12, 1.09, 1.14],
                   clock_a=[1900, 1890, 1910, 1905, 1895, 1900], clock_b=[1850, 1840, 1860, 1852, 1845, 1849])


def _log_diffs(num, den):
    return [math.log(x) - math.log(y) for x, y in zip(num, den)]


def test_interleaved_cycles_and_clock_are_paired_ratios_with_the_deciding_looks_critical_value():
    """Interleaved repeats (commits, nightly): cycles B/A and clock A/B are means of per-pair log ratios, with the
    interval of the look that decided time, so the three share one critical value and cycles x clock = time."""
    d = decompose(**INTERLEAVED, rule=VerdictRule(), paired=True)
    ta, tb, ca, cb = (INTERLEAVED[k] for k in ("time_a", "time_b", "clock_a", "clock_b"))
    cyc = _log_diffs([t * c for t, c in zip(tb, cb)], [t * c for t, c in zip(ta, ca)])
    clk = _log_diffs(ca, cb)
    assert d.verdict == "slower" and d.time.method == "paired t"
    assert d.cycles.value == pytest.approx(math.exp(sum(cyc) / 6), rel=1e-12)
    assert d.clock.value == pytest.approx(math.exp(sum(clk) / 6), rel=1e-12)
    assert d.time.value == pytest.approx(d.cycles.value * d.clock.value, rel=1e-12)
    crit = math.log(d.time.high / d.time.value) / (statistics.stdev(_log_diffs(tb, ta)) / math.sqrt(6))
    for r, diffs in ((d.cycles, cyc), (d.clock, clk)):
        se = statistics.stdev(diffs) / math.sqrt(6)
        assert r.low < r.eq_low < r.value < r.eq_high < r.high
        assert math.log(r.high / r.value) == pytest.approx(crit * se, rel=1e-9)
        assert math.log(r.value / r.low) == pytest.approx(crit * se, rel=1e-9)
        assert r.eq_low * r.eq_high == pytest.approx(r.value ** 2, rel=1e-12)
        assert r.df == 5.0 and r.method == "paired t" and r.estimator == "ratio of geometric means"


def test_two_interleaved_pairs_get_intervals_but_no_verdict():
    """Two pairs: one degree of freedom. The factors still get their intervals (what a reader sees), and the verdict
    is `too few repeats`, never the sequential rule's own word."""
    two = {k: v[:2] for k, v in INTERLEAVED.items()}
    for rule in (VerdictRule(), VerdictRule().with_threshold(0.02, source="--fail-on-slowdown 2%")):
        d = decompose(**two, rule=rule, paired=True)
        assert d.verdict == "too few repeats"
        for r in (d.time, d.cycles, d.clock):
            assert r.df == 1.0 and r.low is not None and r.low < r.value < r.high


def test_when_the_second_look_decides_the_factors_are_means_over_its_kept_pairs():
    """A pilot of 6 that cannot decide, looked at again at 12 pairs: time, cycles and clock are then the skipped
    mean's estimates over the pairs it kept, said so, with one degree of freedom per kept pair but one."""
    rng = random.Random(3)
    ta = [1 + rng.gauss(0, 0.01) for _ in range(12)]
    tb = [t * (1.004 + rng.gauss(0, 0.01)) for t in ta]
    ca, cb = [1900 + rng.gauss(0, 5) for _ in range(12)], [1890 + rng.gauss(0, 5) for _ in range(12)]
    d = decompose(time_a=ta, time_b=tb, clock_a=ca, clock_b=cb, paired=True, plan=Plan(pilot=6, total=12),
                  rule=VerdictRule().with_threshold(0.003, source="--fail-on-slowdown 0.3%"))
    assert d.time.estimator == "skipped mean of paired log ratios" and d.verdict == "unresolved"
    for r in (d.cycles, d.clock):
        assert r.estimator == "mean of paired log ratios over the kept pairs" and r.df == 11.0
    assert d.time.value == pytest.approx(d.cycles.value * d.clock.value, rel=1e-12)


def test_interleaved_without_a_verdict_to_draw_say_so_whatever_the_sequential_rule_found():
    """The rule's own refusals stand over the sequential decision's word: no verdict asked for (CPU timings without
    a threshold) is `not judged`, fewer pairs than the rule's minimum is `too few repeats`; without clocks there
    is no cycles or clock factor at all."""
    three = {k: v[:3] for k, v in INTERLEAVED.items()}
    assert decompose(**three, rule=VerdictRule(), paired=True).verdict == "slower"
    assert decompose(**three, rule=VerdictRule(judged=False), paired=True).verdict == "not judged"
    assert decompose(**three, rule=VerdictRule(min_repeats=4), paired=True).verdict == "too few repeats"
    d = decompose(time_a=three["time_a"], time_b=three["time_b"], rule=VerdictRule(), paired=True)
    assert d.cycles is None and d.clock is None and d.verdict == "slower"
