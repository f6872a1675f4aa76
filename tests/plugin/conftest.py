"""The plugin tests run pytest in a subprocess: what that child must not inherit."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_xdist_worker_env(monkeypatch):
    """The suite may run under pytest-xdist (`-n 3`, README). Its workers export PYTEST_XDIST_WORKER, and a
    child pytest that inherits it (the plugin's and the example's tests run pytest in a subprocess) takes
    itself for an xdist worker: pytest-benchmark then disables benchmarks, so those tests would test nothing."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)


@pytest.fixture(autouse=True)
def _child_pytest_without_unused_plugins(monkeypatch):
    """The child sessions (the example's tests) use neither hypothesis nor anyio, whose pytest plugins load
    from their entry points all the same: hypothesis's imports all of hypothesis in its terminal summary,
    and pytest rewrites the asserts of every module of a plugin's package, ~4 s a session where no
    bytecode may be written (PYTHONDONTWRITEBYTECODE, as on the CI machine)."""
    opts = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{opts} -p no:hypothesispytest -p no:anyio".strip())
