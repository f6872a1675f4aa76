"""A history's tables (terminal, Markdown, HTML), its PR comment / step summary, and its figures as JSON/CSV.

The PR Markdown begins with a hidden marker (`HISTORY_MARKER`), so a workflow can find its own comment and edit
it in place instead of adding one a night (docs/history.md: In a pull request). It stays under GitHub's 65,536
characters a comment: past `MAX_MARKDOWN` the older change points are left out, and it says so.
"""

from __future__ import annotations

from datetime import datetime

from harness.report._blocks import ReportTable
from harness.report._export import figures_document

__all__ = ["HISTORY_MARKER", "MAX_MARKDOWN", "history_tables", "history_markdown", "history_figures", "night_date",
           "verdict_line"]

HISTORY_MARKER = "<!-- bench-history -->"
MAX_MARKDOWN = 60_000
_WORDS = {"pass": "PASS", "fail": "FAIL", "not judged": "NOT JUDGED", "not comparable": "NOT COMPARABLE"}


def night_date(night) -> str:
    """`2027-01-05 02:23` from a night's start (UTC), or its label where the start was not recorded."""
    try:
        return datetime.fromisoformat(night.started_at).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return night.label


def _x(p) -> str:
    return f"x{p.ratio:.4f} [{p.low:.4f}, {p.high:.4f}]" if p is not None else "-"


def _pct(r) -> str:
    return f"{(r - 1) * 100:+.2f} %" if r else "-"


def _n(v, scale: float, digits: int) -> str:
    return f"{v * scale:.{digits}f}" if v else "-"


def verdict_line(analysis) -> str:
    v = analysis.verdict
    where = f"night {v.night.label} ({night_date(v.night)})" if v.night else "no night"
    return f"{_WORDS[v.verdict]}: {where}. {v.sentence}"


def history_tables(analysis, *, recent: int | None = None) -> list[ReportTable]:
    """The last night's verdicts, the change points (the last `recent` nights' only, when given), the events and
    one line per series."""
    v = analysis.verdict
    nights = analysis.nights
    verdicts = ReportTable(
        title=f"Last night ({v.night.label if v.night else '-'}) against the nights before",
        columns=("series", "role", "nights", "time ms", "time vs nights", "cycles vs nights", "clock vs nights",
                 "floor", "verdict"),
        rows=tuple((s.series, s.role, str(s.nights), _n(s.tonight_ns, 1e-6, 4), _x(s.time),
                    _x(s.cycles), _x(s.clock), f"{s.floor:.2%}" if s.floor is not None else "-", s.verdict)
                   for s in v.series),
        caption=(f"Ratios to the geometric mean of the last {v.wanted} comparable nights (same machine, software "
                 f"and protocol) with the {v.level:.0%} prediction interval; floor: its half-width, the smallest "
                 f"change those nights can call; threshold {v.threshold:.2%}. Cycles decide the code's verdict, the "
                 f"clock the machine's"), left=2, text_tail=1)
    first = nights[-recent].index if recent and len(nights) > recent else 0
    cps = [c for s in analysis.series for c in s.change_points if c.night >= first]
    cps.sort(key=lambda c: (-c.night, c.series))
    change = ReportTable(
        title="Change points" + (f" (the last {recent} nights)" if recent else ""),
        columns=("series", "night", "date", "found in", "attribution", "kind", "commits", "time", "cycles", "clock",
                 "events"),
        rows=tuple((c.series, nights[c.night].label, night_date(nights[c.night]), ", ".join(c.found_in),
                    c.attribution, c.kind, c.commit_range, _pct(c.ratios.get("time")), _pct(c.ratios.get("cycles")),
                    _pct(c.ratios.get("clock")), "; ".join(c.events) or "-") for c in cps),
        caption=("Steps found separately in time, cycles and clock (ruptures, PELT); the change is after / before. "
                 "attribution: cycles (the code), clock (the machine), both; kind: event when the machine, software "
                 "or protocol changed there (not a regression). commits: the last night surely before .. the first "
                 "surely after (git log A..B; bench bisect A B)"), left=7, text_tail=1)
    events = ReportTable(
        title="Events (machine, software, protocol)", columns=("night", "date", "change"),
        rows=tuple((nights[e.night].label, night_date(nights[e.night]), e.text()) for e in analysis.events),
        caption="What a night ran on or with, changed from the night before: figures across it are not compared",
        left=2, text_tail=1)
    series = ReportTable(
        title="Series", columns=("series", "role", "nights", "time ms", "Mcycles", "clock MHz", "board W",
                                 "mJ/launch", "change points"),
        rows=tuple((s.key, s.role, str(len(s.nights)), _n(s.values["time"][-1], 1e-6, 4),
                    _n(s.values["cycles"][-1], 1e-6, 3), _n(s.values["clock"][-1], 1, 0),
                    _n(s.values["power"][-1], 1, 0), _n(s.values["energy"][-1], 1e3, 3), str(len(s.change_points)))
                   for s in analysis.series),
        caption="The last night each series ran: geometric means over its repeats", left=2)
    return [verdicts, change, events, series]


