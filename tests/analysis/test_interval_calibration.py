"""Issue 30, acceptance 1: the verdict procedure holds its stated level, driven by simulated A/A data.

`harness.analysis.simulate_verdict_shares` draws repeats of A and B from one distribution (log-normal, the
coefficient of variation of each cell), runs them through `harness.analysis.decompose` and counts verdicts. At the
95 % level a false `slower` or `faster` (the interval alone, threshold 0) must stay at or below 6 % in every cell,
for both designs the harness uses (independent sides: Welch t; interleaved sides with a shared drift: paired t)
and for adaptive repeats of independent sides (Stein's two-stage rule). The bootstrap this replaced called 30 % / 20 % / 11 % of
A/A comparisons at 2 / 3 / 5 repeats. A planted 1 % change at cv 0.2 % and 5 repeats must be called `slower` in
at least 80 % of trials. Each cell's stream is seeded, so the counts are the same on every run. The sequential
design of `bench commits` under GPU-like noise is `test_verdicts_under_gpu_noise.py`'s.
"""

from __future__ import annotations

import pytest

from harness.analysis import simulate_verdict_shares as simulate

TRIALS = 1500
CVS = (0.002, 0.01, 0.05)


@pytest.mark.parametrize("design", ["independent", "interleaved"])
@pytest.mark.parametrize("n", [3, 5, 8])
def test_false_verdicts_stay_at_the_stated_level(design, n):
    rates = [simulate(design=design, n=n, cv=cv, trials=TRIALS, seed=7)["false"] for cv in CVS]
    assert max(rates) <= 0.06, dict(zip(CVS, rates))
    # Not vacuous: the interval is not so wide that it never excludes 1.
    assert min(rates) >= 0.01, dict(zip(CVS, rates))


def test_two_repeats_a_side_draw_no_verdict():
    # One degree of freedom never judges (issue 39): no false verdict, and no verdict at all.
    for design in ("independent", "interleaved"):
        r = simulate(design=design, n=2, cv=0.01, trials=200, seed=7, threshold=0.005)
        assert r["too few repeats"] >= 0.9 and r["false"] == 0, (design, r)


def test_the_default_threshold_only_lowers_the_false_rate():
    for design in ("independent", "interleaved"):
        r = simulate(design=design, n=3, cv=0.002, trials=TRIALS, seed=7, threshold=0.005)
        assert r["false"] <= 0.01  # a 0.5 % change is 2.5 cv: an A/A pair almost never reaches it


@pytest.mark.parametrize("cv", CVS)
def test_adaptive_repeats_hold_the_level(cv):
    r = simulate(design="two-stage", n=3, cv=cv, trials=TRIALS, seed=7, target=2 * cv)
    assert r["false"] <= 0.06 and 3 < r["mean_pairs"] <= 10  # it did add repeats beyond the pilot


def test_heavy_tailed_repeats_do_not_raise_the_false_rate():
    for design in ("independent", "interleaved"):
        assert simulate(design=design, n=3, cv=0.01, trials=TRIALS, seed=7, outliers=0.1)["false"] <= 0.06


def test_a_planted_one_percent_change_is_found():
    for design in ("independent", "interleaved"):
        r = simulate(design=design, n=5, cv=0.002, trials=500, seed=7, change=0.01, threshold=0.005)
        assert r["slower"] >= 0.8, (design, r)
        assert r["faster"] == 0
