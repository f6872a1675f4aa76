"""Issue 40, acceptance 3, on the H200 (2026-12-05, `benchmarks/h200/nightly_history.sh`): three short nightly runs
into one history, each night a prefill suite (sdpa-cudnn, with the bf16 GEMM control) and a decode suite
(triton-splitkv and sdpa-kvcache at B16 S_kv 32768 page 16) under one --night label; `bench history` of it (the
dashboard, the PR Markdown, the JSON); `bench bisect` over a 16-commit repository of a plain cuDNN SDPA function
whose commit 11 adds one elementwise pass over a quarter of the output, at 1.5 %.

The fixture (tests/fixtures/h200/logs/20261205/nightly-history/) holds the history's six night files, what the
run printed and wrote (steps.log, bisect.log, pr.md, history.json, dashboard.html, logs/: each step's console) and,
of the ten bisect runs, the two tables a comparison reads (runs.parquet, measurements/). Every figure below is
recomputed from the stored files through the harness and compared with what the run printed then; nothing is
typed in but the acceptance's own terms (three nights, the series, commit 11).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from h200_runs import FIXTURES

from harness.analysis import compare_runs
from harness.commits import CommitsConfig, bisect_commits, commit_line
from harness.history import MIN_NIGHTS, analyze_history, night_files, read_history
from harness.inputs import AttentionShape, InputSpec
from harness.report import history_figures, history_markdown, history_page, verdict_line
from harness.results import read_run_rows
from harness.suite import history_settings, verdict_rule

NH = FIXTURES / "h200" / "logs" / "20261205" / "nightly-history"
STEPS = (NH / "steps.log").read_text()
DECODE_SHAPE = "B16 H32/8 Sq1 Skv32768 d128 causal page16"  # the acceptance's decode point


@pytest.fixture(scope="module")
def analysis():
    """The history as `bench history` read it: its default settings (the script gave no --fail-on-slowdown)."""
    settings = history_settings(None)
    history = read_history(NH / "history")
    return history, analyze_history(history, threshold=settings.threshold, level=settings.level,
                                    wanted=settings.nights), settings


def _night_logs() -> dict[str, dict]:
    """Each invocation's console (logs/night<n>-<suite>.log): its run ids and every repeat's printed figures."""
    out = {}
    for path in sorted((NH / "logs").glob("night*-*.log")):
        text = path.read_text()
        runs = re.findall(r"^run (\S+) -> ", text, re.M)
        repeats = [dict(kernel=k, ms=float(ms), inband=float(mhz)) for k, ms, mhz in re.findall(
            r"\] (\S+) on \S+ repeat \d+: ([\d.]+) ms/launch, NVML \d+ MHz, in-band (\d+) MHz", text)]
        out[path.stem] = dict(runs=runs, repeats=repeats)
    return out


def test_the_history_holds_three_nights_of_both_suites_and_the_control(analysis):
    history, a, _ = analysis
    assert history.nights == 3 and len(a.nights) == 3
    last = re.search(r"NOT JUDGED: night (\S+) \(", STEPS).group(1)  # the label `bench history` printed
    day = last.rsplit("-n", 1)[0]
    assert [n.label for n in a.nights] == [f"{day}-n{i}" for i in (1, 2, 3)]  # ordered by when each began
    # One file per invocation, named by its night and the runs it appended (the prefill's suite run and its
    # control in one file): the run ids are those the nightly consoles printed.
    logs = _night_logs()
    expected = set()
    for i in (1, 2, 3):
        prefill, decode = logs[f"night{i}-prefill"]["runs"], logs[f"night{i}-decode"]["runs"]
        assert len(prefill) == 2 and "control" in prefill[1] and len(decode) == 1
        expected |= {f"night-{day}-n{i}-{'_'.join(prefill)}.parquet", f"night-{day}-n{i}-{decode[0]}.parquet"}
    assert {f.name for f in night_files(NH / "history")} == expected == {f.name for f in history.files}

    by_kernel = {s.kernel: s for s in a.series}
    assert set(by_kernel) == {"sdpa-cudnn", "triton-splitkv", "sdpa-kvcache", "peak-gemm-bf16-random"}
    assert [s.role for s in a.series] == ["kernel"] * 3 + ["control"]  # the control timed after the prefill
    for name in ("triton-splitkv", "sdpa-kvcache"):
        assert f"| {DECODE_SHAPE} |" in by_kernel[name].key
    assert "| B1 H32/8 S4096 d128 causal |" in by_kernel["sdpa-cudnn"].key  # the prefill point beside it
    for s in a.series:
        assert s.nights == [0, 1, 2] and s.statuses == ["timed"] * 3
        assert len(s.machines) == 1 and not s.events and not s.change_points  # one H200, one software stack


def test_each_night_is_the_geometric_mean_of_the_repeats_its_console_printed(analysis):
    # The history's own figures against the nightly consoles' per-repeat lines (4 decimals of a ms, whole MHz):
    # what was appended is what was timed, night by night, with the in-band clock beside the time.
    _, a, _ = analysis
    logs = _night_logs()
    by_kernel = {s.kernel: s for s in a.series}
    for i in (0, 1, 2):
        repeats = logs[f"night{i + 1}-prefill"]["repeats"] + logs[f"night{i + 1}-decode"]["repeats"]
        for kernel, s in by_kernel.items():
            mine = [r for r in repeats if r["kernel"] == kernel]
            assert len(mine) == 2  # --repeats 2
            ms = statistics.geometric_mean(r["ms"] for r in mine)
            mhz = statistics.geometric_mean(r["inband"] for r in mine)
            assert s.values["time"][i] * 1e-6 == pytest.approx(ms, abs=6e-5)
            assert s.values["clock"][i] == pytest.approx(mhz, abs=0.6)
            assert s.bands["time"][i][0] < s.values["time"][i] < s.bands["time"][i][1]  # two repeats: a band


def test_the_last_night_is_not_judged_too_few_nights_as_logged(analysis):
    _, a, settings = analysis
    v = a.verdict
    assert v.verdict == "not judged" and v.exit_code == 0 and v.night.label == a.nights[-1].label
    line = verdict_line(a)
    assert line in STEPS and line in (NH / "logs" / "history.log").read_text()
    # Every series, the control too, has the two nights before the last: one short of a prediction interval.
    assert len(v.series) == 4
    for s in v.series:
        assert s.verdict == "too few nights" and s.nights == MIN_NIGHTS - 1 == 2
    assert v.threshold == settings.threshold


def _md_table(text: str) -> list[dict]:
    """The first Markdown table's rows as dicts (series keys hold escaped pipes)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def test_the_pr_markdown_rerendered_from_the_history_gives_the_committed_figures(analysis):
    _, a, _ = analysis
    committed = (NH / "pr.md").read_text()
    mine = history_markdown(a)
    assert _md_table(mine) == _md_table(committed)  # series, role, nights, time ms, verdict: every cell
    rows = _md_table(committed)
    assert [r["series"] for r in rows] == [s.key for s in a.series]
    assert [float(r["time ms"]) for r in rows] == [round(s.values["time"][-1] * 1e-6, 4) for s in a.series]
    # The verdict line and the footer, but for the history's folder (a /tmp path on the H200, the fixture here).
    ran_in = re.search(r"bench history (\S+)_$", committed, re.M).group(1)
    assert mine.replace(str(a.path), ran_in).splitlines()[:4] == committed.splitlines()[:4]
    assert mine.replace(str(a.path), ran_in).splitlines()[-1] == committed.splitlines()[-1]