def history_markdown(analysis, *, recent: int = 30, dashboard_url: str | None = None, title: str = "Nightly history"
                     ) -> str:
    """The PR comment / step summary: the verdict, tonight's table, recent change points and events."""
    v = analysis.verdict
    head = [HISTORY_MARKER, f"## {title}: {_WORDS[v.verdict]}", "", verdict_line(analysis), ""]
    if dashboard_url:
        head += [f"Dashboard: {dashboard_url}", ""]
    tables = history_tables(analysis, recent=recent)
    body = [tables[0].to_markdown(), ""]
    cps = tables[1]
    bisect = [c for s in analysis.series for c in s.change_points
              if c.kind == "regression" and c.good_commit and c.bad_commit and c.good_commit != c.bad_commit
              and c.night >= (analysis.nights[-recent].index if len(analysis.nights) > recent else 0)]
    body += [cps.to_markdown() if cps.rows else f"No change point in the last {recent} nights.", ""]
    if bisect:
        body += ["To find the commit of a code change (at half its size, so each step can resolve it): " + "; ".join(
            f"`bench bisect --repo . -k {c.series.split(' | ')[0]} --fail-on-slowdown {_half(c)} {c.good_commit[:10]} "
            f"{c.bad_commit[:10]}`" for c in bisect[:3]), ""]
    if tables[2].rows:
        body += [tables[2].to_markdown(), ""]
    footer = [f"_{len(analysis.nights)} nights, {len(analysis.series)} series; bench history {analysis.path}_"]
    text = "\n".join(head + body + footer) + "\n"
    if len(text) > MAX_MARKDOWN:
        text = "\n".join(head + [tables[0].to_markdown(), "", f"(The change points and events, "
                                 f"{len(cps.rows)} and {len(tables[2].rows)} rows, are left out: the comment would "
                                 f"pass GitHub's size limit. See the dashboard.)", ""] + footer) + "\n"
    return text


# metric, key, band's low and high keys, scale from the stored unit (the units end the keys)
_FIGURE_KEYS = (("time", "time_ms", "time_low_ms", "time_high_ms", 1e-6),
                ("cycles", "mcycles_per_launch", "mcycles_low", "mcycles_high", 1e-6),
                ("clock", "clock_mhz", "clock_low_mhz", "clock_high_mhz", 1.0),
                ("power", "board_power_w", "board_power_low_w", "board_power_high_w", 1.0),
                ("energy", "energy_per_launch_j", "energy_per_launch_low_j", "energy_per_launch_high_j", 1.0))


def _half(c) -> str:
    """Half the change's size in time (cycles where the time did not step), at least 0.3 %: bisect's threshold."""
    r = c.ratios.get("time") or c.ratios.get("cycles") or 1.0
    return f"{max(0.3, round(abs(r - 1) * 50, 1)):g}%"


def _pred(p, prefix: str) -> dict:
    return {f"{prefix}_ratio": p.ratio if p else None, f"{prefix}_low": p.low if p else None,
            f"{prefix}_high": p.high if p else None}


def history_figures(analysis, *, threshold_source: str | None = None) -> dict:
    """The figures document (figures.schema.json, command `history`): every night of every series with its bands,
    the change points, the events and the last night's verdicts."""
    nights = analysis.nights
    rows = []
    for s in analysis.series:
        for i, n in enumerate(s.nights):
            row = {"series": s.key, "role": s.role, "night": nights[n].label, "started_at": nights[n].started_at,
                   "status": s.statuses[i], "commit": s.commits[i]}
            for metric, key, low, high, scale in _FIGURE_KEYS:
                value, band = s.values[metric][i], s.bands[metric][i]
                row[key] = value * scale if value else None
                row[low], row[high] = (band[0] * scale, band[1] * scale) if band else (None, None)
            rows.append(row)
    cps = [{"series": c.series, "night": nights[c.night].label, "night_from": nights[c.lo].label,
            "night_to": nights[c.hi].label, "found_in": list(c.found_in), "time_ratio": c.ratios.get("time"),
            "cycles_ratio": c.ratios.get("cycles"), "clock_ratio": c.ratios.get("clock"), "attribution": c.attribution,
            "kind": c.kind, "events": list(c.events), "good_commit": c.good_commit, "bad_commit": c.bad_commit,
            "note": c.note} for s in analysis.series for c in s.change_points]
    events = [{"night": nights[e.night].label, "started_at": nights[e.night].started_at, "changes": list(e.changes)}
              for e in analysis.events]
    v = analysis.verdict
    verdicts = [{"series": s.series, "role": s.role, "verdict": s.verdict, "nights": s.nights, "floor": s.floor,
                 **_pred(s.time, "time"), **_pred(s.cycles, "cycles"), **_pred(s.clock, "clock"),
                 "sentence": s.sentence} for s in v.series]
    verdict = {"verdict": v.verdict, "exit_code": v.exit_code, "threshold_frac": v.threshold,
               "threshold_source": threshold_source, "slower": [s.series for s in v.series if s.verdict == "slower"],
               "unresolved": [s.series for s in v.series if s.verdict in ("too few nights", "event")]}
    return figures_document(command="history", runs=[], verdict=verdict, tables={
        "history_nights": rows, "change_points": cps, "events": events, "history_verdicts": verdicts})
