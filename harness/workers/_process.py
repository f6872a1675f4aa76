"""The parent's side: `Worker` starts a child in a session of its own, relays its messages and stderr, waits
on it only with a deadline and ends its whole process group."""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import harness
from harness.workers._deadline import Deadline, WaitExpired, finite
from harness.workers._preload import preloaded_popen
from harness.workers._processes import group_alive, killpg

__all__ = ["Worker", "child_env", "harness_root", "receive_any"]

# How often a wait looks at the child's process while no message comes (an ended leader, a deadline).
_POLL_S = 0.1
# After SIGKILL, how long the leader may take to be reaped: a process in an uninterruptible driver call
# dies only when that call returns. Past it the wait gives up rather than hang the harness.
_REAP_S = 30.0
# How long a relay thread may take to pass on the last lines of a child that has ended.
_JOIN_S = 2.0


def harness_root() -> Path:
    """The folder that holds the `harness` package: put first on a child's PYTHONPATH."""
    return Path(harness.__file__).resolve().parent.parent


def child_env(base: dict[str, str] | None = None, *, root: str | Path | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with `root` (default: this harness's, `harness_root()`)
    first on PYTHONPATH, so a child runs the same harness whatever its working directory."""
    env = dict(os.environ if base is None else base)
    first = str(harness_root() if root is None else root)
    env["PYTHONPATH"] = os.pathsep.join([first] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class Worker:
    """One child process in a session of its own, its messages in a queue, its stderr relayed or logged."""

    def __init__(self, proc: subprocess.Popen, *, events: queue.Queue, key=None, log: Path | None = None,
                 on_stderr: Callable[[str], None] | None = None, tail: int = 15,
                 clock: Callable[[], float] = time.monotonic, drain_s: float = 2.0) -> None:
        self._proc, self.events, self.key = proc, events, self if key is None else key
        self.log, self._on_stderr, self._clock, self.drain_s = log, on_stderr, clock, drain_s
        self._tail: collections.deque = collections.deque(maxlen=tail)
        self._eof = False
        self._ended_at: float | None = None
        self.returncode: int | None = None
        threading.Thread(target=self._read_messages, daemon=True).start()
        self._err_thread = None
        if proc.stderr is not None:
            self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
            self._err_thread.start()

    @classmethod
    def start(cls, argv: list[str], *, env: dict | None = None, cwd=None, log: Path | None = None,
              on_stderr: Callable[[str], None] | None = None, events: queue.Queue | None = None, key=None,
              tail: int = 15, clock: Callable[[], float] = time.monotonic, drain_s: float = 2.0) -> Worker:
        """Start `argv`. Its stderr goes to the file `log`, else each line to `on_stderr` (and the last `tail`
        lines are kept either way). Messages go to `events` as (key, message), a queue several workers may
        share (`receive_any`); None as the message is the end of its stdout."""
        stderr_to = open(log, "w", encoding="utf-8") if log is not None else subprocess.PIPE
        try:
            # errors="replace": bytes that are not UTF-8 must not stop a relay thread (its pipe would fill and
            # the child, blocked on its next write, would be taken for hung).
            # python -m children fork from the helper that has torch imported (_preload): milliseconds, not seconds
            proc = preloaded_popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_to, text=True,
                                   bufsize=1, encoding="utf-8", errors="replace", cwd=cwd, env=env,
                                   start_new_session=True)
        finally:
            if log is not None:
                stderr_to.close()  # the child holds its own descriptor of the log
        return cls(proc, events=queue.Queue() if events is None else events, key=key, log=log, on_stderr=on_stderr,
                   tail=tail, clock=clock, drain_s=drain_s)

    @property
    def pid(self) -> int:
        return self._proc.pid

    # -- relay ---------------------------------------------------------------------------------------
    def _read_messages(self) -> None:
        for line in self._proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue  # not a message: the child sends everything else to stderr
            if isinstance(msg, dict):
                self.events.put((self.key, msg))
        self.events.put((self.key, None))

    def _read_stderr(self) -> None:
        for line in self._proc.stderr:
            self._tail.append(line.rstrip("\n")[:300])
            if self._on_stderr is not None:
                try:
                    self._on_stderr(line)
                except Exception:  # noqa: BLE001 - a closed stderr must not stop the drain (the pipe would fill)
                    pass

    def tail(self, n: int) -> list[str]:
        """The last `n` lines the child wrote to stderr."""
        if self.log is not None:
            try:
                return self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-n:]
            except OSError:
                return []
        return list(self._tail)[-n:]

    def send(self, message: dict) -> bool:
        """One message on the child's stdin; False when it is gone (its end then says why)."""
        try:
            self._proc.stdin.write(json.dumps(message, default=str) + "\n")
            self._proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def receive(self, *, timeout: float) -> dict | None:
        """The child's next message within `timeout` s, or None at the end of its stdout (then for good).
        Raises WaitExpired at the deadline. Only for a worker with a queue of its own."""
        deadline = Deadline(timeout, clock=self._clock)
        while not self._eof:
            try:
                _, msg = self.events.get(timeout=min(_POLL_S, deadline.left()))
            except queue.Empty:
                self.drain_check()
                if deadline.expired():
                    raise WaitExpired(f"no message within {deadline.seconds:g} s") from None
                continue
            self._eof = msg is None
            return msg
        return None

    def drain_check(self) -> None:
        """A leader that has ended while its stdout is still open (a process it started holds the pipe):
        after `drain_s` for its last lines, what is left of its group is killed, so its end arrives."""
        if self._eof or self._proc.poll() is None:
            return
        now = self._clock()
        if self._ended_at is None:
            self._ended_at = now
        elif now - self._ended_at > self.drain_s:
            self.kill(grace_s=0.0)
            # Its end, now: a holder of the pipe outside its group (a session of its own) may keep it open.
            self._eof = True
            self.events.put((self.key, None))

    # -- the process ---------------------------------------------------------------------------------
    def poll(self) -> int | None:
        return self._proc.poll()

    def signal(self, signum: int) -> None:
        """`signum` to the leader alone (a stop it handles, passed on once), never to its group."""
        if self._proc.poll() is None:
            try:
                self._proc.send_signal(signum)
            except (ProcessLookupError, OSError):
                pass

    def wait(self, *, timeout: float) -> int | None:
        """The leader's return code once it ends within `timeout` s, else None (it is left running)."""
        try:
            self.returncode = self._proc.wait(timeout=finite(timeout))
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def kill(self, *, grace_s: float) -> int | None:
        """End the whole process group: SIGTERM, SIGKILL after `grace_s` for what is left (0: SIGKILL at
        once); the leader is reaped. Its return code (None only if it would not die within _REAP_S)."""
        pgid = self._proc.pid  # the leader of its own session: its pid is the group's id
        if finite(grace_s) > 0 and group_alive(pgid):
            killpg(pgid, signal.SIGTERM)
            deadline = Deadline(grace_s)
            while group_alive(pgid) and not deadline.expired():
                time.sleep(min(0.05, deadline.left()))
        if group_alive(pgid):
            killpg(pgid, signal.SIGKILL)
        if self._proc.poll() is None:
            self._proc.kill()  # a leader that left its group (setsid of its own) is still ours to end
        rc = self.wait(timeout=_REAP_S)
        deadline = Deadline(_REAP_S)  # SIGKILL is delivered, not awaited: the group is gone when this returns
        while group_alive(pgid) and not deadline.expired():
            time.sleep(0.01)
        self._close()
        return rc

    def finish(self, *, wait_s: float, grace_s: float) -> int | None:
        """End it politely: EOF on its stdin ("stop"), up to `wait_s` for it to end, then `kill(grace_s)`.
        Whatever it left behind in its group is ended too. Safe to call again."""
        self.close_input()
        if self.wait(timeout=wait_s) is None or group_alive(self._proc.pid):
            return self.kill(grace_s=grace_s)
        self._close()
        return self.returncode

    def close_input(self) -> None:
        """EOF on the child's stdin: "stop" to a child reading its orders there."""
        try:
            self._proc.stdin.close()
        except (OSError, ValueError):
            pass

    def _close(self) -> None:
        self.close_input()
        if self._err_thread is not None:
            self._err_thread.join(timeout=_JOIN_S)  # its last lines, for the text of its end


def receive_any(events: queue.Queue, *, timeout: float, workers=()) -> tuple:
    """(key, message) of the next message of any worker sharing `events`; WaitExpired at the deadline.
    `workers` are checked for a leader that ended with its pipe held (`Worker.drain_check`)."""
    deadline = Deadline(timeout)
    while True:
        try:
            return events.get(timeout=min(_POLL_S, deadline.left()))
        except queue.Empty:
            for w in workers:
                w.drain_check()
            if deadline.expired():
                raise WaitExpired(f"no message within {deadline.seconds:g} s") from None
