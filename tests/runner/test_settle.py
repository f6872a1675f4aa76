import pytest

from harness.runner import check_settled, trend_change

KW = dict(min_s=1.0, chunk_tol=0.003, trend_window_s=2.0, trend_tol=0.003)


def pts(values, dt=0.5):
    return [(dt * (i + 1), v) for i, v in enumerate(values)]


def test_flat_series_settles_once_trend_window_is_full():
    flat = pts([1.0] * 3)
    assert not check_settled(flat, elapsed_s=1.5, **KW).settled  # window of 2 s not yet covered
    assert check_settled(pts([1.0] * 4), elapsed_s=2.0, **KW).settled


def test_minimum_warmin_is_respected():
    res = check_settled(pts([1.0] * 4), elapsed_s=0.9, **KW)
    assert not res.settled and res.reason == "minimum warm-in not reached"


def test_slow_drift_passes_two_chunk_rule_but_not_trend():
    # 0.2 % per chunk: each pair agrees within 0.3 %, but the trailing 2 s (5 chunk ends) move by ~0.8 %.
    drifting = pts([1.0 * 1.002**i for i in range(8)])
    res = check_settled(drifting, elapsed_s=4.0, **KW)
    assert res.chunk_change < 0.003
    assert res.trend_change == pytest.approx(0.008, rel=0.05)
    assert not res.settled and res.reason == "still drifting"


def test_jump_between_last_two_chunks_blocks_settling():
    res = check_settled(pts([1.0, 1.0, 1.0, 1.0, 1.01]), elapsed_s=2.5, **KW)
    assert not res.settled and res.reason == "last two chunks disagree"


def test_trend_change_is_relative_fitted_change():
    assert trend_change([(0, 1.0), (1, 1.1), (2, 1.2)]) == pytest.approx(0.2 / 1.1)
    assert trend_change([(0, 1.0), (1, 1.0)]) is None


def test_power_cap_oscillation_settles_with_blocks_of_two():
    # Recorded shape of sdpa-flash at the H200's 700 W cap: consecutive 0.5 s chunks alternate by ~1.2 %
    # while the 1 s mean stays put. Single chunks never agree within 0.3 %; blocks of two do.
    osc = pts([6.52 if i % 2 else 6.60 for i in range(12)])
    assert not check_settled(osc, elapsed_s=6.0, **KW).settled
    res = check_settled(osc, elapsed_s=6.0, block=2, **KW)
    assert res.settled and res.chunk_change < 0.003


def test_blocks_need_twice_the_chunks():
    res = check_settled(pts([1.0] * 3), elapsed_s=1.5, block=2, **KW)
    assert not res.settled and res.reason == "fewer than 4 chunks"
