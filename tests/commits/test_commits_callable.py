"""`bench commits` with a plain attention function, at the top of a repository and inside a subfolder of one,
and its endings: SIGTERM and SIGINT remove the worktrees and leave the runs `incomplete`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commits_repo import SMALL, commit_all, git
from typer.testing import CliRunner

from harness.cli import app

ONE = '''import torch.nn.functional as F


def attn(q, k, v, causal=True, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)
'''
# The later revision does three times the work: the same attention three times per call.
THREE = '''import torch.nn.functional as F


def attn(q, k, v, causal=True, scale=None, enable_gqa=False):
    for _ in range(2):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)
'''


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "240"})
    return result.exit_code, " ".join(result.output.split())


def make_repo(top: Path, folder: str) -> Path:
    """A git repository at `top` whose kernel file is `folder/mykern.py`, at commits `one` and `three` (main)."""
    where = top / folder
    where.mkdir(parents=True, exist_ok=True)
    (top / "other.txt").write_text("not part of the kernels\n")
    (where / "mykern.py").write_text(ONE)
    git(top, "init", "-q", "-b", "main")
    commit_all(top, "one")
    git(top, "tag", "one")
    (where / "mykern.py").write_text(THREE)
    commit_all(top, "three")
    return where


def worktree_count(repo: Path) -> int:
    return sum(line.startswith("worktree ") for line in git(repo, "worktree", "list", "--porcelain").splitlines())


def statuses(results: Path) -> list[str]:
    import pyarrow.parquet as pq

    return sorted(pq.read_table(run / "runs.parquet").to_pylist()[0]["status"] for run in results.iterdir())


@pytest.mark.slow
def test_plain_function_three_times_the_work_is_slower_and_fails(tmp_path, quiet_cpu):
    repo = tmp_path / "repo"
    make_repo(repo, ".")
    # 5 interleaved pairs (df 4, t = 2.78): at 3 (t = 4.30) one burst of the shared CPU (a 0.24 ms repeat among
    # 0.13 ms ones, CI at 0769695) left 3x the work unresolved [0.68, 12.5]; at 2 (t = 12.7) it never resolves.
    code, out = bench("commits", "--repo", str(repo), "--kernel", "mykern:attn", *SMALL, "--repeats", "5",
                      "--results", str(tmp_path / "results"), "--fail-on-slowdown", "2%", "one", "main")
    assert code == 1, out
    assert "FAIL: 1 slower beyond the 2 % (--fail-on-slowdown 2%) threshold: main (" in out
    line = out[out.index("main (") :]
    assert ": slower" in line and float(line.split("time x")[1].split()[0]) > 1.5
    infos = [json.loads(pq_info(run)["kernel_sources_json"])["mykern:attn"] for run in (tmp_path / "results").iterdir()]
    assert {i["source"] for i in infos} == {"mykern:attn"} and len({i["file_sha256"] for i in infos}) == 2
    assert worktree_count(repo) == 1


def pq_info(run: Path) -> dict:
    import pyarrow.parquet as pq

    return pq.read_table(run / "runs.parquet").to_pylist()[0]


@pytest.mark.slow
def test_inside_a_subfolder_repository(tmp_path, quiet_cpu):
    """--repo is a folder of a larger repository: worktrees of the top level, the kernel file from the folder,
    and a dirty file outside the folder does not stop it (nothing there is imported)."""
    top = tmp_path / "big"
    folder = make_repo(top, "kernels/attention")
    (top / "other.txt").write_text("edited, uncommitted\n")
    # The sequential design end to end: a pilot of 5 pairs (look 1), look 2 at 6 only if look 1 is unresolved.
    # Three times the work is never `same` or `faster`; whether it is resolved depends on the CPU's load (a loaded
    # 2-core machine has run one worker 4x slower than the other for a whole session): slower (exit 1) or
    # unresolved (exit 6), never a pass.
    code, out = bench("commits", "--repo", str(folder), "--kernel", "mykern.py:attn", *SMALL, "--repeats", "5",
                      "--until-ci", "40%", "--max-repeats", "6", "--results", str(tmp_path / "results"),
                      "--fail-on-slowdown", "2%", "--json", str(tmp_path / "c.json"), "one", "main")
    (row,) = json.loads((tmp_path / "c.json").read_text())["tables"]["revisions"]
    assert (code, row["verdict"]) in ((1, "slower"), (6, "unresolved")), out
    assert "look 1 after the pilot of 5 pairs" in out and "sequential: look 1 on the pilot's 5 pairs" in out
    protocols = [json.loads(pq_info(r)["protocol_json"]) for r in (tmp_path / "results").iterdir()]
    assert all(p["until_ci"] == 0.4 and p["max_repeats"] == 6 and p["repeats"] == 5 for p in protocols)
    assert all(p["warmin_cap_s"] == 0.3 for p in protocols)  # --warmin-cap-s (SMALL) reaches each revision's run
    assert "(look 1 of 2) interval" in out or "(look 2 of 2) interval" in out
    assert ("FAIL: 1 slower beyond the 2 % (--fail-on-slowdown 2%) threshold: main (" in out if code == 1 else
            "NOT RESOLVED: " in out) and "uncommitted" not in out
    files = {json.loads(pq_info(r)["kernel_sources_json"])["mykern.py:attn"]["file"]
             for r in (tmp_path / "results").iterdir()}
    assert all(f.endswith("kernels/attention/mykern.py") for f in files) and len(files) == 2
    assert worktree_count(top) == 1


def start(repo: Path, results: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness.cli", "commits", "--repo", str(repo), "--kernel", "mykern:attn",
            *SMALL, "--window-s", "60", "--repeats", "2", "--results", str(results), "one", "main"]
    env = {**os.environ, "COLUMNS": "240", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wait_for(proc: subprocess.Popen, text: str, timeout: float = 120) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        line = proc.stdout.readline()
        if not line or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never saw {text!r}; output:\n{seen}")
        seen += line
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_the_worktrees_and_marks_the_runs_incomplete(tmp_path, sig):
    repo = tmp_path / "repo"
    make_repo(repo, ".")
    results = tmp_path / "results"
    proc = start(repo, results)
    wait_for(proc, "revisions ready")
    time.sleep(1.0)  # the first revision is inside its 60 s window
    proc.send_signal(sig)
    t0 = time.monotonic()
    rest, _ = proc.communicate(timeout=120)
    assert time.monotonic() - t0 < 40  # the measuring worker was interrupted, not waited for
    assert proc.returncode == 128 + sig  # 143 for SIGTERM, 130 for SIGINT, as a shell reports them
    assert worktree_count(repo) == 1, git(repo, "worktree", "list")
    assert statuses(results) == ["incomplete", "incomplete"]
    assert "_Stopped" not in rest and "runs kept, marked incomplete" in " ".join(rest.split())
    import pyarrow.parquet as pq

    # Issue 41: each run names the signal that stopped bench commits (a SIGTERM was recorded as SIGINT)
    details = [pq.read_table(run / "runs.parquet").to_pylist()[0]["status_detail"] for run in results.iterdir()]
    measuring = [d for d in details if d.startswith("interrupted by")]
    assert measuring and all(f"interrupted by {signal.Signals(sig).name}" in d for d in measuring), details
