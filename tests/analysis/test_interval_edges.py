"""The interval procedure's edges, each at its boundary (mutation survivors of harness/analysis/_interval.py)."""

from __future__ import annotations

import math
from statistics import stdev

import numpy as np
import pytest

from harness.analysis import (
    BETWEEN_RUNS_CV,
    Ratio,
    VerdictRule,
    classify,
    judge,
    percent,
    ratio_interval,
    stein_total,
    t_quantile,
)
from harness.analysis._interval import between_runs_floor, ratio_from_look, welch
from harness.analysis._sequential import Plan, paired_look


def test_the_between_run_cv_is_the_rules_or_the_device_kinds_default():
    assert BETWEEN_RUNS_CV == {"gpu": 0.005, "cpu": 0.05}
    assert VerdictRule().between_runs("cuda") == (0.005, "default for a GPU")
    assert VerdictRule().between_runs(None) == (0.005, "default for a GPU")
    assert VerdictRule().between_runs("cpu") == (0.05, "default for a CPU")
    given = VerdictRule(between_runs_cv=0.0, between_runs_source="--between-runs-cv 0%")
    assert given.between_runs("cpu") == (0.0, "--between-runs-cv 0%")
    with pytest.raises(ValueError, match="^between_runs_cv must be >= 0$"):
        VerdictRule(between_runs_cv=-0.001)


def test_the_floor_of_separate_runs_is_the_equivalence_half_width_of_the_between_run_variance():
    assert between_runs_floor(0.0) == 0.0
    assert between_runs_floor(0.005) == pytest.approx(math.expm1(1.6448536 * math.sqrt(2) * math.log1p(0.005)))
    assert 0.0116 < between_runs_floor(0.005) < 0.0118
    assert between_runs_floor(0.005, level=0.99) > between_runs_floor(0.005)


def test_a_one_look_paired_interval_is_t_times_the_spread_of_the_differences():
    la = [0.0, 0.001, -0.001, 0.0005]
    lb = [0.01, 0.0102, 0.0091, 0.0107]
    d = [b - a for a, b in zip(la, lb)]
    r = ratio_interval(la, lb, paired=True)
    half = t_quantile(0.975, 3) * stdev(d) / math.sqrt(4)
    assert r.method == "paired t" and r.df == 3.0
    assert math.log(r.value) == pytest.approx(sum(d) / 4, rel=1e-12)
    assert math.log(r.high / r.value) == pytest.approx(half, rel=1e-9)
    assert math.log(r.eq_high / r.value) == pytest.approx(t_quantile(0.95, 3) * stdev(d) / 2, rel=1e-9)


def test_interval_inputs_refused_by_what_is_wrong():
    with pytest.raises(ValueError, match="^an interval needs at least one repeat on each side$"):
        ratio_interval([], [0.0])
    with pytest.raises(ValueError, match="^paired repeats need as many on each side, got 2 and 3$"):
        ratio_interval([0.0, 0.1], [0.0, 0.1, 0.2], paired=True)
    with pytest.raises(ValueError, match=r"^a pilot of 1 repeats needs 2 <= pilot <= 3 \(the repeats there are\)$"):
        ratio_interval([0.0, 0.1, 0.2], [0.0, 0.1, 0.2], pilot_a=1)
    with pytest.raises(ValueError, match="needs 2 <= pilot <= 3"):
        ratio_interval([0.0, 0.1, 0.2], [0.0, 0.1, 0.2], pilot_b=4)
    assert ratio_interval([0.0], [0.1], paired=True).low is None  # one pair: the value alone
    assert ratio_interval([0.0], [0.1, 0.2]).low is None


def test_an_interval_is_usable_up_to_a_factor_of_2_each_way_unless_it_excludes_1():
    just = Ratio(value=1.0, low=1 / 1.999, high=1.999)
    assert just.resolution == pytest.approx(0.999) and just.usable
    assert not Ratio(value=1.0, low=0.5, high=2.0).usable  # half-width exactly 100 %
    assert Ratio(value=4.0, low=1.5, high=10.0).usable  # wide, but it excludes 1: it says slower
    assert not Ratio(value=1.0).usable and Ratio(value=1.0).resolution is None
    assert not Ratio(value=1.0, low=0.0001, high=math.inf).usable
    wide = Ratio(value=1.0, low=0.5, high=2.0, method="paired t", df=4.0, level=0.95)
    assert judge(wide, VerdictRule(threshold=2.0), n_a=5, n_b=5) == "too few repeats"


def test_percent_writes_thresholds_and_widths_one_way():
    assert percent(None) == "-"
    assert (percent(0.003), percent(0.0058), percent(0.055), percent(1.5), percent(39.0)) == (
        "0.3", "0.58", "5.5", "150", "3900")
    # Two significant digits up to 99.5 %, whole percents from there: 99.6 % was written "1e+02".
    assert (percent(0.994), percent(0.996), percent(1.0), percent(-1.0)) == ("99", "100", "100", "-100")


def test_a_pilot_of_every_repeat_is_the_one_stage_interval_and_more_is_refused():
    # The two-stage rule's pilot may be all the repeats a side has (nothing was added): the same interval, the
    # method said; one more than there are, or fewer than 2, is a caller's error.
    a, b = [0.0, 0.01, -0.01, 0.02], [0.05, 0.04, 0.06, 0.03]
    one, two = ratio_interval(a, b), ratio_interval(a, b, pilot_a=4, pilot_b=4)
    assert (two.low, two.high, two.df) == pytest.approx((one.low, one.high, one.df))
    assert two.method == "Welch t (two-stage)" and one.method == "Welch t"
    for bad in (5, 1):
        with pytest.raises(ValueError, match=rf"a pilot of {bad} repeats needs 2 <= pilot <= 4"):
            ratio_interval(a, b, pilot_a=bad)


