"""Child processes forked from a process that has imported torch already (a "zygote").

Every kernel process of a run, every revision of `bench commits` and every GPU's worker is `python -m
harness...`, and each of them imported torch afresh: 1.2 s on an idle CPU, 2-3 s on a loaded one, before its
first line of work (a run of ten plain functions under the default isolation paid it ten times). Here one
helper process per parent imports torch once and forks each child from it, so a child starts in milliseconds. A
child that is itself a parent (a `bench` command run by a test or a script, a `bench commits` revision, a nested
pytest session) forks its own children from the same helper, through a connection the helper gave it
(HARNESS_PRELOAD_CONN), where its import-time environment is the helper's; else it starts a helper of its own.

What a child sees is what `subprocess.Popen([sys.executable, "-m", module, *args], ...)` gives it: its own
session (start_new_session), its stdin/stdout/stderr, working directory, environment, `sys.argv` and
`sys.path` (its PYTHONPATH, then the interpreter's own entries), `__main__` run by runpy as `-m` does, and
its exit status (the code of sys.exit, 1 for an uncaught exception, minus the signal that killed it). What it
shares with the helper: the modules the helper imported (torch and what torch imports; nothing of the
harness, so a `bench commits` revision still imports its own harness), and nothing else: the helper never
initialises a device (CUDA is initialised in the child, after the fork, as in a fresh process), runs no
threads, and numpy's and Python's random states are reseeded in each child. Environment variables that torch
reads when it is imported (none that the harness sets per child: CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES
are read at device initialisation, thread counts are set explicitly) are the helper's.

`PreloadedPopen` is used only where argv is exactly that form and the interpreter is this one; anything else,
or a helper that cannot start, is an ordinary `subprocess.Popen`, which starts the same child more slowly.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["PreloadedPopen", "preloaded_popen", "forkable", "prestart"]

# What the helper imports before it forks: the libraries every child imports first and that take seconds.
PRELOAD = ("torch",)
# The helper's program (run by its path, never imported: it must not import the harness, whose copy a
# `bench commits` revision brings itself).
_HELPER = Path(__file__).with_name("_helper_main.py")


def forkable(argv: list[str], *, python: str = sys.executable) -> str | None:
    """The module of `argv` when it is `[this interpreter, "-m", module, ...]`, else None."""
    # The path as given, not resolved: two virtual environments share one interpreter binary, not site-packages.
    if len(argv) >= 3 and argv[1] == "-m" and os.path.abspath(argv[0]) == os.path.abspath(python):
        return argv[2]
    return None


class _Helper:
    """This process's connection to a zygote: to one it started on first use (`start`), or to the one that forked it
    (`_inherited`). The zygote ends when every connection to it has closed."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()
        self._replies: list = []
        self._cond = threading.Condition()
        self._codes: dict[int, int] = {}
        self.lost = False
        threading.Thread(target=self._read, daemon=True, name="harness-zygote").start()

    @classmethod
    def start(cls, python: str, env: dict) -> "_Helper":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # its exit is its own affair: it ends when every connection to it has closed (ours at this process's end)
        subprocess.Popen([python, str(_HELPER), str(theirs.fileno()), ",".join(PRELOAD)],
                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        theirs.close()
        return cls(ours)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            while len(buf) >= 4:
                (n,) = struct.unpack("!I", buf[:4])
                if len(buf) < 4 + n:
                    break
                msg, buf = json.loads(buf[4:4 + n]), buf[4 + n:]
                with self._cond:
                    if "exit" in msg:
                        self._codes[msg["exit"]] = msg["code"]
                    else:
                        self._replies.append(msg)
                    self._cond.notify_all()
        with self._cond:
            self.lost = True
            self._cond.notify_all()

    def fork(self, request: dict, fds: list[int], *, timeout: float = 60.0) -> int:
        data = json.dumps(request).encode()
        with self._send_lock:
            with self._cond:
                if self.lost:
                    raise OSError("the preloaded helper process is gone")
            socket.send_fds(self._sock, [struct.pack("!I", len(data))], fds)
            self._sock.sendall(data)
            end = time.monotonic() + timeout
            with self._cond:
                while not self._replies and not self.lost:
                    if not self._cond.wait(timeout=max(0.0, end - time.monotonic())):
                        break
                if not self._replies:
                    raise OSError("the preloaded helper process did not answer")
                reply = self._replies.pop(0)
        if "error" in reply:
            raise OSError(reply["error"])
        return int(reply["pid"])

    def code(self, pid: int, timeout: float | None) -> int | None:
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while pid not in self._codes:
                if self.lost:
                    return self._orphan_code(pid)
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(timeout=0.1 if left is None else min(left, 0.1))
            return self._codes[pid]

    @staticmethod
    def _orphan_code(pid: int) -> int | None:
        # The helper died (killed from outside): its children are init's now and their status is lost. A child
        # still alive is waited for by its pid; an ended one reads as killed.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return -signal.SIGKILL
        except PermissionError:
            pass
        return None


# Variables an interpreter or torch may read while starting or importing (thread pools, allocators, library
# paths, the interpreter's own): a child whose values differ gets a helper started with its own. The rest
# (PYTHONPATH, the device masks read when a device is initialised, COLUMNS, the harness's own) are the child's
# alone, set after the fork.
_IMPORT_TIME = ("OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "LD_", "PYTHON", "CUDA_",
                "CUBLAS", "CUDNN", "NCCL_", "HIP_", "HSA_", "ROCM_", "ROCR_", "NVIDIA_", "MALLOC_")
_CHILD_ONLY = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# Helpers a process keeps at most (each holds torch in memory, 0.3-0.5 GB); past it a child starts as Popen does.
MAX_HELPERS = 3

_HELPERS: dict[tuple, _Helper] = {}
_HELPERS_LOCK = threading.Lock()
# Set by the helper in each child it forks: "FD:PID:KEY", the child's connection to it (see _helper_main).
CONN_VAR = "HARNESS_PRELOAD_CONN"


def _key(python: str, env: dict) -> tuple:
    return python, tuple(sorted((k, v) for k, v in env.items() if k.startswith(_IMPORT_TIME) and k not in _CHILD_ONLY))


def _digest(key: tuple) -> str:
    """The key as the helper carries it to a child (a request's "key"): short, and no environment values in clear."""
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]


