"""Issue 40, acceptance 1: simulated 120-night histories of recorded H200 repeats, written night by night through
the history store and analysed as `bench history` does, find the injected code changes and tell the driver update
from them; an A/A history finds nothing. (`benchmarks/history_simulation.py` prints the same scenario's table and
its calibration over many seeds.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ResultsError
from harness.history import (
    SimEvent,
    analyze_history,
    detection_delay,
    read_history,
    read_noise_pools,
    simulate_history,
    simulate_verdicts,
)
from harness.results import HISTORY_TABLE, write_table_atomic

POOLS = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "history_pools.json"
# +1 % cycles at night 40 (a code change), a driver update at 70 that lowers the clock 2 % (a fingerprint change),
# +0.3 % cycles at 100; 10 repeats a night (the nightly's --max-repeats cap); the nightly's 0.5 % threshold.
EVENTS = (SimEvent(night=40, cycles=1.01), SimEvent(night=70, clock=0.98, driver="590.48.01"),
          SimEvent(night=100, cycles=1.003))
THRESHOLD = 0.005


def _through_store(rows, folder):
    """One night file per night, written and read back as `bench nightly --history` and `bench history` do."""
    folder.mkdir(parents=True)
    by_night = {}
    for r in rows:
        by_night.setdefault(r["night"], []).append(r)
    for night, rs in by_night.items():
        write_table_atomic(folder / f"night-{night}-{rs[0]['run_id']}.parquet", HISTORY_TABLE, rs)
    return read_history(folder)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pools = read_noise_pools(POOLS)
    out = {}
    for name, events in (("events", EVENTS), ("aa", ())):
        rows = simulate_history(pools["kernel"], nights=120, repeats=10, events=events, control=pools["control"],
                                seed=0)
        history = _through_store(rows, tmp_path_factory.mktemp("history") / name)
        a = analyze_history(history, threshold=THRESHOLD)
        out[name] = {"analysis": a, "history": history,
                     "change_points": [(s.role, c.night + 1, c.attribution, c.kind, c.found_in, c.ratios, c.events)
                                       for s in a.series for c in s.change_points],
                     "verdicts": simulate_verdicts(rows, threshold=THRESHOLD)["verdicts"]}
    out["delay_0.3"] = detection_delay(out["events"]["history"], night=100, ratio=1.003, threshold=THRESHOLD)
    return out


def _near(cps, role, night):
    return [c for c in cps if c[0] == role and abs(c[1] - night) <= 1]


def test_change_points_at_the_injected_nights_with_their_attribution(result):
    cps = result["events"]["change_points"]
    kernel = [c for c in cps if c[0] == "kernel"]
    assert len(kernel) == 3, kernel  # no change point but the three injected
    (code,) = _near(cps, "kernel", 40)
    assert code[2] == "cycles" and code[3] == "regression" and "cycles" in code[4] and not code[6]
    assert 1.007 < code[5]["cycles"] < 1.013 and abs(code[5]["clock"] - 1) < 0.004  # +1 % in cycles, not the clock
    (driver,) = _near(cps, "kernel", 70)
    assert driver[2] == "clock" and driver[3] == "event" and "clock" in driver[4]
    assert driver[6] == ("machine: driver 580.159.04 -> 590.48.01",)  # an event, not a regression
    assert 0.975 < driver[5]["clock"] < 0.985 and abs(driver[5]["cycles"] - 1) < 0.002
    (small,) = _near(cps, "kernel", 100)
    assert small[2] == "cycles" and small[3] == "regression" and 1.001 < small[5]["cycles"] < 1.005
    # the control moved with the machine at 70 and never with the code
    assert [(c[1], c[2], c[3]) for c in cps if c[0] == "control"] == [(70, "clock", "event")]


def test_the_aa_history_has_no_change_point_and_no_failing_verdict(result):
    aa = result["aa"]
    assert aa["change_points"] == []
    assert "slower" not in aa["verdicts"] and aa["analysis"].verdict.verdict == "pass"
    # the events history fails the night of the +1 % change, and only at a change
    assert result["events"]["verdicts"].get("slower", 0) >= 1


def test_the_small_step_is_found_within_five_nights(result):
    assert result["delay_0.3"] is not None and result["delay_0.3"] <= 5, result["delay_0.3"]


def test_the_commit_range_of_a_code_change_names_the_nights_around_it(result):
    a = result["events"]["analysis"]
    kernel = next(s for s in a.series if s.role == "kernel")
    cp = next(c for c in kernel.change_points if abs(c.night + 1 - 40) <= 1)
    assert cp.good_commit == kernel.commits[cp.lo - 1] and cp.bad_commit == kernel.commits[cp.hi]
    assert cp.lo <= cp.night <= cp.hi and cp.commit_range == f"{cp.good_commit[:10]}..{cp.bad_commit[:10]}"


def test_the_pools_are_the_fixture_runs_repeats():
    """Each pool deviation is a recorded repeat's: recompute one run's from its Parquet tables."""
    import math

    from harness.results import read_rows

    doc = json.loads(POOLS.read_text())["pools"]["kernel"]
    assert len(doc["deviations"]) == 111 and len(doc["runs"]) == 19
    run = POOLS.parent / "20261203-131342-commits-0-ccfc0443-3d947a"
    rows = [m for m in read_rows(run, "measurements") if m.get("cycles_per_launch_inband")]
    logs = [math.log(m["cycles_per_launch_inband"]) for m in rows]
    mine = {round(x - sum(logs) / len(logs), 12) for x in logs}
    assert mine <= {round(d[0], 12) for d in doc["deviations"]} and run.name in doc["runs"]
    pools = read_noise_pools(POOLS)
    assert pools["kernel"].shape["kernel"] in ("sdpa-cudnn", "attn.py:attn") and pools["control"].name == "sdpa-flash"
    assert [list(d) for d in pools["kernel"].deviations] == doc["deviations"]  # read back as written


def test_a_file_that_holds_no_pools_is_refused_naming_it(tmp_path):
    bad = tmp_path / "pools.json"
    bad.write_text('{"runs": []}')
    with pytest.raises(ResultsError, match="pools.json: not a file of noise pools"):
        read_noise_pools(bad)
