"""Events and the last night's verdict: a software or protocol change is an event, named part by part; the night it
happens is not judged, and three nights later it is judged again against the new nights only."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from harness.history import History, analyze_history, read_noise_pools, simulate_history
from harness.results import HISTORY_TABLE, table_schema

POOLS = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "history_pools.json"  # recorded H200 repeats


def _analysis(rows, **kw):
    table = pa.Table.from_pylist(rows, schema=table_schema(HISTORY_TABLE))
    return analyze_history(History(path=Path("h"), table=table, files=()), threshold=0.02, **kw)


def _rows(nights, *, torch_from=None, window_from=None):
    kernel = read_noise_pools(POOLS)["kernel"]
    rows = simulate_history(kernel, nights=nights, repeats=3, seed=5)
    for i, r in enumerate(rows, start=1):
        if torch_from and i >= torch_from:
            r["software"] = r["software"].replace("torch 2.11.0", "torch 2.12.0")
        if window_from and i >= window_from:
            r["protocol"] = r["protocol"].replace("window 4 s", "window 2 s")
    return rows


def test_a_software_and_a_protocol_change_are_events_named_part_by_part():
    a = _analysis(_rows(12, torch_from=6, window_from=9))
    (s,) = a.series
    assert [(e.night + 1, e.changes) for e in s.events] == [
        (6, ("software: torch 2.11.0 -> 2.12.0",)), (9, ("protocol: window 4 s -> 2 s",))]
    assert [e.night for e in a.events] == [5, 8]


def test_the_night_of_an_event_is_not_judged_and_judging_resumes_on_the_new_nights():
    at_event = _analysis(_rows(9, torch_from=9))
    assert at_event.verdict.series[0].verdict == "event" and at_event.verdict.verdict == "not judged"
    assert at_event.verdict.exit_code == 0 and "torch 2.11.0 -> 2.12.0" in at_event.verdict.series[0].sentence
    two_after = _analysis(_rows(11, torch_from=9))
    assert two_after.verdict.series[0].verdict == "too few nights"
    three_after = _analysis(_rows(12, torch_from=9))
    v = three_after.verdict.series[0]
    assert v.verdict == "same" and v.nights == 3 and "smallest change this can call" in v.sentence
    full = _analysis(_rows(30))
    assert full.verdict.series[0].nights == 10 and full.verdict.verdict == "pass"
    assert _analysis(_rows(30), wanted=5).verdict.series[0].nights == 5
