"""The history dashboard: one self-contained HTML page (`bench history DIR --html OUT/`), in the run report's style.

On top the last night's verdict, then the change points and events, then one trend plot per series: time with
its nightly band, cycles, clock, board power and energy per launch over the nights, sharing the night axis, with
each change point drawn across the panels (red a regression, green an improvement, orange the machine, grey
dashed an event) and each event marked on top. The plots are inline SVG, drawn here, not matplotlib PNGs: they
stay sharp at any zoom, a page of 50 series x 1,000 nights stays under a few MB, and a change point's tooltip
(its size, attribution, events and commit range) is the SVG's own <title>, which needs no script. A small script
adds the night under the pointer (date, commit, figures); `#s3:n120` in the address pins series 3's night n120
(a link to one night, and how the committed screenshots show a tooltip).
"""

from __future__ import annotations

import dataclasses
import html as _html
import json
import math
from datetime import datetime

from harness.report._history import history_tables, night_date, verdict_line
from harness.report._html import _CSS

__all__ = ["history_page"]

_E = _html.escape
_W, _LEFT, _RIGHT = 1240, 58, 44
# metric, scale, label, height (px), colour, band: time, cycles and clock carry their nightly bands; power and
# energy are lines (their bands are in --json / --csv), which keeps a page of 50 series x 1,000 nights under 5 MB.
_PANELS = (("time", 1e-6, "time ms", 120, "#1f77b4", True), ("cycles", 1e-6, "Mcycles", 70, "#2ca02c", True),
           ("clock", 1.0, "clock MHz", 70, "#9467bd", True), ("power", 1.0, "board W", 52, "#ff7f0e", False),
           ("energy", 1e3, "mJ/launch", 52, "#8c564b", False))
_GAP, _TOP = 10, 16
_KIND = {"regression": "#d62728", "improvement": "#2ca02c", "machine": "#ff7f0e", "event": "#7f7f7f"}
_VERDICT = {"pass": "#2e7d32", "fail": "#c62828", "not judged": "#8d6e00", "not comparable": "#c62828"}
_CSS_MORE = """
.verdict{border:2px solid;padding:8px 12px;margin:12px 0;font-size:15px}.verdict b{font-size:17px}
svg.trend{display:block;max-width:100%;height:auto;margin:4px 0 2px}svg text{font:11px system-ui,sans-serif;fill:#444}
.tip{position:absolute;pointer-events:none;background:#fff;border:1px solid #999;padding:4px 7px;font-size:12px;
white-space:pre;box-shadow:1px 1px 3px #0003;display:none;z-index:9}.seriesnav a{margin-right:10px;white-space:nowrap}
td:not(.prose){white-space:nowrap}svg text.panel{font-weight:600;fill:#333}
td:first-child{white-space:normal;min-width:14em;max-width:24em}
"""
_SCRIPT = """
(function(){const D=JSON.parse(document.getElementById('hdata').textContent);const tip=document.getElementById('tip');
D.series.forEach(s=>{if(!s.n){s.n=s.t.map((_,i)=>s.n0+i);}});
const num=(v,e,d)=>v==null?'-':(v*Math.pow(10,e)).toFixed(d);
function show(svg,i,pin){const s=D.series[+svg.dataset.s],n=s.n[i],N=D.nights[n];const r=svg.getBoundingClientRect();
const x=D.L+(D.W-D.L-D.R)*(D.N>1?n/(D.N-1):0.5);const c=(s.c&&s.c[i])||N[2]||'-';
tip.textContent=N[0]+'  '+N[1]+'\\ncommit '+c+'\\ntime '+num(s.t[i],s.te,4)+' ms   cycles '+num(s.y[i],s.ye,4)+' M   clock '+num(s.k[i],s.ke,0)+' MHz'+(pin?'\\n(pinned by the address: #s'+svg.dataset.s+':'+N[0]+')':'');
tip.style.display='block';const px=r.left+x*r.width/D.W;
tip.style.left=(window.scrollX+(px>r.left+0.6*r.width?px-tip.offsetWidth-12:px+12))+'px';tip.style.top=(window.scrollY+r.top+8)+'px';}
function near(s,n){let b=0;for(let j=0;j<s.n.length;j++){if(Math.abs(s.n[j]-n)<Math.abs(s.n[b]-n))b=j;}return b;}
document.querySelectorAll('svg.trend').forEach(svg=>{svg.addEventListener('mousemove',e=>{const r=svg.getBoundingClientRect();
const x=(e.clientX-r.left)*D.W/r.width;const n=Math.round((x-D.L)/(D.W-D.L-D.R)*(D.N-1));show(svg,near(D.series[+svg.dataset.s],n),false);});
svg.addEventListener('mouseleave',()=>{tip.style.display='none';});});
const m=location.hash.match(/^#s(\\d+):(.+)$/);if(m){const svg=document.querySelector('svg[data-s="'+m[1]+'"]');
const n=D.nights.findIndex(x=>x[0]===decodeURIComponent(m[2]));if(svg&&n>=0){svg.scrollIntoView({block:'nearest'});show(svg,near(D.series[+m[1]],n),true);}}})();
"""


