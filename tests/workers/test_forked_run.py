"""tests/workers/forked_run.run: the suite's `python -m` commands, forked from the preloaded helper, give what
`subprocess.run(..., capture_output=True, text=True, timeout=...)` gives: exit status, both streams whole, the
working directory and environment asked for, and a timeout that kills the child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.forked_run import own_helpers, run  # noqa: F401 - own_helpers: a fixture, autouse here

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PRELOAD_TEST": "forked"}


def test_status_streams_cwd_and_env_are_those_of_subprocess_run(tmp_path):
    argv = [sys.executable, "-m", "tests.workers.preload_child", "exit", "3"]
    forked = run(argv, cwd=tmp_path, env=ENV, timeout=60)
    plain = subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=60)
    assert forked.returncode == plain.returncode == 3
    seen, plain_seen = json.loads(forked.stdout), json.loads(plain.stdout)
    assert seen["preloaded"] is True and plain_seen["preloaded"] is False  # the one difference: torch imported
    for key in ("argv", "cwd", "path0", "env", "main"):
        assert seen[key] == plain_seen[key], key
    err = run([sys.executable, "-m", "tests.workers.preload_child", "stderr"], env=ENV, timeout=60)
    assert err.returncode == 0 and err.stderr == "to stderr\n" and err.stdout.startswith("{")


def test_large_output_on_both_streams_does_not_stall_and_a_timeout_kills():
    done = run([sys.executable, "-m", "tests.workers.preload_child", "big"], env=ENV, timeout=60)
    assert done.returncode == 0 and done.stdout.endswith("o" * 300000) and done.stderr == "e" * 300000
    with pytest.raises(subprocess.TimeoutExpired):
        run([sys.executable, "-m", "tests.workers.preload_child", "sleep"], env=ENV, timeout=1)
