"""The plugin tests run pytest in a subprocess: what that child must not inherit."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_xdist_worker_env(monkeypatch):
    """The suite may run under pytest-xdist (`-n 2`, README). Its workers export PYTEST_XDIST_WORKER, and a
    child pytest that inherits it (the plugin's and the example's tests run pytest in a subprocess) takes
    itself for an xdist worker: pytest-benchmark then disables benchmarks, so those tests would test nothing."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
