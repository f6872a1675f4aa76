"""Issue 30, acceptance 4: on every committed fixture comparison the table, the sentence, the JSON and the exit
code say the same thing.

Walks every pair of `bench commits` runs in tests/fixtures/h200 (compared as `bench commits` does: interleaved)
and the `bench compare` fixture pair through the CLI at two gates, reading back the Markdown table's verdict
column, the sentences printed, the JSON rows and verdict, and the exit status; and every run's own input
comparisons (captured vs control, or against the run's first input) through the report's pieces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from h200_runs import FIXTURES, PAIR, RUN_A, RUN_B
from typer.testing import CliRunner

from harness.analysis import compare_runs, explain_comparison, summarize_run
from harness.cli.analysis import compare
from harness.report import comparison_figures, comparison_tables, gate_figures, gate_line
from harness.results import read_run
from harness.suite import verdict_rule

H200 = FIXTURES / "h200"
HEAD = {"slower": r"B is [0-9.]+ % slower, beyond", "faster": r"B is [0-9.]+ % faster, beyond",
        "same": r"B is the same within", "slower, within threshold": r"B is [0-9.]+ % slower, within",
        "faster, within threshold": r"B is [0-9.]+ % faster, within", "unresolved": r"not resolved \(",
        "too few repeats": r"no verdict \(", "not judged": r"not judged \("}
OPEN = ("unresolved", "too few repeats")


def _exit(rows: list[dict]) -> int:
    """What every gate exits with (harness.analysis.gate_outcome): 1 on a slower row, else 6 on a row it could
    not judge, else 0."""
    return 1 if any(r["verdict"] == "slower" for r in rows) else 6 if any(r["verdict"] in OPEN for r in rows) else 0


def _commit_pairs() -> list[tuple[Path, Path]]:
    """(base run, later revision's run) of every complete `bench commits` session among the fixtures; a session
    is told by its runs' notes ("bench commits A, B in REPO: this run is revision ...")."""
    import pyarrow.parquet as pq

    by_session: dict[str, list[Path]] = {}
    for p in sorted(H200.iterdir()):
        if "-commits-" in p.name and (p / "runs.parquet").is_file():
            info = pq.read_table(p / "runs.parquet").to_pylist()[0]
            if info["status"] == "complete":
                by_session.setdefault(info["notes"].split(": this run is")[0], []).append(p)
    pairs = []
    for runs in by_session.values():
        base, *heads = sorted(runs, key=lambda p: p.name.split("-commits-")[1])
        pairs += [(base, head) for head in heads]
    return pairs


def _md_verdicts(md: str) -> list[str]:
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| kernel")
            and not line.startswith("| ---")]
    return [row.rstrip(" |").rsplit(" | ", 1)[1] for row in rows]


def _check(rows_json: list[dict], sentences: list[str], table_verdicts: list[str]) -> None:
    assert len(rows_json) == len(sentences) == len(table_verdicts) > 0
    for row, sentence, cell in zip(rows_json, sentences, table_verdicts):
        assert cell.split(" (")[0] == row["verdict"], (cell, row["verdict"])
        assert row["verdict"] in HEAD
        assert re.search(HEAD[row["verdict"]], sentence), (row["verdict"], sentence)
        for other, pattern in HEAD.items():
            if other != row["verdict"]:
                assert not re.search(pattern, sentence), (row["verdict"], other, sentence)


def test_there_are_fixture_comparisons_to_walk():
    assert len(_commit_pairs()) == 9  # every stored `bench commits` pair: a new fixture is walked too


@pytest.mark.parametrize("gate", ["0.3%", "2%"])
@pytest.mark.parametrize("pair", _commit_pairs() + [(RUN_A, RUN_B)], ids=lambda p: p[0].name[:15] if isinstance(p, tuple) else p)
def test_compare_cli_table_sentence_json_and_exit_agree(pair, gate, tmp_path):
    app = typer.Typer()
    app.command()(compare)
    a, b = pair
    md, js = tmp_path / "cmp.md", tmp_path / "cmp.json"
    args = [str(a), str(b), "--fail-on-slowdown", gate, "--md", str(md), "--json", str(js)]
    if a == RUN_A:
        args += ["--pair-inputs", "=".join(PAIR)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    doc = json.loads(js.read_text())
    rows = doc["tables"]["comparison"]
    sentences = [line for line in res.output.splitlines()
                 if re.match(r"^\S+ on \S+.*: (B is|not resolved|no verdict)", line)]
    _check(rows, sentences, _md_verdicts(md.read_text()))
    slower = [r for r in rows if r["verdict"] == "slower"]
    code = _exit(rows)
    assert doc["verdict"]["exit_code"] == res.exit_code == code, res.output
    assert doc["verdict"]["verdict"] == {1: "fail", 6: "unresolved", 0: "pass"}[code]
    assert doc["verdict"]["slower"] == [f"{r['kernel']} @ {r['input_b']}" for r in slower]
    assert doc["verdict"]["unresolved"] == [f"{r['kernel']} @ {r['input_b']}" for r in rows if r["verdict"] in OPEN]
    last = [line for line in res.output.splitlines() if line.startswith(("PASS", "FAIL", "NOT RESOLVED"))][-1]
    assert last.startswith({1: "FAIL", 6: "NOT RESOLVED", 0: "PASS"}[code]) and "threshold" in last
    assert all(r["threshold_frac"] == pytest.approx(float(gate.rstrip("%")) / 100) for r in rows)


@pytest.mark.parametrize("gate", ["0.3%", "2%"])
@pytest.mark.parametrize("pair", _commit_pairs(), ids=lambda p: p[0].name[:15])
def test_commits_pairs_judged_interleaved_agree(pair, gate):
    rule, threshold = verdict_rule(gate)
    a, b = (read_run(p) for p in pair)
    cmp = compare_runs(a, b, rule=rule, design="interleaved")
    rows = comparison_figures(cmp)
    (table,) = comparison_tables(cmp)
    _check(rows, list(explain_comparison(cmp, a, b).sentences), [r[-1] for r in table.rows])
    verdict = gate_figures([cmp], threshold=threshold)
    assert verdict["exit_code"] == _exit(rows)
    assert gate_line(cmp, threshold=threshold).startswith({1: "FAIL", 6: "NOT RESOLVED", 0: "PASS"}[_exit(rows)])


def test_each_runs_input_comparison_agrees_in_table_words_and_json():
    from harness.report import run_figures

    walked = 0
    for run_dir in sorted(p for p in H200.iterdir() if (p / "runs.parquet").is_file()):
        run = read_run(run_dir)
        summary = summarize_run(run)
        cmp = summary.inputs
        if not cmp.rows:
            continue
        walked += 1
        rows = comparison_figures(cmp)
        (table,) = comparison_tables(cmp)
        _check(rows, list(explain_comparison(cmp).sentences), [r[-1] for r in table.rows])
        # The report's JSON carries these rows, verdicts included.
        assert [r["verdict"] for r in run_figures(summary)["tables"]["inputs"]] == [r["verdict"] for r in rows]
    assert walked >= 8, walked
