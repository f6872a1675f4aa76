"""harness.workers: a child's whole process group is ended at its deadline, a death is reported with its cause,
and nothing of the group outlives the worker. The children are `sh` one-liners (milliseconds to start); time
is driven by short deadlines and, where a wait would otherwise be long, an injected clock."""

from __future__ import annotations

import math
import os
import queue
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.workers import (
    Deadline,
    WaitExpired,
    Worker,
    child_env,
    exit_words,
    group_alive,
    harness_root,
    receive_any,
    tolerate_children_of,
    tolerate_pids,
)
from tests.workers.proc_state import alive

# A leader that starts a grandchild (same process group: a non-interactive sh has no job control), says which,
# and then hangs.
HANGS = 'sleep 30 & echo "{\\"event\\": \\"up\\", \\"pid\\": $!}"; sleep 30'



@pytest.fixture
def started():
    """Worker.start, with every worker a test started killed afterwards whatever the test did."""
    workers = []

    def start(script: str, **kw) -> Worker:
        workers.append(Worker.start(["sh", "-c", script], **kw))
        return workers[-1]

    yield start
    for w in workers:
        w.kill(grace_s=0)


def test_a_child_that_hangs_is_killed_at_its_deadline_with_its_grandchildren(started):
    w = started(HANGS)
    grandchild = w.receive(timeout=5)["pid"]
    assert alive(grandchild) and group_alive(w.pid)
    with pytest.raises(WaitExpired):
        w.receive(timeout=0.2)
    assert w.poll() is None  # a deadline only reports: the caller decides what becomes of the child
    assert w.kill(grace_s=2) == -signal.SIGTERM  # it honours SIGTERM: no SIGKILL was needed
    assert not alive(grandchild), "the leader was killed but not its group"
    assert not group_alive(w.pid)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(started):
    w = started('trap "" TERM; echo "{\\"event\\": \\"up\\"}"; sleep 30')
    assert w.receive(timeout=5) == {"event": "up"}
    assert w.kill(grace_s=0.2) == -signal.SIGKILL
    assert not group_alive(w.pid)


def test_grace_zero_kills_at_once_without_sigterm(started):
    w = started(HANGS)
    w.receive(timeout=5)
    assert w.kill(grace_s=0) == -signal.SIGKILL


@pytest.mark.parametrize(("script", "words"), [
    ("echo 'last words' >&2; kill -SEGV $$", "was killed by SIGSEGV"),
    ("echo 'last words' >&2; exit 3", "exited with status 3"),
])
@pytest.mark.parametrize("stderr", ["relayed", "logged"])
def test_a_child_that_dies_is_reported_with_its_cause_and_last_lines(started, tmp_path, script, words, stderr):
    relayed = []
    kw = {"on_stderr": relayed.append} if stderr == "relayed" else {"log": tmp_path / "child.log"}
    w = started(script, **kw)
    assert w.receive(timeout=5) is None  # the end of its stdout
    assert w.receive(timeout=5) is None  # for good
    assert exit_words(w.finish(wait_s=5, grace_s=0)) == words
    assert w.tail(3) == ["last words"]
    assert relayed == (["last words\n"] if stderr == "relayed" else [])


def test_a_leader_that_ended_while_its_grandchild_holds_the_pipe_is_not_waited_on(started):
    """Its stdout never closes (the grandchild has it). After `drain_s` on the injected clock the group is
    killed and its end arrives, long before the wait's own deadline."""
    now = [0.0]

    def clock():
        now[0] += 1.0  # every look at the clock is a second: the drain passes in a few polls
        return now[0]

    w = started('sleep 30 & echo "{\\"event\\": \\"up\\", \\"pid\\": $!}"; exit 0', clock=clock, drain_s=3.0)
    grandchild = w.receive(timeout=60)["pid"]
    assert w.receive(timeout=60) is None  # ended by the drain: the deadline would have raised WaitExpired
    assert w.poll() == 0 and not alive(grandchild) and not group_alive(w.pid)


def test_finish_asks_with_eof_then_ends_what_the_leader_left_in_its_group(started):
    # The leader ends on EOF (`read`); the sleep it started would outlive it, as a kernel's helper process would.
    w = started('sleep 30 & echo "{\\"event\\": \\"up\\", \\"pid\\": $!}"; read line; exit 0')
    grandchild = w.receive(timeout=5)["pid"]
    assert w.finish(wait_s=5, grace_s=2) == 0
    assert not alive(grandchild) and not group_alive(w.pid)
    assert w.finish(wait_s=5, grace_s=2) == 0  # again: nothing left to do


def test_a_child_that_does_not_end_on_eof_is_killed_after_the_wait(started):
    w = started('trap "" TERM; echo "{\\"event\\": \\"up\\"}"; sleep 30')
    w.receive(timeout=5)
    assert w.finish(wait_s=0.1, grace_s=0.1) == -signal.SIGKILL


def test_messages_are_json_objects_in_order_and_anything_else_is_ignored(started):
    w = started("""echo hello; echo '[1]'; echo '{"event": "a"}'; echo '{"event": "b"}'""")
    assert [w.receive(timeout=5), w.receive(timeout=5), w.receive(timeout=5)] == [{"event": "a"}, {"event": "b"}, None]