def test_a_ratio_without_both_ends_has_no_resolution():
    assert Ratio(value=1.01, low=None, high=1.05).resolution is None
    assert Ratio(value=1.01, low=0.97, high=None).resolution is None
    assert Ratio(value=1.0, low=0.98, high=1.0 / 0.98).resolution == pytest.approx(1 / 0.98 - 1)


def test_stein_total_is_the_pilots_t_spread_over_the_target_squared_within_the_pilot_and_the_cap():
    pilot = [0.0, 0.01, -0.01, 0.02, -0.02]  # sd 0.0158, 4 degrees of freedom
    need = math.ceil((t_quantile(0.975, 4) * stdev(pilot) / math.log1p(0.01)) ** 2)
    assert need == 20 and stein_total(pilot, target=0.01, cap=100) == 20
    # a 90 % interval needs fewer; the cap bounds it, the pilot is the least
    assert stein_total(pilot, target=0.01, level=0.9, cap=100) == math.ceil(
        (t_quantile(0.95, 4) * stdev(pilot) / math.log1p(0.01)) ** 2) == 12
    assert stein_total(pilot, target=0.01, cap=15) == 15
    assert stein_total(pilot, target=0.5, cap=100) == 5
    assert stein_total([0.003, 0.003, 0.003], target=0.001, cap=50) == 3  # no spread: the pilot already resolves it
    two = [0.0, 0.01]  # the least pilot: 1 degree of freedom
    assert stein_total(two, target=0.01, cap=1000) == math.ceil(
        (t_quantile(0.975, 1) * stdev(two) / math.log1p(0.01)) ** 2) == 82
    with pytest.raises(ValueError, match="^a pilot needs at least two repeats$"):
        stein_total([0.0], target=0.01, cap=10)
    for bad in (0.0, -0.01, float("nan")):
        with pytest.raises(ValueError, match="^the target half-width must be > 0$"):
            stein_total(pilot, target=bad, cap=10)


def test_classify_of_many_comparisons_gives_too_few_repeats_where_judge_would():
    # `classify` (the simulations' vectorized verdicts) refuses what `judge` refuses: a non-finite bound, an interval
    # 2x wide each way that includes 1, or under MIN_DF degrees of freedom; a wide one that excludes 1 still judges.
    w = math.log(2.0)
    centre = np.array([0.0, 0.0, 0.0, 0.3, 0.0, 0.0, -0.3, 0.3])
    low = np.array([-w + 1e-6, -w, -np.inf, 0.05, -0.001, -0.001, -0.3 - 0.1, 0.1])
    high = np.array([w - 1e-6, w, w, 0.05 + 2 * w + 0.1, 0.001, 0.001, -0.3 + 0.1, np.inf])
    got = classify(centre, low, high, low / 2, high / 2, threshold=0.005, df=[5, 5, 5, 5, 2.0 - 1e-12, 1.99, 5, 5])
    assert list(got) == ["unresolved", "too few repeats", "too few repeats", "slower", "same", "too few repeats",
                         "faster", "too few repeats"]
    assert list(classify(centre[:2], low[:2], high[:2], low[:2] / 2, high[:2] / 2, threshold=0.005)) == [
        "unresolved", "too few repeats"]


def test_intervals_at_their_least_repeats_and_the_between_run_term():
    two = ratio_interval([0.0, 0.01], [0.01, 0.03], paired=True)  # two pairs: an interval of 1 degree of freedom
    assert two.low is not None and two.df == 1.0 and two.method == "paired t"
    a, b = [0.0, 0.01, 0.02], [0.1, 0.11, 0.13]
    centre, se, df, _, _ = welch(np.array(a), np.array(b), between_cv=0.05)
    within = np.var(a, ddof=1) / 3 + np.var(b, ddof=1) / 3
    assert se == pytest.approx(math.sqrt(within + 2 * math.log1p(0.05) ** 2), rel=1e-12)
    # both sides constant: the df are the smaller side's (the between-run term carries the width)
    _, se, df, _, _ = welch(np.zeros(3), np.full(4, 0.1), between_cv=0.05)
    assert df == 2.0 and se == pytest.approx(math.sqrt(2) * math.log1p(0.05))


def test_a_threshold_of_100_percent_or_more_still_judges():
    # --sustained-compare-fail=100% (the example repository's README) and above: "faster" would need B to take
    # no time at all, so only slower and same remain.
    for threshold in (1.0, 1.5):
        got = classify([0.0, math.log(3.0)], [-0.1, math.log(2.5)], [0.1, math.log(3.5)], [-0.05, math.log(2.6)],
                       [0.05, math.log(3.4)], threshold=threshold)
        assert list(got) == ["same", "slower"], threshold


def test_exactly_the_least_repeats_a_side_are_judged():
    rule = VerdictRule(threshold=0.01)
    r = ratio_interval([0.0, 0.001, -0.001], [0.2, 0.201, 0.199])
    assert judge(r, rule, n_a=rule.min_repeats, n_b=rule.min_repeats) == "slower"
    assert judge(r, rule, n_a=rule.min_repeats - 1, n_b=rule.min_repeats) == "too few repeats"


def test_a_ratio_from_the_first_look_is_the_ratio_of_geometric_means_with_nothing_dropped():
    look = paired_look([0.01, 0.012, 0.009, 0.011, 0.010], Plan(pilot=5, total=10))
    r = ratio_from_look(look, level=0.95)
    assert look.number == 1 and r.method == "paired t (look 1 of 2)"
    assert r.estimator == "ratio of geometric means" and r.dropped == 0 and r.all_pairs is None
