"""The settle rule on drift that falls, oscillates or stops, and at each of its boundaries."""

import pytest

from harness.runner import check_settled, trend_change

KW = dict(min_s=1.0, chunk_tol=0.003, trend_window_s=2.0, trend_tol=0.003)


def pts(values, dt=0.5):
    return [(dt * (i + 1), v) for i, v in enumerate(values)]


def test_falling_drift_is_drift_too():
    # Time per launch falling 0.2 % a chunk (a kernel warming its caches, a clock rising): the trailing 2 s
    # fall by ~0.8 %; the trend is negative and its size, not its sign, decides.
    falling = pts([1.0 * 0.998**i for i in range(8)])
    res = check_settled(falling, elapsed_s=4.0, **KW)
    assert res.chunk_change < 0.003
    assert res.trend_change == pytest.approx(-0.008, rel=0.05)
    assert not res.settled and res.reason == "still drifting"


def test_oscillation_around_a_rising_mean_never_settles_in_blocks():
    # Alternating +-0.6 % around a mean that rises 0.15 % a chunk: blocks of two agree within 0.3 %, the trend does not.
    osc = pts([(1 + 0.0015 * i) * (1.006 if i % 2 else 0.994) for i in range(12)])
    res = check_settled(osc, elapsed_s=6.0, block=2, **KW)
    assert res.chunk_change < 0.003 and res.trend_change > 0.003
    assert not res.settled and res.reason == "still drifting"
    flat = pts([1.006 if i % 2 else 0.994 for i in range(12)])
    assert not check_settled(flat, elapsed_s=6.0, **KW).settled  # single chunks disagree by 1.2 %
    assert check_settled(flat, elapsed_s=6.0, block=2, **KW).reason == "settled"


def test_drift_that_stops_settles_once_the_trailing_window_is_flat():
    values = [1.0 * 1.004**min(i, 6) for i in range(16)]  # rises for 3 s, then flat
    results = [check_settled(pts(values[:n]), elapsed_s=0.5 * n, **KW) for n in range(2, 17)]
    first = next(i for i, r in enumerate(results, start=2) if r.settled)
    assert first == 11  # flat from chunk 7 on; 2 s of flat chunk ends (5 of them) need chunks 7..11


def test_two_chunk_change_is_relative_to_the_previous_chunk():
    res = check_settled(pts([1.0, 1.0, 1.0, 1.0, 2.0, 2.002]), elapsed_s=3.0, **KW)
    assert res.chunk_change == pytest.approx(0.001)
    down = check_settled(pts([1.0, 1.0, 1.0, 1.0, 0.998]), elapsed_s=2.5, **KW)
    assert down.chunk_change == pytest.approx(0.002)  # |last - previous|, also when falling
    blocks = check_settled(pts([1.0, 1.0, 3.0, 1.0, 1.0, 2.0, 1.1, 1.0]), elapsed_s=4.0, block=2, **KW)
    assert blocks.chunk_change == pytest.approx(abs(1.05 - 1.5) / 1.5)


def test_boundaries_are_inclusive():
    flat = pts([1.0] * 5)
    assert check_settled(flat, elapsed_s=1.0, **KW).settled  # elapsed == min_s is enough
    assert check_settled(flat, elapsed_s=1.0, **{**KW, "min_s": 1.0 + 1e-6}).reason == "minimum warm-in not reached"
    step = pts([1.0, 1.0, 1.0, 1.0, 1.0025])
    assert check_settled(step, elapsed_s=2.5, **{**KW, "trend_tol": 1.0}).settled  # 0.25 % <= 0.3 %
    assert check_settled(step, elapsed_s=2.5, **{**KW, "chunk_tol": 0.0025, "trend_tol": 1.0}).settled
    assert not check_settled(step, elapsed_s=2.5, **{**KW, "chunk_tol": 0.0024, "trend_tol": 1.0}).settled
    trend = check_settled(step, elapsed_s=2.5, **KW).trend_change
    assert check_settled(step, elapsed_s=2.5, **{**KW, "trend_tol": abs(trend)}).settled
    assert not check_settled(step, elapsed_s=2.5, **{**KW, "trend_tol": abs(trend) * 0.99}).settled


def test_trend_window_counts_the_first_chunks_duration():
    # Chunk ends 0.5 s apart: four ends span 1.5 s, which with the first chunk's own 0.5 s covers 2 s.
    assert check_settled(pts([1.0] * 4), elapsed_s=2.0, **KW).settled
    res = check_settled(pts([1.0] * 3), elapsed_s=1.5, **KW)
    assert not res.settled and res.reason == "trend window not yet full" and res.trend_change == 0.0
    # Only chunks within the trailing window enter the trend: an old outlier does not.
    old = pts([5.0] + [1.0] * 8)
    assert check_settled(old, elapsed_s=4.5, **KW).trend_change == 0.0
    uneven = [(0.3, 1.0), (1.0, 1.0), (2.0, 1.0), (2.2, 1.0)]  # ends span 1.9 s, last chunk 0.2 s: 2.1 >= 2
    assert check_settled(uneven, elapsed_s=2.2, **KW).settled
    short = [(1.0, 1.0), (1.5, 1.0), (2.0, 1.0), (2.2, 1.0)]  # 1.2 + 0.2 < 2
    assert check_settled(short, elapsed_s=2.2, **KW).reason == "trend window not yet full"


def test_the_reasons_name_what_failed():
    assert check_settled(pts([1.0]), elapsed_s=0.5, **KW).reason == "fewer than 2 chunks"
    few = check_settled(pts([1.0]), elapsed_s=0.5, **KW)
    assert few.chunk_change is None and few.trend_change is None and not few.settled
    assert check_settled(pts([1.0, 1.0, 1.0, 1.1]), elapsed_s=2.0, block=2, **KW).reason == (
        "last two 2-chunk blocks disagree")
    zero = check_settled(pts([0.0, 0.0, 1.0]), elapsed_s=1.5, **KW)
    assert zero.chunk_change == float("inf") and not zero.settled


def test_trend_change_edge_cases():
    assert trend_change([(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]) is None  # no time spread
    assert trend_change([(0.0, 1.0), (1.0, -1.0), (2.0, 0.0)]) is None  # mean zero
    assert trend_change([(0.0, 2.0), (1.0, 1.0), (3.0, 0.0)]) == pytest.approx(
        (-0.6428571428571429 * 3.0) / 1.0)
    assert trend_change([(0, 1.0), (1, 0.9), (2, 0.8)]) == pytest.approx(-0.2 / 0.9)


def test_records_are_frozen_keyword_only_values():
    import dataclasses

    from harness.runner import SettleCheck
    from harness.runner._measure import MeasureOutcome, PhaseTimes

    check = SettleCheck(settled=True, chunk_change=0.0, trend_change=0.0, reason="settled")
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.settled = False
    with pytest.raises(TypeError):
        SettleCheck(True, 0.0, 0.0, "settled")
    times = PhaseTimes(idle=(0, 1), warmin=(1, 2), window=(2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        times.idle = (0, 0)
    with pytest.raises(TypeError):
        PhaseTimes((0, 1), (1, 2), (2, 3))
    with pytest.raises(TypeError):
        MeasureOutcome([])
    out = MeasureOutcome()
    assert (out.chunks, out.settled, out.settled_after_s, out.settle, out.phases) == ([], False, None, None, None)
    assert out.settled is False and MeasureOutcome().chunks is not out.chunks
