"""The report of the real H200 runs: one self-contained HTML page, its Markdown twin, terminal tables."""

import base64
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from harness.cli.analysis import report
from harness.report import ReportTable, build_report, render_html, write_report
from harness.results import read_run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
ISSUE2 = FIXTURES / "20261130-043508-issue2-b7147a"
SMOLLM2 = FIXTURES / "20261130-043801-smollm2-217172"


@pytest.fixture(scope="module")
def issue2(tmp_path_factory):
    rep = build_report(read_run(ISSUE2))
    out = tmp_path_factory.mktemp("report")
    write_report(rep, html=out / "r.html", md=out / "r.md")
    return rep, out


def test_html_embeds_every_figure_and_needs_nothing_else(issue2):
    rep, out = issue2
    assert set(rep.figures) == {"timeline", "inputs", "cycles", "energy"}  # no burst rows in this run
    html = (out / "r.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 4
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert not re.search(r"(src|href)=['\"](https?:|//|file:)", html)  # self-contained: no external asset


def test_html_has_the_numbers_and_the_provenance(issue2):
    html = (issue2[1] / "r.html").read_text()
    for text in ("3.9223", "1.0102 [1.0053, 1.0151]", "power cap 99%", "slower",  # figures and decomposition
                 "NVIDIA H200", "580.159.04", "<td>torch</td><td>2.11.0</td>",
                 "<td>window_s</td><td>4.0</td>", "PCI 00000000:00:06.0",
                 "git not recorded", "bench sustained --kernel sdpa-cudnn"):
        assert text in html, text


def test_markdown_twin_has_the_same_tables_and_links_the_figures(issue2):
    rep, out = issue2
    md = (out / "r.md").read_text()
    assert md.startswith("# Run 20261130-043508-issue2-b7147a\n")
    assert "| gaussian:0.1 (ref) | sdpa-cudnn | 3.9223 | 0.37 % | 1665 | 1500 |" in md
    for key in rep.figures:
        assert f"(r-{key}.png)" in md and (out / f"r-{key}.png").read_bytes()[:4] == b"\x89PNG"
    html = (out / "r.html").read_text()
    # Every table row of the twin is in the page too.
    for cells in re.findall(r"^\| (sdpa-\S+ \| .*) \|$", md, flags=re.M):
        assert cells.split(" | ")[0] in html


def test_terminal_table_at_a_fixed_width():
    from rich.console import Console

    t = ReportTable(title="T", columns=("kernel", "input", "ms"), rows=(("k", "gaussian:0.1", "3.9223"),),
                    caption="c")
    console = Console(width=40, record=True, color_system=None)
    console.print(t.to_rich())
    assert console.export_text() == (
        "T                               \n"
        "┏━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━┓\n"
        "┃kernel ┃ input        ┃     ms┃\n"
        "┡━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━┩\n"
        "│k      │ gaussian:0.1 │ 3.9223│\n"
        "└───────┴──────────────┴───────┘\n"
        "c                               \n"
    )
    assert t.to_markdown() == ("**T**\n\n| kernel | input | ms |\n| --- | --- | ---: |\n"
                               "| k | gaussian:0.1 | 3.9223 |\n\n_c_")


def test_captured_vs_control_report():
    rep = build_report(read_run(SMOLLM2), figures=False)
    inputs = next(s for s in rep.sections if s.title.startswith("Inputs compared"))
    assert inputs.text.startswith("Each captured input (B) against the control of the same layer (A).")
    (table,) = inputs.tables
    assert [r[:3] for r in table.rows] == [("sdpa-cudnn", "L15:gaussian:0.1", "L15:captured"),
                                           ("sdpa-flash", "L15:gaussian:0.1", "L15:captured")]
    assert rep.summary.reference_inputs == {"L15:gaussian:0.1"}


def test_incomplete_run_says_so(tmp_path):
    run = tmp_path / ISSUE2.name
    shutil.copytree(ISSUE2, run)
    t = pq.read_table(run / "runs.parquet")
    i = t.schema.get_field_index("status")
    pq.write_table(t.set_column(i, t.schema.field(i), pa.array(["incomplete"])), run / "runs.parquet")
    rep = build_report(read_run(run), figures=False)
    assert "WARNING: the run is 'incomplete'" in rep.header
    assert "class='banner'" in render_html(rep.title, rep.header, rep.sections)


def test_report_command(tmp_path):
    app = typer.Typer()
    app.command()(report)
    app.command("noop")(lambda: None)
    r = CliRunner().invoke(app, ["report", str(SMOLLM2), "--html", str(tmp_path / "s.html"), "--md",
                                 str(tmp_path / "s.md")], env={"COLUMNS": "220"})
    assert r.exit_code == 0, r.output
    assert "Decomposition: time = cycles / clock" in r.output and "L15:captured" in r.output
    assert (tmp_path / "s.html").stat().st_size > 100_000 and (tmp_path / "s-timeline.png").exists()
    bad = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "220"})
    assert bad.exit_code == 2 and "holds no run (no runs.parquet in it)" in bad.output
