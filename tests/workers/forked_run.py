"""`subprocess.run(argv, capture_output=True, text=True, ...)` for the suite's `python -m harness ...` and
`python -m pytest ...` commands (the README's commands, run as a reader runs them), with the child forked from the
harness's preloaded helper (harness.workers.preloaded_popen) when argv is `[sys.executable, "-m", module, ...]`.

What the child sees is what `python -m` gives it (argv, working directory, environment, sys.path, stdio, exit
status: tests/workers/test_preload.py checks each), minus the 1.3-3 s of torch's import that every such command
paid afresh: about 25 of them ran in the suite. Any other argv, or HARNESS_NO_PRELOAD=1, starts it as
`subprocess.run` does."""

from __future__ import annotations

import subprocess
import threading

import pytest

from harness.workers import _preload, preloaded_popen

__all__ = ["run", "own_helpers"]


@pytest.fixture(autouse=True, scope="module")
def own_helpers():
    """A pool of preloaded helpers of the module's own: the process's (MAX_HELPERS) may be full of other tests'.
    Autouse in the modules that import it (the preload tests); the other tests share the process's pool. One pool
    per module, not per test: each helper imports torch (1.3-3 s), and a test's first child waited for it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_preload, "_HELPERS", {})
        yield


def run(argv: list[str], *, cwd=None, env: dict | None = None, timeout: float) -> subprocess.CompletedProcess:
    """The command's exit status, stdout and stderr (text), as `subprocess.run(..., capture_output=True,
    text=True, timeout=timeout)` returns them; past the timeout the child is killed and TimeoutExpired raised."""
    proc = preloaded_popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    out: dict[str, str] = {}

    def drain(name: str, stream) -> None:  # both pipes at once: a child that fills one must not stall
        out[name] = stream.read()
        stream.close()

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        raise
    for r in readers:
        r.join()
    return subprocess.CompletedProcess(argv, code, out.get("stdout", ""), out.get("stderr", ""))
