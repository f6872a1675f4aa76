"""git_state: the measuring checkout's commit may come from HARNESS_GIT_COMMIT (a copy without .git, as on
the GPU machine here); any other tree answers from its own git, or not at all."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import harness
from harness.results import git_state

CHECKOUT_FILE = Path(harness.__file__).resolve()


def _repo(path: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "PATH": "/usr/bin:/bin"}
    path.mkdir()
    (path / "k.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_override_names_the_measuring_checkout_only(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    real = _repo(tmp_path / "kernels")
    monkeypatch.setenv("HARNESS_GIT_COMMIT", "feedbee")
    monkeypatch.setenv("HARNESS_GIT_DIRTY", "0")
    assert git_state(CHECKOUT_FILE) == ("feedbee", False)
    assert git_state(CHECKOUT_FILE.parent) == ("feedbee", False)
    # a bench commits revision's worktree: its own commit, not the checkout's
    assert git_state(tmp_path / "kernels" / "k.py") == (real, False)
    (tmp_path / "kernels" / "k.py").write_text("x = 2\n")
    assert git_state(tmp_path / "kernels" / "k.py") == (real, True)
    (tmp_path / "loose").mkdir()
    assert git_state(tmp_path / "loose") == (None, None)


def test_without_the_override_git_answers(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.delenv("HARNESS_GIT_COMMIT", raising=False)
    real = _repo(tmp_path / "kernels")
    assert git_state(tmp_path / "kernels") == (real, False)