_Y = 250  # a panel's y runs 0..250 in its own units: integers, half-pixel steps on the 120 px time panel


def _path(xs, ys) -> str:
    """One SVG path through (night, y) with y in 0.._Y (None breaks it), in relative integer steps: `l1-3` per
    night, a fifth of absolute pixel coordinates (a page of 50 series x 1,000 nights stays in a few MB)."""
    out, prev = [], None
    for x, y in zip(xs, ys):
        if y is None or y != y:
            prev = None
            continue
        y = int(round(y))
        if prev is None:
            out.append(f"M{x} {y}")
        else:
            dy = y - prev[1]
            out.append(f"l{x - prev[0]}{' ' if dy >= 0 else ''}{dy}")
        prev = (x, y)
    return "".join(out)


def _band_path(xs, lows, highs) -> str:
    """Filled polygons of the bands (upper edge forward, lower back), one per run of nights that have one."""
    polys, run = [], []
    for x, lo, hi in zip(xs, lows, highs):
        if lo is None:
            if len(run) > 1:
                polys.append(run)
            run = []
        else:
            run.append((x, hi, lo))
    if len(run) > 1:
        polys.append(run)
    return "".join(_path([x for x, _, _ in p] + [x for x, _, _ in reversed(p)],
                         [h for _, h, _ in p] + [lo for _, _, lo in reversed(p)]) + "z" for p in polys)


def _ticks(lo: float, hi: float, n: int = 3) -> tuple[list[float], float]:
    """Round tick values within [lo, hi], at least two, about `n`, and their step."""
    span = hi - lo
    if span <= 0:
        return [lo], abs(lo) or 1.0
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n + 1:
            step *= m
            break
    while True:
        first = math.ceil(lo / step) * step
        ticks = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
        if len(ticks) >= 2:
            return ticks, step
        step /= 2


def _label(v: float, step: float) -> str:
    """A tick's value with as many decimals as its step needs (step 0.0025: four)."""
    text = f"{step:.6f}".rstrip("0")
    digits = len(text.split(".")[1]) if "." in text else 0
    return f"{v:.{digits}f}"


def _panels(s) -> tuple[list, list[str]]:
    """The panels with a value on some night, and the labels of those left out (a CPU has no clock or power)."""
    shown = [p for p in _PANELS if any(s.values[p[0]])]
    return shown, [p[2] for p in _PANELS if p not in shown]


