"""The first hour of a new user (issue 34): help and tables whole in pipes and at 80 columns, empty columns left
out, `--format compact`, one spelling of each option across sustained / commits / nightly, `--launch graph`
refused on the CPU by flag, and what a CPU run's report and JSON rows say."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import FIGURES_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
H200_RUN = ROOT / "tests" / "fixtures" / "h200" / "20261130-043801-smollm2-217172"
SMALL = ["--device", "cpu", "--quick", "--repeats", "2", "--seq-len", "64", "--heads", "4", "--head-dim", "16",
         "--dtype", "fp32", "-i", "gaussian:1", "--idle-s", "0", "--window-s", "0.1", "--warmin-cap-s", "0.3"]
LAYOUT_MISTAKE = '''
import torch.nn.functional as F

def attn(q, k, v, causal=True, softmax_scale=None):
    """flash-attn's (B, S, H, d), named without @bshd."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                                         scale=softmax_scale)
    return out.transpose(1, 2)
'''


def invoke(*args, columns: str | None = None):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": columns, "LINES": None, "TERMINAL_WIDTH": None})
    return result.exit_code, result.output


# -- help ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["sustained", "commits", "nightly", "compare"])
def test_help_in_a_pipe_keeps_every_option_name_whole(command, monkeypatch):
    from typer import rich_utils

    monkeypatch.setattr(rich_utils, "MAX_WIDTH", None)  # as a fresh process starts
    code, out = invoke(command, "--help", columns="60")  # a narrow COLUMNS, off a terminal (CliRunner)
    assert code == 0 and "…" not in out, out
    import click

    cmd = click.Group.get_command(__import__("typer").main.get_command(app), None, command)
    for param in cmd.params:
        if getattr(param, "hidden", False):
            continue
        for name in [*param.opts, *param.secondary_opts]:
            if name.startswith("--"):
                assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", out), (name, out)


# -- tables -------------------------------------------------------------------------------------------------

def h200_tables():
    from harness.analysis import summarize_run
    from harness.report import run_tables, sustained_tables
    from harness.results import read_run

    summary = summarize_run(read_run(H200_RUN))
    return summary, [*sustained_tables(list(summary.sustained), title="h200"), *run_tables(summary)]


def render(tables, *, width: int, terminal: bool, table_format: str = "table") -> str:
    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), force_terminal=terminal, color_system=None,
                      legacy_windows=False)
    console.table_format = table_format
    for t in tables:
        console.print(t)
    return console.file.getvalue()


def cells(table) -> set[str]:
    return {c.strip() for r in table.rows for c in r if c.strip() not in ("", "-")}


def test_an_80_column_terminal_gets_whole_cells_never_split_digits():
    """rich folded `6.1417` into `6.141` / `7` at 80 columns; the columns now go to further blocks instead."""
    _, tables = h200_tables()
    text = render(tables, width=80, terminal=True)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert "…" not in text and "(continued, 2 of" in text
    flat = " ".join(ln.replace("│", " ").replace("┃", " ") for ln in lines)
    words = set(flat.split())
    for t in tables:
        for cell in cells(t):
            if re.fullmatch(r"[-+]?[0-9][0-9.,]*( ?%)?", cell):  # every number, whole, as a word of some line
                assert cell.replace(" %", "") in words or cell in flat, (t.title, cell)


def test_a_pipe_gets_each_row_on_one_line_and_prose_wrapped_at_words():
    from harness.report import ReportTable

    long = "Kernel 'k' failed the correctness gate on gaussian:1: " + " ".join(f"word{i}" for i in range(60))
    t = ReportTable(title="not timed", columns=("input", "kernel", "why not timed"), rows=(("in0", "k", long),),
                    text_tail=1)
    text = render([t], width=10_000, terminal=False)  # the CLI's console off a terminal
    assert max(len(ln) for ln in text.splitlines()) < 100  # was one line as long as the text (396-882 columns)
    assert all(f"word{i}" in text.split() or f"word{i}" in text for i in range(60))
    assert not any(re.search(r"word\d*$", ln.rstrip(" │")) and re.search(r"^\W*\d", nxt.lstrip(" │"))
                   for ln, nxt in zip(text.splitlines(), text.splitlines()[1:]))  # no word split across lines
    _, tables = h200_tables()
    piped = render(tables, width=10_000, terminal=False)
    summary, _ = h200_tables()
    for a in summary.sustained:  # a row's figures on one line, as CI logs are grepped
        line = next(ln for ln in piped.splitlines() if a["input_label"] in ln and a["kernel"] in ln)
        assert f"{a['time_ns'] * 1e-6:.4f}" in line


def test_columns_without_a_value_are_left_out_and_named():
    from harness.report import sustained_tables

    agg = dict(config_index=0, input_label="gaussian:1", kernel="sdpa-cpu", repeats=2, unsettled=0, errors=[],
               time_ns=38.4e6, time_range_frac=0.06, settled_after_s=0.9, duty_cycle=0.999, tflops=0.2235)
    clock, power = sustained_tables([agg], title="cpu")
    for view in (render([clock, power], width=200, terminal=True), clock.to_markdown() + power.to_markdown(),
                 clock.to_html() + power.to_html()):
        headers = " ".join(re.findall(r"<th[^>]*>([^<]*)</th>", view)) or " ".join(
            ln for ln in view.splitlines() if "input" in ln and "kernel" in ln)
        assert "median ms" in headers and "NVML MHz" not in headers and "board W" not in headers, headers
        assert "not shown, no value in any row: NVML MHz, in-band MHz, in-band/NVML, Mcycles/launch" in " ".join(view.split())
        assert "0.2235" in view and "38.4000" in view


def test_format_compact_draws_the_same_cells_without_box_lines(tmp_path):
    code, out = invoke("report", str(H200_RUN), "--format", "compact")
    assert code == 0, out
    assert not set("│┃━─┏└") & set(out)
    assert re.search(r"L15:captured\s+sdpa-cudnn\s+0\.2115\s+0\.47 %\s+1980\s+1868\s+0\.943", out), out
    code, out = invoke("report", str(H200_RUN), "--format", "wide")
    assert code == 2 and "--format 'wide': one of table, compact" in out


# -- options ------------------------------------------------------------------------------------------------

def test_sustained_commits_and_nightly_take_the_same_options():
    for command in ("sustained", "commits", "nightly"):
        code, out = invoke(command, "--help", columns="250")
        for flag in ("--input", "-i", "--layout", "--gqa", "--heads", "--heads-kv", "--repeats", "--results",
                     "--kernel", "-k", "--dtype", "--quick", "--json", "--format"):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", out), (command, flag)
    phrasing = "the verdicts then judge at it (default"
    for command in ("compare", "commits", "nightly"):
        assert phrasing in " ".join(invoke(command, "--help", columns="250")[1].replace("│", " ").split()), command


def test_commits_takes_the_input_list_spelling_and_refuses_two_by_flag(tmp_path):
    code, out = invoke("commits", "-k", "x", "-i", "gaussian:0.1,gaussian:1", "--device", "cpu", "A", "B")
    assert code == 2 and "--input: `bench commits` times every revision on one input, and got 2" in out, out


def test_nightly_out_is_the_old_name_of_results(tmp_path):
    code, out = invoke("nightly", "--device", "cpu", "--out", str(tmp_path / "a"), "--results", str(tmp_path / "b"))
    assert code == 2 and "--out is the old name of --results; give only --results." in out, out
    from harness.cli.common_args import renamed_option

    said = []
    assert renamed_option("--out", "--results", Path("x"), None, warn=said.append) == Path("x")
    assert said and "deprecated" in said[0] and "Use --results" in said[0]
    assert renamed_option("--out", "--results", None, Path("y"), warn=said.append) == Path("y") and len(said) == 1


def test_launch_graph_on_the_cpu_is_refused_by_flag_before_anything_runs(tmp_path):
    code, out = invoke("sustained", *SMALL, "-k", "sdpa-cpu", "--launch", "graph", "--results", str(tmp_path / "r"))
    assert code == 2, out
    assert "--launch graph replays CUDA graphs, which --device cpu does not have. Use --launch loop" in out
    assert not (tmp_path / "r").exists()


# -- a CPU run: its report and its JSON rows ----------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    where = tmp_path_factory.mktemp("cpu-run")
    (where / "fa_mistake.py").write_text(LAYOUT_MISTAKE)
    sys.path.insert(0, str(where))
    try:
        code, out = invoke("sustained", *SMALL, "-k", "sdpa-cpu", "-k", f"{where / 'fa_mistake.py'}:attn",
                           "--results", str(where / "r"), "--json", str(where / "run.json"), columns="200")
    finally:
        sys.path.remove(str(where))
    assert code == 0, out
    (run_dir,) = (where / "r").iterdir()
    return run_dir, json.loads((where / "run.json").read_text()), out


def test_json_rows_say_what_was_timed_each_repeat_and_the_gate(cpu_run):
    _, doc, _ = cpu_run
    jsonschema.validate(doc, json.loads(FIGURES_SCHEMA.read_text()))
    assert doc["runs"][0]["status"] == "complete" and doc["runs"][0]["finished_at"]
    rows = {r["kernel"].split(":")[0].rsplit("/", 1)[-1]: r for r in doc["tables"]["sustained"]}
    ok, bad = rows["sdpa-cpu"], rows["fa_mistake.py"]
    for r in (ok, bad):
        assert (r["dtype"], r["batch"], r["heads_q"], r["heads_kv"], r["seq_len_q"], r["seq_len_kv"], r["head_dim_qk"],
                r["head_dim_v"], r["causal"]) == ("fp32", 1, 4, 4, 64, 64, 16, 16, True)
        assert r["gate_max_abs_diff"] is not None and r["gate_snr_db"] is not None
    assert len(ok["repeat_times_ms"]) == ok["repeats"] == 2
    assert sorted(ok["repeat_times_ms"])[0] <= ok["time_ms"] <= sorted(ok["repeat_times_ms"])[-1]
    assert ok["gate_snr_db"] > 30 and bad["gate_snr_db"] < 0 and bad["repeat_times_ms"] == [] and not bad["timed"]


def test_the_cpu_report_draws_only_panels_with_data_and_says_n_a(cpu_run, monkeypatch):
    from harness.analysis import summarize_run
    from harness.report import _plots, report_header, run_tables
    from harness.results import read_run

    run_dir, _, _ = cpu_run
    run = read_run(run_dir)
    summary = summarize_run(run)
    header = report_header(summary)
    assert "None" not in header and "?" not in header and "a CPU: no GPU driver or power limit" in header
    drawn = []
    monkeypatch.setattr(_plots, "png", lambda fig: drawn.append(fig) or b"")  # where _plots looks it up
    fig = _plots.timeline_figure(run, summary)
    panels = [ax for ax in drawn[0].axes if ax.get_visible()]
    assert len(panels) == 1  # one timed kernel x input, its time per launch alone: no empty clock/power axes
    assert "Not drawn: SM clock and board power" in fig.caption and "host" in fig.caption
    assert "0.1 s chunks" in panels[0].get_ylabel()  # --quick's chunk, not the full protocol's 0.5 s
    (power,) = [t for t in run_tables(summary) if "TFLOP/s" in t.columns]
    cell = power.rows[0][power.columns.index("TFLOP/s")]
    # four significant digits, not 0.0 (a value such as 0.018000 prints as 0.018: count the precision, not digits)
    (timed,) = [a for a in summary.sustained if a.get("repeats")]
    assert float(cell) > 0 and math.isclose(float(cell), timed["tflops"], rel_tol=5e-4), (cell, timed["tflops"])


def _fixture_comparison():
    from harness.analysis import compare_runs, parse_pairs
    from harness.report import comparison_tables
    from harness.results import read_run

    root = Path(__file__).resolve().parents[1] / "fixtures" / "compare"
    a, b = (read_run(root / f"20261130-043508-issue2-b7147a-{x}") for x in "AB")
    cmp = compare_runs(a, b, pairs=parse_pairs(["gaussian:0.1=gaussian:1"]))
    return comparison_tables(cmp, title="B vs A")


@pytest.mark.parametrize("width", [40, 44, 50, 60])
@pytest.mark.parametrize("table_format", ["table", "compact"])
def test_a_narrow_terminal_keeps_every_number_whole(width, table_format):
    """Issue 41: at 50 columns or fewer `compare` cropped numbers (`185.` for 185.4737, `6.0` for 6.0788): its
    three key columns took 39, and a block wider than the terminal was cut at its edge. Now rows are numbered and
    every block repeats only `#`, down to 40 columns."""
    tables = [*_fixture_comparison(), *h200_tables()[1]]
    text = render(tables, width=width, terminal=True, table_format=table_format)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width, max(lines, key=len)
    words = set(" ".join(ln.replace("│", " ").replace("┃", " ") for ln in lines).split())
    for t in tables:
        for cell in cells(t):
            for word in cell.split():
                if re.fullmatch(r"\[?[-+]?[0-9][0-9.]*[\],%]?", word):  # every number, whole, a word of some line
                    assert word in words, (t.title, cell, word)


def test_a_terminal_wraps_a_sentence_at_spaces_within_its_width():
    """Issue 41: the verdict's prose (printed unwrapped, for logs) was cut by a 60-column terminal mid-word."""
    from harness.cli.streams import terminal_console

    sentence = ("sdpa-cudnn on gaussian:1 (A: gaussian:0.1): B is 1.0 % slower: 0.20 % more cycles and a 0.81 % lower "
                "clock. Time B/A 1.0102 [1.0053, 1.0151]: ratio of geometric means over 3+3 repeats.")
    console = terminal_console(width=60, file=io.StringIO(), force_terminal=True, color_system=None)
    console.print(sentence, highlight=False, soft_wrap=True)
    lines = console.file.getvalue().splitlines()
    assert len(lines) > 1 and max(len(ln.rstrip()) for ln in lines) <= 60
    assert " ".join(ln.strip() for ln in lines) == sentence  # broken at spaces only