def test_send_reaches_the_child_and_fails_quietly_once_it_is_gone(started):
    w = started('read line; echo "$line"')
    assert w.send({"op": "go", "n": 1})
    assert w.receive(timeout=5) == {"op": "go", "n": 1}
    w.finish(wait_s=5, grace_s=0)
    assert not w.send({"op": "go"})


@pytest.mark.parametrize("timeout", [None, math.inf, math.nan, -1])
def test_there_is_no_wait_without_a_deadline(started, timeout):
    w = started("sleep 30")
    with pytest.raises(ValueError, match="needs a deadline"):
        w.receive(timeout=timeout)
    with pytest.raises(ValueError, match="needs a deadline"):
        w.wait(timeout=timeout)
    with pytest.raises(ValueError, match="needs a deadline"):
        receive_any(queue.Queue(), timeout=timeout)


def test_several_workers_share_one_queue_keyed_by_their_owner(started):
    events: queue.Queue = queue.Queue()
    a = started("""echo '{"event": "from a"}'""", events=events, key="A")
    b = started("""read line; echo '{"event": "from b"}'""", events=events, key="B")
    assert receive_any(events, timeout=5, workers=[a, b]) == ("A", {"event": "from a"})
    assert receive_any(events, timeout=5, workers=[a, b]) == ("A", None)
    with pytest.raises(WaitExpired):
        receive_any(events, timeout=0.1, workers=[a, b])
    b.send({})
    assert receive_any(events, timeout=5, workers=[a, b]) == ("B", {"event": "from b"})


def test_a_group_whose_only_member_is_an_unreaped_zombie_is_not_alive():
    """kill() waits for the group to be gone while its leader, ended but not yet reaped, is a zombie."""
    proc = subprocess.Popen(["sh", "-c", "exit 0"], start_new_session=True)
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # ended; left unreaped
        assert group_alive(proc.pid) is False
    finally:
        proc.wait()
    assert group_alive(proc.pid) is False


def test_a_childs_environment_puts_this_harness_first_on_its_path():
    env = child_env({"PATH": "/bin", "PYTHONPATH": "/theirs"})
    assert env == {"PATH": "/bin", "PYTHONPATH": os.pathsep.join([str(harness_root()), "/theirs"])}
    assert (harness_root() / "harness" / "workers" / "__init__.py").is_file()
    assert child_env({}, root="/src") == {"PYTHONPATH": "/src"}


def test_deadline_on_an_injected_clock():
    now = [10.0]
    d = Deadline(5, clock=lambda: now[0])
    assert d.left() == 5 and not d.expired()
    now[0] = 15.0
    assert d.left() == 0 and d.expired()
    d.restart(2)
    assert d.left() == 2 and not d.expired()


def test_the_childs_prints_cannot_reach_its_channel(started, tmp_path):
    """protocol_channel: fd 1 goes to stderr, the messages keep the real stdout; EOF on stdin reads as stop."""
    code = ("from harness.workers import protocol_channel; import os; ch = protocol_channel(); print('a print'); "
            "os.write(1, b'raw on fd 1\\n'); ch.send(event='heard', op=ch.receive()); ch.send(event='then', "
            "op=ch.receive())")
    w = Worker.start([sys.executable, "-c", code], log=tmp_path / "child.log")
    try:
        w.send({"op": "go"})
        assert w.receive(timeout=20) == {"event": "heard", "op": {"op": "go"}}
        w.close_input()
        assert w.receive(timeout=20) == {"event": "then", "op": {"op": "stop"}}
        assert w.receive(timeout=20) is None
        assert w.finish(wait_s=20, grace_s=0) == 0
        assert w.tail(5) == ["a print", "raw on fd 1"]
    finally:
        w.kill(grace_s=0)


def test_a_kill_lets_a_worker_end_its_run_as_on_ctrl_c(tmp_path):
    """stop_on_signals: the SIGTERM of kill() is a RunStopped in the child, which names it and ends on its own."""
    code = ("import time; from harness.errors import RunStopped; from harness.workers import protocol_channel, "
            "stop_on_signals; stop_on_signals(); ch = protocol_channel()\n"
            "try:\n    ch.send(event='up'); time.sleep(30)\nexcept RunStopped as exc:\n"
            "    ch.send(event='stopped', by=exc.signal_name)")
    w = Worker.start([sys.executable, "-c", code], log=tmp_path / "child.log")
    try:
        assert w.receive(timeout=20) == {"event": "up"}
        assert w.kill(grace_s=20) == 0  # it ended itself, in time: no SIGKILL
        assert w.receive(timeout=5) == {"event": "stopped", "by": "SIGTERM"}
    finally:
        w.kill(grace_s=0)


class _Device:
    spec = "cuda:0"

    def __init__(self, pids):
        self.pids = pids

    def other_processes(self):
        return [SimpleNamespace(pid=p) for p in self.pids]


def test_the_orchestrator_alone_does_not_make_a_device_busy():
    device = tolerate_pids(_Device([4242, 77, 5]), [4242, 5])
    assert [p.pid for p in device.other_processes()] == [77]
    assert device.spec == "cuda:0"  # everything else is the device's own


def test_sibling_workers_do_not_make_a_device_busy_but_other_processes_do():
    sibling = subprocess.Popen(["sleep", "30"])  # a child of this process, as the other revisions' workers are
    try:
        device = tolerate_children_of(_Device([sibling.pid, os.getppid()]), os.getpid())
        assert [p.pid for p in device.other_processes()] == [os.getppid()]
    finally:
        sibling.kill()
        sibling.wait()