def test_the_json_rerendered_from_the_history_gives_the_committed_figures(analysis):
    _, a, settings = analysis
    committed = json.loads((NH / "history.json").read_text())
    mine = history_figures(a, threshold_source=settings.threshold_source)
    assert mine["verdict"] == committed["verdict"]
    for table in ("change_points", "events"):
        assert mine["tables"][table] == committed["tables"][table] == []
    for table, n in (("history_nights", 12), ("history_verdicts", 4)):
        rows, stored = mine["tables"][table], committed["tables"][table]
        assert len(rows) == len(stored) == n
        for row, old in zip(rows, stored):
            assert row.keys() == old.keys()
            for k, value in row.items():
                if isinstance(value, float):
                    assert value == pytest.approx(old[k], rel=1e-12), (row["series"], k)
                else:
                    assert value == old[k], (row["series"], k)


def test_the_dashboard_rerendered_from_the_history_says_what_the_committed_one_does(analysis):
    # The page the screenshot (docs/screenshots/nightly-history-h200.png) was taken of: its header (nights, span,
    # series, the machine) and each series' heading, compared with a fresh render (layout aside).
    _, a, _ = analysis
    committed = (NH / "dashboard.html").read_text()
    ran_in = re.search(r"bench history (\S+)_$", (NH / "pr.md").read_text(), re.M).group(1)
    mine = history_page(a).replace(str(a.path), ran_in)
    header = re.compile(r"<p class='header'>(.*?)</p>", re.S)
    assert header.search(mine).group(1) == header.search(committed).group(1)
    assert "3 nights (" in header.search(committed).group(1) and "NVIDIA H200" in header.search(committed).group(1)
    heads = re.compile(r"\((?:kernel|control), (\d+) nights")
    assert heads.findall(mine) == heads.findall(committed) == ["3"] * 4


# --- bench bisect ----------------------------------------------------------------------------------------------

def _repo_log() -> list[tuple[int, str, str]]:
    """The 16-commit repository as its log printed it: (commit number, short hash, subject), oldest first."""
    lines = (NH / "logs" / "bisect-repo.log").read_text().splitlines()
    return [(i, ln.split(" ", 1)[0], ln.split(" ", 1)[1]) for i, ln in enumerate(reversed(lines), start=1)]


