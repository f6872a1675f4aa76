"""One self-contained HTML file per run (figures embedded as base64 PNG, no external assets) and its
Markdown twin, both from the same sections (`_markdown.run_sections`).

>>> from harness.report import render_html
>>> "<h1>t</h1>" in render_html("t", "h", [])
True
"""

from __future__ import annotations

import base64
import dataclasses
import html as _html
import json
from dataclasses import dataclass
from pathlib import Path

from harness.analysis import VerdictRule, explain_comparison, is_full_protocol, summarize_run
from harness.errors import ResultsError
from harness.profiling import run_read_roof
from harness.report._blocks import Figure, Section
from harness.report._checks_section import burst_gap_section, crosscheck_section
from harness.report._gpu_section import gpu_spread_section
from harness.report._in_model import in_model_sections
from harness.report._markdown import render_markdown, run_sections
from harness.report._model_error_section import model_error_sections
from harness.report._plots import report_figures
from harness.report._provenance_section import provenance_section
from harness.report._sweep_section import sweep_section
from harness.report._trace_section import trace_sections
from harness.results import with_gpu

__all__ = ["Report", "build_report", "per_gpu_view", "render_html", "write_report", "report_header", "verdict_first"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1320px;color:#222;
line-height:1.4;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}
h3{font-size:14px;margin:14px 0 4px}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}th{background:#f4f4f4;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.caption,.figcap{color:#555;font-size:12px;max-width:1100px;margin:2px 0 10px}
.banner{background:#fff3cd;border:1px solid #e0c36c;padding:8px 12px;margin:10px 0}
.header{color:#444;font-size:13px}img{max-width:100%;border:1px solid #eee}.scroll{overflow-x:auto}
td:first-child,td.key{white-space:nowrap}td.prose,th.prose{min-width:16em}
ul.points{margin:4px 0 10px;padding-left:22px}ul.points li{margin:3px 0}

"""


@dataclass(frozen=True, kw_only=True)
class Report:
    title: str
    header: str
    summary: object  # RunSummary
    figures: dict[str, Figure]
    sections: list[Section]
    read_roof: object = None  # harness.profiling.Roof: the run's measured read stream, where it has peaks


def report_header(summary) -> str:
    """One paragraph: what ran, on what, and how complete the run is.

    Only settled rows of a full-protocol run count as timed at sustained clocks: `--quick` (a loosened settle
    rule) and UNSETTLED rows are timed, but their clocks may still have been moving.
    """
    info = summary.info
    timed = [a for a in summary.sustained if a.get("repeats")]
    try:
        full = is_full_protocol(json.loads(info.get("protocol_json") or "null"))
    except ValueError:
        full = False
    settled = [a for a in timed if not a.get("unsettled")] if full else []
    unsettled = sum(1 for a in timed if a.get("unsettled"))
    kernels = list(dict.fromkeys(a["kernel"].split(" @ ")[0] for a in summary.sustained))  # per_gpu_view names
    gpus = {a["kernel"].split(" @ ")[1] for a in summary.sustained if " @ " in a["kernel"]}
    inputs = list(dict.fromkeys(a["input_label"] for a in summary.sustained))
    shapes = sorted({a["shape"] for a in timed if a.get("shape")})
    limit = info.get("power_limit_w")
    if info.get("device_kind") == "cpu":
        where = "a CPU: no GPU driver or power limit"
    else:
        where = (f"driver {info.get('driver') or 'not recorded'}, power limit "
                 + (f"{limit:.0f} W" if limit else "not read"))
    text = (f"{info.get('device_name')} ({where}): {len(kernels)} kernel(s) x {len(inputs)} input(s)"
            + (f" on {len(gpus)} GPUs (one row per GPU)" if gpus else "") + ", "
            f"{', '.join(shapes) or 'no timed shape'}; {len(settled)} of {len(summary.sustained)} kernel x input "
            f"timed at sustained clocks (settled, full protocol)"
            + (f", {unsettled} UNSETTLED" if unsettled and full else "")
            + (f", {len(summary.burst)} with burst timing" if summary.burst else "") + ".")
    if timed and not full:
        text += (f" WARNING: the run used a loosened protocol (--quick or a looser settle rule): its {len(timed)} "
                 f"timed kernel x input are not sustained figures.")
    if info.get("status") != "complete":
        text += (f" WARNING: the run is {info.get('status')!r}"
                 + (f" ({info['status_detail']})" if info.get("status_detail") else "")
                 + ": figures may lack kernels or repeats.")
    return text


def per_gpu_view(run):
    """A run measured on several GPUs with each kernel named `kernel @ <bus id>`, so repeats are counted per GPU
    (a GPU is not a repeat) and every figure draws each GPU in its own colour. A one-GPU run comes back as is."""
    import polars as pl

    m = with_gpu(run.measurements, run.info)
    gpus = [g for g in dict.fromkeys(m["gpu"].to_list()) if g]
    if len(gpus) < 2:
        return run
    short = {g: g.split(":", 1)[-1] for g in gpus}  # 00000000:00:06.0 -> 00:06.0
    kernel = pl.col("kernel") + pl.lit(" @ ") + pl.col("gpu").replace_strict(short, default=pl.col("gpu"))
    return dataclasses.replace(run, measurements=m.with_columns(kernel.alias("kernel")).drop("gpu"))


def build_report(run, *, rule=None, figures: bool = True, kernel_pairs=()) -> Report:
    """Summary, figures and sections of a run (pure: nothing is written); `kernel_pairs` adds kernel B against
    kernel A (paired by repeat) as its own section."""
    view = per_gpu_view(run)  # a replicate run: one row (and colour) per kernel x input x GPU
    summary = summarize_run(view, rule=rule or VerdictRule(), kernel_pairs=kernel_pairs)
    figs = report_figures(view, summary) if figures else {}
    # Pipe counters, timelines and peaks live beside the run (bench trace / bench peaks), when they exist.
    extra = trace_sections(run, figures=figures)
    model = model_error_sections(run, figures=figures)  # `bench error --model` runs
    in_model = in_model_sections(run)  # `bench in-model` runs: where the forward's time went, the ratios
    sweep = sweep_section(view, figures=figures)  # runs whose shapes differ: figures against the swept variable
    extra = model + in_model + extra
    figs.update({f.key: f for sec in extra + ([sweep] if sweep is not None else []) for f in sec.figures})
    read_roof = run_read_roof(run.path)
    sections = run_sections(summary, figures=figs, read_roof=read_roof)
    if model and not summary.sustained and not summary.burst:  # a `bench error --model` run: no timing sections
        sections = sections[-1:]
    sections[-1:-1] = extra  # before Provenance
    if sweep is not None:  # a sweep run is read for its sweep: it opens the report, before the per-point tables
        sections.insert(0, sweep)
    spread = gpu_spread_section(run)  # runs over several GPUs only
    if spread is not None:
        sections.insert(1, spread)
    _add_check_sections(run, summary, sections)
    header = report_header(summary)
    if model and not summary.sustained:
        header = _model_error_header(run)
    return Report(title=f"Run {summary.run_id}", header=header, summary=summary, figures=figs, sections=sections,
                  read_roof=read_roof)


def _model_error_header(run) -> str:
    """A `bench error --model` run times nothing: say what it measured instead."""
    info = run.info
    cfg = json.loads(info.get("config_json") or "{}")
    text = (f"{info.get('device_name')}: the model-level error of attention kernels in {cfg.get('model', '?')} "
            f"(bench error --model), no timing.")
    if cfg.get("random_weights"):
        text += " WARNING: random weights: an architecture check, not the model's accuracy."
    if info.get("status") != "complete":
        text += (f" WARNING: the run is {info.get('status')!r}"
                 + (f" ({info['status_detail']})" if info.get("status_detail") else "") + ": it may lack documents.")
    return text


def _add_check_sections(run, summary, sections: list[Section]) -> None:
    """The clock cross-check before the pipe counters, the burst gap after burst vs sustained, provenance as tables."""
    titles = [s.title for s in sections]
    check = crosscheck_section(run)
    if check is not None:
        at = titles.index("Pipe counters (ncu) and GPM") if "Pipe counters (ncu) and GPM" in titles else len(sections) - 1
        sections.insert(at, check)
    gap = burst_gap_section(summary)
    if gap is not None:
        titles = [s.title for s in sections]
        sections.insert(titles.index("Burst vs sustained") + 1 if "Burst vs sustained" in titles else -1, gap)
    titles = [s.title for s in sections]
    if summary.inputs.rows and "Inputs compared: B relative to A" in titles:
        i = titles.index("Inputs compared: B relative to A")
        words = tuple(explain_comparison(summary.inputs).sentences)  # one run: no provenance to warn about
        sections[i] = dataclasses.replace(sections[i], text=f"{sections[i].text} In words, one row each:", points=words)
    if sections and sections[-1].title == "Provenance":
        sections[-1] = provenance_section(summary.info)


def verdict_first(table):
    """A comparison table (its last column the verdict) with the verdict moved right after the key columns (kernel,
    inputs), so a 1400 px window shows it without scrolling; the figures follow, scrolled where the page is narrower.
    The terminal and Markdown keep the verdict last, where a gate's line follows it. Other tables come back as is."""
    cols = table.columns
    if not cols or not cols[-1].startswith("verdict"):
        return table
    at = table.left
    order = [*range(at), len(cols) - 1, *range(at, len(cols) - 1)]
    return dataclasses.replace(table, columns=tuple(cols[i] for i in order),
                               rows=tuple(tuple(r[i] for i in order) for r in table.rows), left=at + 1,
                               text_tail=max(0, table.text_tail - 1), prose_columns=(*table.prose_columns, cols[-1]))


def render_html(title: str, header: str, sections: list[Section]) -> str:
    e = _html.escape
    banner = "WARNING" in header
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>", f"<title>{e(title)}</title><style>{_CSS}</style>",
           "</head><body>", f"<h1>{e(title)}</h1>",
           f"<p class='{'banner' if banner else 'header'}'>{e(header)}</p>"]
    if sections:
        out.append("<p class='header'>" + " · ".join(
            f"<a href='#s{i}'>{e(s.title)}</a>" for i, s in enumerate(sections)) + "</p>")
    for i, s in enumerate(sections):
        out.append(f"<h2 id='s{i}'>{e(s.title)}</h2>")
        if s.text:
            out.append(f"<p>{e(s.text)}</p>")
        if s.points:
            out.append("<ul class='points'>" + "".join(f"<li>{e(p)}</li>" for p in s.points) + "</ul>")
        out += [verdict_first(t).to_html() for t in s.tables]
        for f in s.figures:
            data = base64.b64encode(f.png).decode("ascii")
            out.append(f"<figure><img alt='{e(f.title)}' src='data:image/png;base64,{data}'>"
                       f"<figcaption class='figcap'><b>{e(f.title)}.</b> {e(f.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(report: Report, *, html: Path | None = None, md: Path | None = None) -> list[Path]:
    """Write the HTML page and/or the Markdown twin; the twin's figures go beside it as PNG files."""
    for flag, path in (("--html", html), ("--md", md)):
        if path is not None and Path(path).is_dir():
            raise ResultsError(f"{flag} {path} is a folder; {flag} names the file to write, e.g. "
                               f"{Path(path) / ('report.html' if flag == '--html' else 'report.md')}.")
    written = []
    if html is not None:
        html = Path(html)
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(report.title, report.header, report.sections), encoding="utf-8")
        written.append(html)
    if md is not None:
        md = Path(md)
        md.parent.mkdir(parents=True, exist_ok=True)
        paths = {}
        for key, fig in report.figures.items():
            png = md.with_name(f"{md.stem}-{key}.png")
            png.write_bytes(fig.png)
            paths[key] = png.name
            written.append(png)
        text = render_markdown(report.title, report.header, report.sections, image_paths=paths)
        md.write_text(text, encoding="utf-8")
        written.append(md)
    return written