def _series_svg(k: int, s, analysis, xs_of, sx: float, date_format: str) -> str:
    nights = analysis.nights
    panels, _ = _panels(s)
    height = _TOP + sum(p[3] for p in panels) + _GAP * (len(panels) - 1) + 26
    out = [f"<svg class='trend' data-s='{k}' viewBox='0 0 {_W} {height}' width='{_W}' height='{height}' "
           f"xmlns='http://www.w3.org/2000/svg'>"]
    y0 = _TOP
    panel_boxes = []
    for metric, scale, label, h, color, banded in panels:
        vals = [v * scale if v else None for v in s.values[metric]]
        have = [v for v in vals if v is not None]
        panel_boxes.append((y0, y0 + h))
        out.append(f"<rect x='{_LEFT}' y='{y0}' width='{_W - _LEFT - _RIGHT}' height='{h}' fill='none' stroke='#ccc'/>")
        if have:
            lo, hi = min(have), max(have)
            # At least twice the verdict's threshold of the middle value: nights 0.3 % apart must not fill a panel
            # and read as a cliff (three H200 nights of one kernel did, 2026-12-05).
            mid = (lo + hi) / 2
            span = max(hi - lo, 2 * analysis.verdict.threshold * abs(mid))
            lo, hi = mid - span / 2, mid + span / 2
            pad = span * 0.12 or 1.0
            lo, hi = lo - pad, hi + pad
            units = lambda v, lo=lo, hi=hi: None if v is None else (hi - v) / (hi - lo) * _Y  # 0 on top
            ticks, step = _ticks(lo, hi, 3 if h > 80 else 2)
            for t in ticks:
                y = y0 + units(t) * h / _Y
                out.append(f"<line x1='{_LEFT}' x2='{_W - _RIGHT}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>"
                           f"<text x='{_LEFT - 4}' y='{y + 4:.1f}' text-anchor='end'>{_label(t, step)}</text>")
            clip = f"c{k}{metric}"
            # the figures in night x panel units, placed by one transform; strokes keep their width
            out.append(f"<clipPath id='{clip}'><rect x='{_LEFT}' y='{y0}' width='{_W - _LEFT - _RIGHT}' height='{h}'/>"
                       f"</clipPath><g clip-path='url(#{clip})'><g transform='translate({_LEFT} {y0}) "
                       f"scale({sx:.6g} {h / _Y:.6g})'>")
            lows = [units(b[0] * scale) if b else None for b in s.bands[metric]]
            highs = [units(b[1] * scale) if b else None for b in s.bands[metric]]
            band = _band_path(s.nights, lows, highs) if banded else ""
            if band:
                out.append(f"<path d='{band}' fill='{color}' fill-opacity='0.18'/>")
            out.append(f"<path d='{_path(s.nights, [units(v) for v in vals])}' fill='none' stroke='{color}' "
                       f"stroke-width='1.2' vector-effect='non-scaling-stroke'/></g>")
            if vals[-1] is not None:
                dot = _VERDICT.get(analysis.verdict.verdict, "#444") if s.verdict else color
                out.append(f"<circle cx='{xs_of(s.nights[-1]):.1f}' cy='{y0 + units(vals[-1]) * h / _Y:.1f}' r='3' "
                           f"fill='{dot}'/>")
            out.append("</g>")
        out.append(f"<text class='panel' x='{_LEFT + 5}' y='{y0 + 12}' stroke='#fff' stroke-width='3' "
                   f"paint-order='stroke'>{_E(label)}</text>")
        y0 += h + _GAP
    top, bottom = panel_boxes[0][0], panel_boxes[-1][1]
    for c in s.change_points:
        x, x_lo, x_hi = xs_of(c.night), xs_of(c.lo), xs_of(c.hi)
        color = _KIND.get(c.kind, "#444")
        title = (f"night {nights[c.night].label} ({night_date(nights[c.night])}): "
                 + ", ".join(f"{m} {(r - 1) * 100:+.2f} %" for m, r in c.ratios.items() if r)
                 + f"; found in {', '.join(c.found_in)}; attribution {c.attribution}; {c.kind}"
                 + (f"; events: {'; '.join(c.events)}" if c.events else "")
                 + f"; location nights {nights[c.lo].label}..{nights[c.hi].label}; commits {c.commit_range}"
                 + (f"; {c.note}" if c.note else ""))
        dash = " stroke-dasharray='4 3'" if c.kind == "event" else ""
        out.append(f"<g><title>{_E(title)}</title>"
                   f"<rect x='{x_lo - 1.5:.1f}' y='{top}' width='{x_hi - x_lo + 3:.1f}' height='{bottom - top}' "
                   f"fill='{color}' fill-opacity='0.10'/>"
                   f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top - 6}' y2='{bottom}' stroke='{color}' "
                   f"stroke-width='1.6'{dash}/>"
                   f"<text x='{x + 3:.1f}' y='{top - 4}' fill='{color}'>{_E(nights[c.night].label)}</text></g>")
    for e in s.events:
        x = xs_of(e.night)
        what = f"event at night {nights[e.night].label} ({night_date(nights[e.night])}): {e.text()}"
        out.append(f"<g><title>{_E(what)}"
                   f"</title><path d='M{x:.1f} {top - 12}l5 5l-5 5l-5-5z' fill='#7f7f7f'/></g>")
    ticks = sorted({round(i * (len(nights) - 1) / 6) for i in range(7)}) if len(nights) > 1 else [0]
    for t in ticks:
        x = xs_of(t)
        out.append(f"<text x='{x:.1f}' y='{bottom + 16}' text-anchor='middle'>{_E(_tick_date(nights[t], date_format))}"
                   f"</text>")
    out.append("</svg>")
    return "".join(out)


