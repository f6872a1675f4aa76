"""A history analysed: per series, its figures night by night with their bands, its change points (found in time,
cycles and clock separately, attributed, told apart from machine and software events, each with its commit
range), its events, and the verdict of the last night against the nights before it.

Nights are ordered by when they began (the earliest run of a night); a series appears on the nights it ran.
Bands are the 95 % t intervals of each night's geometric mean over its repeats (one repeat: no band).

Attribution of a change point (time = cycles / clock): `cycles` when the cycles stepped and the clock did not
(the code), `clock` when the clock stepped and the cycles did not (the machine: a driver, a power limit, a
warmer room), `both`, or, found in time alone, whichever of the two moved more there (said so). Its kind: an
`event` when the fingerprint, software or protocol changed within its location interval (a machine or software
event, not a regression), else `regression` / `improvement` by the direction of the time (of the cycles when the
time did not step), and `machine` for a clock step with no recorded event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis import t_quantile
from harness.history._changepoints import PENALTY, Step, find_steps
from harness.history._series import comparability_key
from harness.history._verdict import LEVEL, NIGHTS, SeriesVerdict, judge_series

__all__ = ["METRICS", "Night", "Event", "ChangePoint", "SeriesHistory", "HistoryAnalysis", "NightVerdict",
           "analyze_history", "NIGHT_EXIT", "ANALYSIS_COLUMNS"]

# metric -> (history column, repeats column, unit scale, label)
METRICS = {
    "time": ("time_ns", "time_ns_repeats", 1e-6, "time (ms)"),
    "cycles": ("cycles_per_launch", "cycles_repeats", 1e-6, "Mcycles / launch"),
    "clock": ("clock_mhz", "clock_mhz_repeats", 1.0, "clock (MHz)"),
    "power": ("power_w", "power_w_repeats", 1.0, "board power (W)"),
    "energy": ("energy_per_launch_j", "energy_per_launch_j_repeats", 1e3, "energy (mJ / launch)"),
}
_STEPPED = ("time", "cycles", "clock")
# the columns the analysis reads (the rest of a night's row is for the record)
_COLUMNS = ("night", "night_started_at", "series", "role", "kernel", "input_label", "status", "time_ns",
            "cycles_per_launch", "cycles_clock", "clock_mhz", "power_w", "energy_per_launch_j", "fingerprint", "software",
            "protocol", "git_commit", "kernel_commit")
# what `analyze_history` reads: a history read with only these (`read_history(columns=...)`) reads faster
ANALYSIS_COLUMNS = _COLUMNS + tuple(r for _, r, _, _ in METRICS.values())
_MERGE = 2  # steps of two figures within this many nights are one change
NIGHT_EXIT = {"pass": 0, "fail": 1, "not judged": 0, "not comparable": 2}


@dataclass(frozen=True)
class Night:
    index: int
    label: str
    started_at: str


@dataclass(frozen=True, kw_only=True)
class Event:
    night: int  # night index
    changes: tuple[str, ...]  # "driver 580.159.04 -> 590.48.01"

    def text(self) -> str:
        return "; ".join(self.changes)


@dataclass(frozen=True, kw_only=True)
class ChangePoint:
    series: str
    night: int  # the first night of the new level (night index)
    lo: int  # location interval, night indices
    hi: int
    found_in: tuple[str, ...]  # the figures whose own series stepped here
    ratios: dict  # figure -> after / before, for time, cycles and clock (None where not recorded)
    attribution: str  # cycles, clock, both
    kind: str  # regression, improvement, event, machine
    events: tuple[str, ...]
    good_commit: str | None  # the commit of the last night surely before the change
    bad_commit: str | None  # the commit of the first night surely after it
    note: str = ""

    @property
    def commit_range(self) -> str:
        if not self.good_commit or not self.bad_commit:
            return "unknown (commits not recorded)"
        if self.good_commit == self.bad_commit:
            return f"none: both sides ran {self.good_commit[:10]}"
        return f"{self.good_commit[:10]}..{self.bad_commit[:10]}"


@dataclass(kw_only=True)
class SeriesHistory:
    key: str
    role: str
    kernel: str
    input_label: str
    nights: list  # night indices where it ran
    values: dict  # metric -> list of figure or None (unscaled)
    bands: dict  # metric -> list of (lo, hi) or None
    commits: list
    statuses: list
    machines: list = field(default_factory=list)  # the fingerprints it ran on, in order of first night
    events: list = field(default_factory=list)
    change_points: list = field(default_factory=list)
    verdict: SeriesVerdict | None = None


@dataclass(frozen=True, kw_only=True)
class NightVerdict:
    verdict: str  # pass, fail, not judged, not comparable
    exit_code: int
    night: Night | None
    sentence: str
    series: tuple[SeriesVerdict, ...]
    threshold: float
    level: float
    wanted: int


@dataclass(frozen=True, kw_only=True)
class HistoryAnalysis:
    path: Path
    nights: list
    series: list
    verdict: NightVerdict
    events: list  # every series' events, one per night and change
    settings: dict


def _bands(table, column: str) -> tuple[list, list]:
    """Each row's 95 % t interval of the geometric mean of its repeats (`column`, a list column), as (lows, highs)
    with None where a row has fewer than two repeats. Vectorized: a history of 50,000 rows takes milliseconds."""
    import numpy as np
    import pyarrow.compute as pc

    arr = table.column(column)
    counts = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(arr).to_numpy(zero_copy_only=False).astype(float)
    with np.errstate(all="ignore"):
        logs = np.log(np.where(values > 0, values, np.nan))
    ok = np.isfinite(logs)
    ends = np.cumsum(counts)
    starts = ends - counts
    cum = lambda x: np.concatenate([[0.0], np.cumsum(x)])
    s1, s2, cn = cum(np.where(ok, logs, 0.0)), cum(np.where(ok, logs * logs, 0.0)), cum(ok.astype(float))
    n = cn[ends] - cn[starts]
    total = s1[ends] - s1[starts]
    with np.errstate(all="ignore"):
        mean = total / n
        var = np.maximum((s2[ends] - s2[starts] - total * mean) / (n - 1), 0.0)
        t = np.array([t_quantile(0.975, k - 1) if k >= 2 else np.nan for k in range(int(n.max(initial=0)) + 1)])
        half = t[n.astype(int)] * np.sqrt(var / n)
        lo, hi = np.exp(mean - half), np.exp(mean + half)
    good = n >= 2
    return (np.where(good, lo, np.nan).tolist(), np.where(good, hi, np.nan).tolist())


def _diff(a: str | None, b: str | None) -> list[str]:
    """What changed between two `; `-joined descriptions, part by part (keyed by each part's first word)."""
    if a == b:
        return []
    pa = {p.split(" ")[0]: p for p in (a or "").split("; ") if p}
    pb = {p.split(" ")[0]: p for p in (b or "").split("; ") if p}
    out = []
    for k in dict.fromkeys([*pa, *pb]):
        if pa.get(k) != pb.get(k):
            old, new = pa.get(k, f"{k} (none)"), pb.get(k, f"{k} (none)")
            rest = new[len(k):].strip() if new.startswith(k) else new
            out.append(f"{old} -> {rest}" if old.startswith(k) and new.startswith(k) else f"{old} -> {new}")
    return out or [f"{a} -> {b}"]


def _events(rows: list[dict], nights: list[int]) -> list[Event]:
    out = []
    for prev, row, night in zip(rows, rows[1:], nights[1:]):
        if comparability_key(prev) == comparability_key(row):
            continue
        changes = []
        for col, what in (("fingerprint", "machine"), ("software", "software"), ("protocol", "protocol")):
            changes += [f"{what}: {c}" for c in _diff(prev.get(col), row.get(col))]
        out.append(Event(night=night, changes=tuple(changes)))
    return out


def _segment_ratio(values: list, a: int, at: int, b: int) -> float | None:
    before = [math.log(v) for v in values[a:at] if v]
    after = [math.log(v) for v in values[at:b] if v]
    if not before or not after:
        return None
    return math.exp(sum(after) / len(after) - sum(before) / len(before))


def _change_points(s_rows: list[dict], s: SeriesHistory, events: list[Event], penalty: float) -> list[ChangePoint]:
    found: list[tuple[str, Step, list[int]]] = []
    for metric in _STEPPED:
        pos = [i for i, v in enumerate(s.values[metric]) if v]
        if len(pos) < 4:
            continue
        for st in find_steps([s.values[metric][i] for i in pos], penalty=penalty):
            found.append((metric, st, pos))
    if not found:
        return []
    # positions in the series (index into s.nights) of each step, and its location interval
    items = sorted(((st_pos[st.at], st_pos[st.lo], st_pos[st.hi], metric) for metric, st, st_pos in found))
    groups: list[list[tuple]] = []
    for it in items:
        if groups and it[0] - groups[-1][-1][0] <= _MERGE:
            groups[-1].append(it)
        else:
            groups.append([it])
    cuts = [min(g, key=lambda it: ("cycles", "clock", "time").index(it[3]))[0] for g in groups]
    bounds = [0, *cuts, len(s.nights)]
    out = []
    for gi, g in enumerate(groups):
        at = cuts[gi]
        lo, hi = min(it[1] for it in g), max(it[2] for it in g)
        found_in = tuple(m for m in _STEPPED if any(it[3] == m for it in g))
        near = [e for e in events if s.nights[max(lo - 1, 0)] <= e.night <= s.nights[min(hi + 1, len(s.nights) - 1)]]
        inside = [e for e in near if s.nights[lo] <= e.night <= s.nights[hi]]
        if inside and bounds[gi] < s.nights.index(inside[0].night) < bounds[gi + 2]:
            at = s.nights.index(inside[0].night)  # the recorded event is where the change may be: its night is it
        ratios = {m: _segment_ratio(s.values[m], bounds[gi], at, bounds[gi + 2]) for m in _STEPPED}
        # time = cycles / clock: the clock's ratio is reported as after / before too (a lower clock is < 1)
        cyc, clk = ratios.get("cycles"), ratios.get("clock")
        if "cycles" in found_in and "clock" in found_in:
            attribution, note = "both", ""
        elif "cycles" in found_in or "clock" in found_in:
            attribution, note = found_in[1] if found_in[0] == "time" else found_in[0], ""
        elif cyc and clk:
            attribution = "cycles" if abs(math.log(cyc)) >= abs(math.log(clk)) else "clock"
            note = f"found in time alone; the {attribution} moved more there"
        else:
            attribution, note = "time", "found in time; no clock recorded to split it"
        if near:
            kind = "event"
        elif attribution == "clock":
            kind = "machine"
        else:
            moved = cyc if attribution in ("cycles", "both") and cyc else ratios.get("time") or 1.0
            kind = "regression" if moved > 1 else "improvement"
        good = s.commits[lo - 1] if lo >= 1 else None
        out.append(ChangePoint(series=s.key, night=s.nights[at], lo=s.nights[lo], hi=s.nights[hi], found_in=found_in,
                               ratios=ratios, attribution=attribution, kind=kind,
                               events=tuple(e.text() for e in near), good_commit=good, bad_commit=s.commits[hi],
                               note=note))
    return out


def analyze_history(history, *, threshold: float = 0.02, level: float = LEVEL, wanted: int = NIGHTS,
                    penalty: float = PENALTY) -> HistoryAnalysis:
    """Analyse a `History` (read_history): series, bands, events, change points and the last night's verdict."""
    table = history.table
    cols = {name: table.column(name).to_pylist() for name in _COLUMNS}
    bands = {m: _bands(table, r) for m, (_, r, _, _) in METRICS.items()}
    n_rows = table.num_rows
    started: dict[str, str] = {}
    for label, when in zip(cols["night"], cols["night_started_at"]):
        if label not in started or (when or "") < (started[label] or ""):
            started[label] = when
    order = sorted(started, key=lambda lb: (started[lb] or "", lb))
    nights = [Night(i, lb, started[lb] or "") for i, lb in enumerate(order)]
    index = {lb: i for i, lb in enumerate(order)}
    by_series: dict[str, list[int]] = {}
    for i in range(n_rows):
        by_series.setdefault(cols["series"][i], []).append(i)
    series, all_events = [], {}
    band = lambda m, i: None if bands[m][0][i] != bands[m][0][i] else (bands[m][0][i], bands[m][1][i])  # NaN: none
    rows_of: dict[str, list[dict]] = {}
    for key, idx in by_series.items():
        idx.sort(key=lambda i: (index[cols["night"][i]], cols["night_started_at"][i] or ""))
        # one row per night and series: a night that ran the series twice keeps its later run
        seen: dict[int, int] = {}
        for i in idx:
            seen[index[cols["night"][i]]] = i
        idx = [seen[k] for k in sorted(seen)]
        rows = [{c: cols[c][i] for c in ("night", "status", "time_ns", "cycles_per_launch", "cycles_clock", "clock_mhz",
                                         "fingerprint", "software", "protocol", "role", "series")} for i in idx]
        rows_of[key] = rows
        s_nights = [index[cols["night"][i]] for i in idx]
        values = {m: [cols[c][i] for i in idx] for m, (c, _, _, _) in METRICS.items()}
        s_bands = {m: [band(m, i) for i in idx] for m in METRICS}
        commits = [cols["kernel_commit"][i] or cols["git_commit"][i] for i in idx]
        s = SeriesHistory(key=key, role=cols["role"][idx[-1]], kernel=cols["kernel"][idx[-1]],
                          input_label=cols["input_label"][idx[-1]], nights=s_nights, values=values, bands=s_bands,
                          commits=commits, statuses=[cols["status"][i] for i in idx],
                          machines=list(dict.fromkeys(r["fingerprint"] for r in rows if r["fingerprint"])))
        s.events.extend(_events(rows, s_nights))
        for e in s.events:
            all_events.setdefault((e.night, e.changes), e)
        s.change_points.extend(_change_points(rows, s, s.events, penalty))
        series.append(s)
    series.sort(key=lambda s: (s.role != "kernel", s.key))
    verdict = _judge_last_night(series, rows_of, nights, threshold=threshold, level=level, wanted=wanted)
    return HistoryAnalysis(path=history.path, nights=nights, series=series, verdict=verdict,
                           events=sorted(all_events.values(), key=lambda e: e.night),
                           settings={"threshold": threshold, "level": level, "nights": wanted, "penalty": penalty})


def _judge(s: SeriesHistory, rows: list[dict], last: int, **kw) -> SeriesVerdict | None:
    if not s.nights or s.nights[-1] != last:
        return None
    tonight = rows[-1]
    earlier = [r for r in rows[:-1] if r["status"] == "timed"]
    key = comparability_key(tonight)
    comparable = [r for r in earlier if comparability_key(r) == key]
    changed = s.events[-1].text() if s.events and s.events[-1].night == last else ""
    return judge_series(s.key, role=s.role, tonight=tonight, comparable=comparable, event=changed, **kw)


def _judge_last_night(series, rows_of, nights, *, threshold, level, wanted) -> NightVerdict:
    if not nights:
        return NightVerdict(verdict="not judged", exit_code=0, night=None, sentence="The history holds no night.",
                            series=(), threshold=threshold, level=level, wanted=wanted)
    last = nights[-1].index
    kw = dict(threshold=threshold, level=level, wanted=wanted)
    controls = [v for s in series if s.role == "control" for v in [_judge(s, rows_of[s.key], last, **kw)] if v]
    control = next((c for c in controls if c.time is not None), controls[0] if controls else None)
    verdicts = []
    for s in series:
        v = control if s.role == "control" and control and control.series == s.key else _judge(
            s, rows_of[s.key], last, control=control, **kw)
        if v is not None:
            s.verdict = v
            verdicts.append(v)
    kernels = [v for v in verdicts if v.role == "kernel"]
    slower = [v for v in kernels if v.verdict == "slower"]
    judged = [v for v in kernels if v.verdict in ("slower", "faster", "same", "machine")]
    dropped = [v for v in kernels if v.verdict == "not timed" and any(
        st == "timed" for st in next(s.statuses for s in series if s.key == v.series)[:-1])]
    night = nights[-1]
    if slower:
        verdict = "fail"
        sentence = f"{len(slower)} series slower than the nights before: " + "; ".join(
            f"{v.series}: {v.sentence}" for v in slower)
    elif dropped:
        verdict = "not comparable"
        sentence = (f"{len(dropped)} series timed on earlier nights were not timed tonight: "
                    + "; ".join(f"{v.series} ({v.sentence})" for v in dropped))
    elif judged:
        verdict = "pass"
        machine = [v for v in judged if v.verdict == "machine"]
        sentence = (f"{len(judged)} series judged against their nights, none slower"
                    + (f"; {len(machine)} moved with the machine (clock), not the code" if machine else "") + ".")
    else:
        verdict = "not judged"
        reasons = sorted({v.verdict for v in kernels}) or ["no kernel series tonight"]
        sentence = f"Nothing was judged tonight ({', '.join(reasons)})."
    return NightVerdict(verdict=verdict, exit_code=NIGHT_EXIT[verdict], night=night, sentence=sentence,
                        series=tuple(verdicts), threshold=threshold, level=level, wanted=wanted)