def _bisect_runs() -> dict[tuple[str, str], tuple[Path, Path]]:
    """The stored pair runs, keyed by the (base, candidate) commits each revision's kernel was loaded from."""
    dirs = sorted((NH / "bisect").iterdir())
    pairs = {}
    for base, cand in zip(dirs[::2], dirs[1::2]):
        assert "-commits-0-" in base.name and "-commits-1-" in cand.name and base.name[:15] == cand.name[:15]
        commit = lambda d: next(iter(json.loads(read_run_rows(d).info["kernel_sources_json"]).values()))["git_commit"]
        pairs[(commit(base), commit(cand))] = (base, cand)
    return pairs


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_a_panel_spans_twice_the_threshold_so_three_close_nights_do_not_read_as_a_cliff(analysis):
    # sdpa-cudnn's three nights lie 0.35 % apart; its time panel must span at least 2 x 2 % of the value (its tick
    # labels at least half of that), not the 0.35 % that made 0.2820 -> 0.2810 ms fill the panel.
    _, a, settings = analysis
    svg = re.search(r"<svg class='trend' data-s='0'.*?</svg>", history_page(a), re.S).group(0)
    assert a.series[0].kernel == "sdpa-cudnn"
    times = [v * 1e-6 for v in a.series[0].values["time"]]  # ms
    assert (max(times) - min(times)) / min(times) < 0.005
    first_panel = svg[:svg.index("class='panel'")]
    ticks = [float(t) for t in re.findall(r"text-anchor='end'>([\d.]+)</text>", first_panel)]
    assert len(ticks) >= 2 and max(ticks) - min(ticks) >= 0.5 * 2 * settings.threshold * statistics.mean(times)


def test_bisect_finds_commit_11_from_the_h200_pair_runs(tmp_path):
    """The search replayed: a repository with the H200 one's 16 subjects, each step's verdict recomputed from the
    stored pair run of the commits it names; the steps, their lines and the FOUND sentence are the logged ones."""
    log = (NH / "bisect.log").read_text()
    threshold = re.search(r"at the ([\d.]+)% threshold", log).group(1)
    rule, _ = verdict_rule(f"{threshold}%")
    commits = _repo_log()
    assert len(commits) == 16 and commits[10][2].startswith("commit 11: one elementwise pass")
    runs = _bisect_runs()
    full = {c for pair in runs for c in pair}
    number = {next(n for n, short, _ in commits if c.startswith(short)): c for c in full}  # commit number -> sha

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for _, _, subject in commits:
        _git(repo, "commit", "-q", "--allow-empty", "-m", subject)
        shas.append(_git(repo, "rev-parse", "HEAD"))

    asked = []

    def pair(cfg):
        a, b = (shas.index(c) + 1 for c in cfg.revisions)
        asked.append((a, b))
        assert a in number and b in number and (number[a], number[b]) in runs, f"no H200 pair run of {a} and {b}"
        base, cand = runs[(number[a], number[b])]
        (row,) = compare_runs(read_run_rows(base), read_run_rows(cand), rule=cfg.rule, design="interleaved").rows
        return SimpleNamespace(comparisons=[SimpleNamespace(row=row)], runs=[SimpleNamespace(run_dir=base),
                                                                            SimpleNamespace(run_dir=cand)])

    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=32, heads_kv=32, seq_len=4096, head_dim_qk=128),
                     dtype="bf16", source="gaussian:0.1")
    config = CommitsConfig(repo=repo, kernel="attn.py:attn", revisions=("a", "b"), input=spec, device="cuda:0",
                           rule=rule)
    res = bisect_commits(config, good=shas[0], bad=shas[-1], pair=pair)
    assert res.status == "found" and shas.index(res.bad.commit) + 1 == 11 and shas.index(res.good.commit) + 1 == 10
    assert asked == [(1, 16), (1, 8), (8, 12), (8, 10), (10, 11)]  # ends, then log2(15) rounded up steps

    def h200(text: str) -> str:  # this repository's hashes -> the H200 one's, for the commits the search named
        for n, sha in number.items():
            text = text.replace(shas[n - 1][:10], sha[:10])
        return text

    block = log[log.index("\nbisect ") + 1:].rstrip("\n").splitlines()
    header, lines, found = block[0], block[1:-1], block[-1]
    assert [h200(commit_line(s)) for s in res.steps] == lines  # every step's commits, verdict and ratios
    assert h200(f"{res.status.upper()}: {res.sentence}") == found
    assert f": {len(res.commits)} commit(s) after GOOD, {len(res.steps)} pair run(s)" in header
    assert f"commit 11 is {number[11][:10]}" in STEPS
    assert math.isclose(res.confidence, 1 - 5 * (1 - rule.level))


def test_every_step_of_the_script_ran_to_the_end_within_its_budget():
    # What the GPU time in docs/history.md is read from: the cumulative "after N s in all" of each step.
    assert "SKIPPED" not in STEPS
    ends = [(int(rc), int(t)) for rc, t in re.findall(r"exit (\d+) after (\d+) s in all", STEPS)]
    assert len(ends) == 3 * 2 + 2 and all(rc == 0 for rc, _ in ends)
    assert [t for _, t in ends] == sorted(t for _, t in ends)
    assert int(re.search(r"done after (\d+) s", STEPS).group(1)) == ends[-1][1]
