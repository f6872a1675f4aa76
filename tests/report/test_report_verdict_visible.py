"""The HTML comparison tables show their verdict without scrolling at 1400 px (the verdict right after the kernel and
the inputs; the figures follow), and say each row in words as an item of its own, not one paragraph. The layout is
measured in headless Chromium where it is installed (docs/screenshots/ holds the pictures,
scripts/comparison_screenshots.py makes them)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.report import build_report, render_html, render_markdown
from harness.results import read_run

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"


@pytest.fixture(scope="module")
def report():
    run = read_run(H200 / "20261130-043801-smollm2-217172")
    return build_report(run, figures=False, kernel_pairs=(("sdpa-cudnn", "sdpa-flash"),))


def _comparisons(rep):
    return [s for s in rep.sections if s.title in ("Inputs compared: B relative to A", "Kernels compared: B relative to A")]


def test_the_verdict_follows_the_keys_in_html_and_stays_last_in_markdown(report):
    sections = _comparisons(report)
    assert len(sections) == 2
    html = render_html(report.title, report.header, sections)
    heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", html)
    assert len(heads) == 2
    for head in heads:
        cols = re.findall(r"<th[^>]*>(.*?)</th>", head)
        verdict = next(i for i, c in enumerate(cols) if c.startswith("verdict"))
        assert all(c.startswith(("kernel", "input")) for c in cols[:verdict]), cols
        assert cols.index("A ms (geomean)") > verdict
    md = render_markdown(report.title, report.header, sections)
    assert all(line.rstrip(" |").split(" | ")[-1].startswith("verdict") for line in md.splitlines()
               if line.startswith("| kernel"))


def test_each_row_in_words_is_an_item_of_its_own(report):
    sections = _comparisons(report)
    html = render_html(report.title, report.header, sections)
    items = re.findall(r"<li>(.*?)</li>", html)
    rows = len(report.summary.inputs.rows) + len(report.summary.kernels.rows)
    assert len(items) == rows == 4
    assert all(": B is " in i and " threshold" in i for i in items)  # one verdict sentence each
    md = render_markdown(report.title, report.header, sections)
    assert sum(1 for line in md.splitlines() if line.startswith("- sdpa-")) == rows


def test_at_1400_px_the_verdict_column_is_inside_the_window(report, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html = render_html(report.title, report.header, _comparisons(report))
    # Each verdict header's right edge, in CSS px, written into the page where --dump-dom prints it.
    probe = ("<script>window.addEventListener('load',()=>{const r=[...document.querySelectorAll('th')]"
             ".filter(t=>t.textContent.startsWith('verdict')).map(t=>Math.round(t.getBoundingClientRect().right));"
             "const p=document.createElement('pre');p.id='edges';p.textContent=r.join(',');"
             "document.body.appendChild(p);});</script>")
    page = tmp_path / "page.html"
    page.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                           "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r"<pre id=\"edges\">([0-9,]+)</pre>", done.stdout)
    if found is None:
        pytest.skip(f"chromium did not lay the page out here: {done.stderr.strip()[-300:]}")
    edges = [int(x) for x in found.group(1).split(",")]
    assert len(edges) == 2 and all(0 < e <= 1400 - 16 for e in edges), edges  # inside the window, beside a scrollbar