def _tick_date(night, date_format: str) -> str:
    try:
        return datetime.fromisoformat(night.started_at).strftime(date_format)
    except (TypeError, ValueError):
        return night.label


def _date_format(nights) -> str:
    """Dates on the night axis; with the time of day when the nights span less than three days."""
    try:
        span = datetime.fromisoformat(nights[-1].started_at) - datetime.fromisoformat(nights[0].started_at)
    except (TypeError, ValueError, IndexError):
        return "%Y-%m-%d"
    return "%m-%d %H:%M" if span.days < 3 else "%Y-%m-%d"


def _ints(values, scale: float) -> tuple[list, int]:
    """Figures as integers of four significant digits and the power of ten they are in (None stays None)."""
    have = [v * scale for v in values if v]
    exp = (math.floor(math.log10(max(have))) - 3) if have else 0
    return [round(v * scale / 10 ** exp) if v else None for v in values], exp


def _data(analysis) -> str:
    """What the pointer's tooltip shows, compactly: the nights (label, date, commit: the commit most series ran that
    night) and per series its nights (a first night and a count when they follow each other) and figures as 4-digit
    integers with their power of ten; a series that ran another commit than the night's lists its own."""
    nights = analysis.nights
    by_night: dict[int, dict[str, int]] = {}
    for s in analysis.series:
        for n, c in zip(s.nights, s.commits):
            if c:
                by_night.setdefault(n, {}).setdefault(c[:10], 0)
                by_night[n][c[:10]] += 1
    night_commit = {n: max(cs, key=cs.get) for n, cs in by_night.items()}
    series = []
    for s in analysis.series:
        t, te = _ints(s.values["time"], 1e-6)
        y, ye = _ints(s.values["cycles"], 1e-6)
        k, ke = _ints(s.values["clock"], 1.0)
        contiguous = s.nights == list(range(s.nights[0], s.nights[0] + len(s.nights))) if s.nights else True
        entry = {"n0": s.nights[0] if s.nights else 0} if contiguous else {"n": s.nights}
        own = {i: c[:10] for i, (n, c) in enumerate(zip(s.nights, s.commits)) if c and c[:10] != night_commit.get(n)}
        series.append({**entry, "t": t, "te": te, "y": y, "ye": ye, "k": k, "ke": ke, **({"c": own} if own else {})})
    doc = {"W": _W, "L": _LEFT, "R": _RIGHT, "N": len(nights),
           "nights": [[n.label, night_date(n), night_commit.get(n.index, "")] for n in nights], "series": series}
    return json.dumps(doc, separators=(",", ":")).replace("</", "<\\/")