def _inherited(key: tuple) -> _Helper | None:
    """The connection this process was forked with, when the helper behind it serves `key`; used once (the
    variable is removed, so a helper started later for another key never takes it)."""
    fd, pid, digest = (os.environ.get(CONN_VAR, "").split(":") + ["", "", ""])[:3]
    if not fd.isdigit() or pid != str(os.getpid()) or digest != _digest(key):
        return None  # not forked by a helper, or inherited from a parent that was (another pid), or another key
    del os.environ[CONN_VAR]
    try:
        sock = socket.socket(fileno=int(fd))
    except OSError:
        return None  # closed by this process since (e.g. a close of every descriptor)
    if sock.family != socket.AF_UNIX:
        sock.detach()  # the number is another file's now: not ours to close
        return None
    return _Helper(sock)


def _helper(python: str, env: dict) -> _Helper:
    key = _key(python, env)
    with _HELPERS_LOCK:
        if key not in _HELPERS:
            if len(_HELPERS) >= MAX_HELPERS:
                raise OSError("this process keeps no more preloaded helpers")
            _HELPERS[key] = _inherited(key) or _Helper.start(python, env)
        h = _HELPERS[key]
        if h.lost:  # ended, or refused to serve (a device initialised at import): never started again
            raise OSError("the preloaded helper process is gone")
        return h


class PreloadedPopen:
    """The part of `subprocess.Popen` the harness's workers use, for a child forked by the helper."""

    def __init__(self, module: str, args: list[str], *, stdin=None, stdout=None, stderr=None, text: bool = False,
                 bufsize: int = -1, encoding: str | None = None, errors: str | None = None, cwd=None,
                 env: dict | None = None, start_new_session: bool = False, python: str = sys.executable) -> None:
        self.args = [python, "-m", module, *args]
        self.returncode: int | None = None
        ends, ours = [], []  # the child's descriptors (closed here once sent); ours to wrap
        try:
            child_fds = []
            for which, spec in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
                if spec == subprocess.PIPE:
                    r, w = os.pipe()
                    mine, theirs = (w, r) if which == "stdin" else (r, w)
                    ends.append(theirs)
                    ours.append((which, mine))
                    child_fds.append(theirs)
                elif spec == subprocess.DEVNULL:
                    fd = os.open(os.devnull, os.O_RDWR)
                    ends.append(fd)
                    child_fds.append(fd)
                elif spec is None:
                    child_fds.append({"stdin": 0, "stdout": 1, "stderr": 2}[which])
                else:  # a file object or a descriptor
                    child_fds.append(spec if isinstance(spec, int) else spec.fileno())
            env = dict(os.environ if env is None else env)
            request = {"module": module, "args": list(args), "cwd": os.fspath(cwd or os.getcwd()), "env": env,
                       "new_session": bool(start_new_session), "key": _digest(_key(python, env))}
            self._helper = _helper(python, env)
            self.pid = self._helper.fork(request, child_fds)
        except BaseException:
            for _, fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in ends:
                os.close(fd)
        streams = {}
        for which, fd in ours:
            mode = "w" if which == "stdin" else "r"
            if text or encoding or errors:
                streams[which] = open(fd, mode, buffering=bufsize if bufsize != 0 else -1, encoding=encoding,
                                      errors=errors, newline=None if which != "stdin" else "")
            else:
                streams[which] = open(fd, mode + "b", buffering=bufsize)
        self.stdin, self.stdout, self.stderr = (streams.get(n) for n in ("stdin", "stdout", "stderr"))

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._helper.code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._helper.code(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # never a pid the helper has reaped (it may belong to another process now)
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def prestart(*, python: str = sys.executable, env: dict | None = None) -> None:
    """Start the helper for children of `env` (default: this process's environment) now, in the background, so
    that its torch import overlaps the parent's own set-up (worktrees, inputs, telemetry) instead of delaying the
    first child. Nothing happens where no helper may be started; never raises."""
    if os.environ.get("HARNESS_NO_PRELOAD") == "1" or forkable([python, "-m", "-"]) is None:
        return  # children of another interpreter are started the ordinary way: no helper of this one serves them
    try:
        _helper(python, dict(os.environ if env is None else env))
    except OSError:
        pass


_SUPPORTED = {"stdin", "stdout", "stderr", "text", "bufsize", "encoding", "errors", "cwd", "env", "start_new_session"}


def preloaded_popen(argv: list[str], **kwargs):
    """`subprocess.Popen(argv, **kwargs)`, forked from the helper when argv is `[sys.executable, "-m", module,
    ...]` (see the module's docstring), else started as Popen starts it."""
    module = forkable(argv)
    if module is not None and set(kwargs) <= _SUPPORTED and os.environ.get("HARNESS_NO_PRELOAD") != "1":
        try:
            return PreloadedPopen(module, argv[3:], **kwargs)
        except OSError:
            pass  # no helper here: the same child, started the ordinary way
    return subprocess.Popen(argv, **kwargs)
