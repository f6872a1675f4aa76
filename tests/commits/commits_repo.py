"""Temporary git repositories holding the example kernel repository at several commits."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernel_repo"
KERNEL_FILE = "example_kernels/__init__.py"
ONE_CALL = """    def launch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale,
                                              enable_gqa=gqa)"""
# The second commit does measurably more work: it computes the same attention twice per launch.
TWO_CALLS = """    def launch():
        F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale,
                                              enable_gqa=gqa)"""
# Small enough for the CPU: one launch is a fraction of a millisecond. The warm-in is capped at 0.3 s: on a loaded
# 2-CPU machine --quick's never settles and runs to its 2 s cap, for each revision of each repeat, and what these
# tests judge (exit statuses, texts, a slowdown of 1.5x and more) does not depend on settling.
SMALL = ["--device", "cpu", "--quick", "--seq-len", "128", "--heads", "4", "--heads-kv", "2", "--head-dim", "32",
         "--dtype", "fp32", "--input", "gaussian:1", "--warmin-cap-s", "0.3"]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def kernel_repo(tmp_path) -> Path:
    """The example repository with two commits: `one` (attention once) and `twice` (attention twice)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "kernels"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".benchmarks"))
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "one")
    git(repo, "tag", "one")
    path = repo / KERNEL_FILE
    text = path.read_text()
    assert ONE_CALL in text, "the example kernel changed; update ONE_CALL in this conftest"
    path.write_text(text.replace(ONE_CALL, TWO_CALLS))
    commit_all(repo, "twice")
    return repo


@pytest.fixture
def quiet_cpu(monkeypatch):
    # One intra-op thread per worker: on a small shared CPU, two OpenMP threads of a process wait on each
    # other at every barrier whenever the scheduler preempts one, which turns 0.1 ms launches into 8 ms ones.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