def history_page(analysis, *, title: str = "Nightly history") -> str:
    """The dashboard's HTML (see the module doc)."""
    nights, v = analysis.nights, analysis.verdict
    n = len(nights)
    sx = (_W - _LEFT - _RIGHT) / (n - 1) if n > 1 else 1.0
    xs_of = lambda i: _LEFT + (sx * i if n > 1 else (_W - _LEFT - _RIGHT) / 2)
    kernels = sum(1 for s in analysis.series if s.role == "kernel")
    machines = _fingerprints(analysis)
    header = (f"{analysis.path}: {n} nights" + (f" ({night_date(nights[0])} to {night_date(nights[-1])})" if n else "")
              + f", {kernels} series and {len(analysis.series) - kernels} control(s); the last machine: "
              + (machines[-1] if machines else "not recorded")
              + (f" ({len(machines) - 1} other(s) before it: see Events)" if len(machines) > 1 else "")
              + ". Verdicts: the last night against the last "
              f"{v.wanted} comparable nights, {v.level:.0%} prediction intervals, threshold {v.threshold:.2%}.")
    color = _VERDICT.get(v.verdict, "#444")
    tables = [dataclasses.replace(t, title="") if i in (1, 2) else t  # their section heading names them
              for i, t in enumerate(history_tables(analysis))]
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>", f"<title>{_E(title)}</title>",
           f"<style>{_CSS}{_CSS_MORE}</style></head><body>", f"<h1>{_E(title)}</h1>",
           f"<p class='header'>{_E(header)}</p>",
           f"<div class='verdict' style='border-color:{color}'><b style='color:{color}'>"
           f"{_E(verdict_line(analysis))}</b></div>",
           f"<div class='scroll'>{tables[0].to_html()}</div>",
           "<p class='header seriesnav'>" + " · ".join(f"<a href='#series{k}'>{_E(s.key)}</a>"
                                                       for k, s in enumerate(analysis.series)) + "</p>",
           "<h2>Change points</h2>", f"<div class='scroll'>{tables[1].to_html()}</div>" if tables[1].rows
           else "<p>No change point.</p>",
           "<h2>Events</h2>", tables[2].to_html() if tables[2].rows else "<p>No event: one machine, software and "
                                                                         "protocol throughout.</p>",
           "<h2>Series</h2>",
           "<p class='caption'>Per night: the geometric mean over its repeats (line) and, for time, cycles and clock, "
           "its 95 % band (shaded; every figure's band is in --json / --csv); each panel's height spans at least "
           f"twice the threshold ({2 * analysis.verdict.threshold:.0%} of its values), so night-to-night noise below "
           "it looks flat; the "
           "last night's point in the verdict's colour. Change points: red a regression, green an improvement, "
           "orange the machine (clock, no event recorded), grey dashed an event; the shade is where the change may "
           "be; hover for its size, attribution, events and commit range. Diamonds on top: events.</p>"]
    date_format = _date_format(nights)
    for k, s in enumerate(analysis.series):
        verdict = f" — {s.verdict.sentence.rstrip('.')}" if s.verdict else ""
        gone = _panels(s)[1]
        missing = f"; not shown, no value on any night: {', '.join(gone)}" if gone else ""
        out.append(f"<h3 id='series{k}'>{_E(s.key)} <span class='caption'>({s.role}, {len(s.nights)} nights"
                   f"{_E(verdict)}{_E(missing)})</span></h3>")
        out.append(_series_svg(k, s, analysis, xs_of, sx, date_format))
    out += ["<div id='tip' class='tip'></div>", f"<script id='hdata' type='application/json'>{_data(analysis)}</script>",
            f"<script>{_SCRIPT}</script>", "</body></html>"]
    return "\n".join(out)


def _fingerprints(analysis) -> list[str]:
    return list(dict.fromkeys(m for s in analysis.series for m in s.machines))
