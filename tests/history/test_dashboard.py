"""The history's outputs: the dashboard page (verdict on top, one trend plot per series, change points and events
with their hover text), the PR Markdown, the figures JSON, and `bench history` itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.history import History, SimEvent, analyze_history, read_noise_pools, simulate_history
from harness.report import FIGURES_SCHEMA, HISTORY_MARKER, history_figures, history_markdown, history_page
from harness.results import HISTORY_TABLE, table_schema, write_table_atomic

EVENTS = (SimEvent(night=15, cycles=1.02), SimEvent(night=28, clock=0.97, driver="590.48.01"))
POOLS = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "history_pools.json"  # recorded H200 repeats


def _rows(nights=40, events=EVENTS, seed=2):
    pools = read_noise_pools(POOLS)
    kernel, control = pools["kernel"], pools["control"]
    return simulate_history(kernel, nights=nights, repeats=5, events=events, control=control, seed=seed)


@pytest.fixture(scope="module")
def analysis():
    table = pa.Table.from_pylist(_rows(), schema=table_schema(HISTORY_TABLE))
    return analyze_history(History(path=Path("hist"), table=table, files=()), threshold=0.005)


def test_the_page_puts_the_verdict_first_then_a_plot_per_series(analysis):
    page = history_page(analysis)
    assert page.startswith("<!DOCTYPE html>") and page.index("class='verdict'") < page.index("<svg")
    assert page.count("<svg class='trend'") == len(analysis.series) == 2
    assert not re.search(r"(src|href)=['\"]https?:", page)  # self-contained: nothing fetched
    cps = [c for s in analysis.series for c in s.change_points]
    assert cps and all(c.commit_range in page for c in cps)
    titles = re.findall(r"<title>([^<]*)</title>", page)
    code = next(c for c in cps if c.kind == "regression")
    assert any(f"night {analysis.nights[code.night].label}" in t and "attribution cycles" in t
               and f"commits {code.commit_range}" in t for t in titles)
    assert any(t.startswith("event at night n028") and "driver 580.159.04 -&gt; 590.48.01" in t for t in titles)
    data = json.loads(re.search(r"<script id='hdata' type='application/json'>(.*?)</script>", page, re.S).group(1))
    assert len(data["series"]) == 2 and len(data["nights"]) == 40 and len(data["series"][0]["t"]) == 40
    t, te = data["series"][0]["t"][0], data["series"][0]["te"]
    assert t * 10 ** te == pytest.approx(analysis.series[0].values["time"][0] * 1e-6, rel=1e-3)


def test_markdown_for_a_pr_comment_and_figures_for_json(analysis):
    md = history_markdown(analysis, dashboard_url="https://example.org/dash")
    assert md.startswith(HISTORY_MARKER) and "## Nightly history: " in md and "Dashboard: https://example.org/dash" in md
    assert "| series | role | nights |" in md and "bench bisect --repo . -k " in md and "driver 580.159.04 -> 590.48.01" in md
    doc = history_figures(analysis, threshold_source="--fail-on-slowdown 0.5%")
    jsonschema.validate(doc, json.loads(FIGURES_SCHEMA.read_text()))
    rows = doc["tables"]["history_nights"]
    assert len(rows) == 80 and rows[0]["time_low_ms"] < rows[0]["time_ms"] < rows[0]["time_high_ms"]
    assert {c["kind"] for c in doc["tables"]["change_points"]} >= {"regression", "event"}


def _write(folder: Path, rows):
    folder.mkdir(parents=True, exist_ok=True)
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(r["night"], []).append(r)
    for night, rs in by.items():
        write_table_atomic(folder / f"night-{night}-x.parquet", HISTORY_TABLE, rs)


def test_bench_history_writes_what_it_is_asked_and_gates_only_when_asked(tmp_path):
    rows = _rows(nights=20, events=(SimEvent(night=20, cycles=1.05),))
    _write(tmp_path / "h", rows)
    run = lambda *a: CliRunner().invoke(app, ["history", str(tmp_path / "h"), *a], env={"COLUMNS": "250"})
    res = run("--html", str(tmp_path / "out"), "--md", str(tmp_path / "pr.md"), "--json", str(tmp_path / "h.json"))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "index.html").is_file() and (tmp_path / "pr.md").read_text().startswith(HISTORY_MARKER)
    assert "FAIL: night n020" in res.output and "slower in cycles (the code)" in res.output
    assert run("--gate").exit_code == 1
    missing = CliRunner().invoke(app, ["history", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such folder" in missing.output
    few = CliRunner().invoke(app, ["history", str(tmp_path / "h"), "--history-nights", "2"])
    assert few.exit_code == 2 and "--history-nights 2" in few.output
