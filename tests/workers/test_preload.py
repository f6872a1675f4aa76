"""Children forked from the preloaded helper (harness/workers/_preload.py) behave as `subprocess.Popen` of
`python -m module` does: argv, working directory, environment, sys.path, stdio, their own session, exit codes
(sys.exit, an exception, a signal), a wait with a deadline, and a kill of their group; and they start with torch
imported already. Anything that is not `[this python, -m, module]` is started by Popen itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.workers._preload import PreloadedPopen, forkable, preloaded_popen, prestart
from tests.workers.forked_run import own_helpers  # noqa: F401 - a fixture, autouse here

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.workers.preload_child"


def start(*args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env_extra=None, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRELOAD_TEST": "yes", **(env_extra or {})}
    proc = preloaded_popen([sys.executable, "-m", MODULE, *args], stdin=stdin, stdout=subprocess.PIPE,
                           stderr=stderr, text=True, bufsize=1, encoding="utf-8", errors="replace", cwd=cwd, env=env,
                           start_new_session=True)
    assert isinstance(proc, PreloadedPopen)
    return proc, json.loads(proc.stdout.readline())


def test_a_child_sees_what_python_dash_m_would_give_it_and_torch_is_there_already(tmp_path):
    proc, seen = start("exit", "0", cwd=tmp_path)
    assert proc.wait(timeout=30) == 0
    assert seen["preloaded"] is True and seen["main"] == "__main__"
    assert seen["argv"] == ["exit", "0"] and seen["file"].endswith("preload_child.py")
    assert seen["cwd"] == str(tmp_path) and seen["path0"] == str(tmp_path) and seen["env"] == "yes"
    assert seen["sid"] == seen["pid"] == proc.pid  # a session of its own: its pid is its group's id
    # torch's objects are in the permanent generation: no collection of the child's walks them (60 ms each)
    assert seen["frozen"] > 100_000


def test_exit_codes_are_those_of_sys_exit_an_exception_and_a_signal():
    codes = {}
    for args in (("exit", "3"), ("raise",), ("signal",)):
        proc, _ = start(*args)
        codes[args[0]] = proc.wait(timeout=30)
        if args[0] == "raise":
            assert "RuntimeError: raised in the child" in proc.stderr.read()
    assert codes == {"exit": 3, "raise": 1, "signal": -signal.SIGKILL}


def test_stdin_and_stdout_relay_lines_and_stderr_goes_to_a_file(tmp_path):
    proc, _ = start("echo", stdin=subprocess.PIPE)
    proc.stdin.write("one\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "echo one\n"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0 and proc.stdout.read() == ""
    log = tmp_path / "err.log"
    with open(log, "w") as f:
        proc, _ = start("stderr", stderr=f)
    assert proc.wait(timeout=30) == 0 and log.read_text() == "to stderr\n"


def test_a_wait_has_a_deadline_and_a_kill_of_the_group_ends_the_grandchild():
    proc, _ = start("grandchild")
    grandchild = json.loads(proc.stdout.readline())["grandchild"]
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert time.monotonic() - t < 5 and proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    for _ in range(200):  # the grandchild is the helper's grandchild: init reaps it
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the grandchild outlived its group's SIGKILL")
    proc.kill()  # after the end: a no-op, never a signal to a pid that may be another process's now


def test_a_child_that_is_a_parent_forks_its_children_from_the_same_helper_when_their_environment_allows():
    # One helper per process tree, not one per parent: each nested parent's own helper imported torch again.
    proc, seen = start("nested")
    out = json.loads(proc.stdout.readline())
    assert proc.wait(timeout=60) == 0 and out["code"] == 0 and out["forked"] == "PreloadedPopen"
    nested = out["nested"]
    assert nested["preloaded"] and nested["ppid"] == seen["ppid"]  # forked by the helper that forked its parent
    assert out["conn_left"] is None  # taken: the variable no longer names a connection for anything it starts
    conn_fd, conn_pid, _ = nested["conn"].split(":")
    assert conn_pid == str(nested["pid"]) and seen["conn"].split(":")[1] == str(seen["pid"])
    # A child whose import-time environment differs gets a helper of its own (torch imported with its settings).
    proc, seen = start("nested", "MKL_DYNAMIC=nested-test")
    out = json.loads(proc.stdout.readline())
    assert proc.wait(timeout=60) == 0 and out["code"] == 0 and out["forked"] == "PreloadedPopen"
    assert out["nested"]["preloaded"] and out["nested"]["ppid"] not in (seen["ppid"], seen["pid"])
    assert out["conn_left"] == seen["conn"]  # kept, unused, for a child that would match


def test_a_process_that_inherits_the_connection_variable_but_not_its_socket_starts_its_own_helper(monkeypatch):
    from harness.workers import _preload

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    key = _preload._key(sys.executable, env)
    digest = _preload._digest(key)
    r, w = os.pipe()
    a, b = socket.socketpair()
    try:
        for value in (f"{r}:{os.getpid()}:{digest}",  # not a socket, under the right pid and key
                      f"{a.fileno()}:1:{digest}",  # a socket, but the variable was another process's
                      f"{a.fileno()}:{os.getpid()}:{'0' * 32}"):  # ours, for another import-time environment
            monkeypatch.setenv(_preload.CONN_VAR, value)
            assert _preload._inherited(key) is None
        os.fstat(r)  # still open: a descriptor that is not ours is never closed
        assert a.fileno() >= 0
    finally:
        os.close(r)
        os.close(w)
        a.close()
        b.close()


def test_two_children_do_not_share_random_state():
    a, seen_a = start("exit", "0")
    b, seen_b = start("exit", "0")
    assert a.wait(timeout=30) == b.wait(timeout=30) == 0
    assert seen_a["random"] != seen_b["random"]


def test_only_this_python_dash_m_is_forked():
    assert forkable([sys.executable, "-m", "x.y", "a"]) == "x.y"
    assert forkable([sys.executable, "-c", "pass"]) is None
    assert forkable(["/usr/bin/env", "-m", "x"]) is None
    proc = preloaded_popen([sys.executable, "-c", "print('plain')"], stdout=subprocess.PIPE, text=True)
    assert isinstance(proc, subprocess.Popen) and proc.communicate(timeout=60)[0] == "plain\n"


def test_a_prestarted_helper_serves_the_next_child_and_the_opt_out_starts_children_plainly(monkeypatch):
    from harness.workers import _preload

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_DYNAMIC": "prestart-test"}
    prestart(env=env)
    helper = _preload._HELPERS[_preload._key(sys.executable, env)]
    proc, seen = start("exit", "0", env_extra={"OMP_NUM_THREADS": "1", "MKL_DYNAMIC": "prestart-test"})
    assert proc._helper is helper and seen["preloaded"] and proc.wait(timeout=30) == 0
    monkeypatch.setenv("HARNESS_NO_PRELOAD", "1")
    plain = preloaded_popen([sys.executable, "-m", MODULE, "exit", "0"], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    assert isinstance(plain, subprocess.Popen) and json.loads(plain.stdout.readline())["preloaded"] is False
    assert plain.wait(timeout=60) == 0
