"""A revision's worker that sends nothing within its deadline is ended with its whole process group, SIGTERM
first (it is stuck: it would not read a stop on its pipe), and the error says what it waited for and what the
worker last wrote. The worker is an `sh` one-liner."""

from __future__ import annotations

import pytest

from harness.commits import WorkerError
from harness.commits._git import Revision
from harness.commits._session import _Worker
from tests.workers.proc_state import alive

# Starts a grandchild (as a kernel's helper would be), says so, writes a line to its log, then hangs.
STUCK = 'sleep 30 & echo "{\\"event\\": \\"hello\\", \\"pid\\": $!}"; echo "compiling" >&2; sleep 30'



def test_a_silent_revision_worker_is_ended_with_its_group_and_named(tmp_path):
    w = _Worker(revision=Revision(label="main", commit="0123456789abcdef"), argv=["sh", "-c", STUCK], env=None,
                cwd=tmp_path, log=tmp_path / "worker-0.log")
    try:
        hello = w.expect(("hello",), timeout=5, on_message=print)
        with pytest.raises(WorkerError, match=r"(?s)revision main \(0123456789ab\) sent nothing for 0 s \(waiting for "
                                              r"waiting/done\); it was stopped\. Last lines of its log:\ncompiling"):
            w.expect(("waiting", "done"), timeout=0.2, on_message=print)
        assert w.proc.poll() == -15 and not alive(hello["pid"])
    finally:
        w.proc.kill(grace_s=0)
