"""How a run ends: stop signals turned into an exception, the final status write shielded from them, and a
per-launch watchdog.

`stop_signals()` is the one place a run hears SIGINT, SIGTERM and SIGHUP. In the main thread, for each
signal still at its default disposition, it installs a handler that raises `RunStopped(signum)` once; a
signal that arrives while the run is ending (or inside `deferred()`, e.g. during the status write) is only
recorded, so a second Ctrl-C 1 ms after the first cannot leave the run `running` or a stray temp file. A
third signal while ending restores the default and re-sends it: the way out when clean-up itself hangs. Only
signals more than `BURST_S` after the first count toward it: a burst (a kernel that signals the run on every
call) is one signal.
A handler somebody else installed (a measuring worker's: harness.workers.stop_on_signals) is left alone.
Outside the main thread nothing is installed: Python delivers signals to the main thread only.

`Watchdog` bounds one stretch of kernel code (a gate call, one chunk) with SIGALRM (`setitimer`). What it
can stop: Python-level work that returns to the interpreter (a `time.sleep`, a Python loop, a kernel
launch that returns while the GPU is still busy). What it cannot stop: one C call that never returns (a
GPU kernel that spins forever inside a synchronize, a deadlocked driver call); the alarm's exception is
raised when that call returns, so the process hangs there. That is why a user's kernel runs in a process
of its own (`runner._isolation`): its watchdog reports each bounded stretch to the parent (`on_limit`),
and the parent kills a child that outlasts one by more than a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from harness.errors import KernelTimeout, RunStopped

__all__ = ["StopSignals", "Watchdog", "stop_signals"]

STOP_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


def _is_default(signum: int) -> bool:
    current = signal.getsignal(signum)
    if signum == signal.SIGINT:
        return current in (signal.default_int_handler, signal.SIG_DFL)
    return current in (signal.SIG_DFL, None)


# Signals within this long of the one that stopped the run count as that one for the way out (the third signal):
# a burst (a kernel signalling the run from its own process on every call, a script's repeated kill) must not
# kill the run's process while it writes its status; a person waiting on a hung clean-up presses again later.
BURST_S = 1.0


@dataclass(kw_only=True)
class StopSignals:
    """The state of one run's stop handling (see the module docstring)."""

    installed: tuple[int, ...] = ()
    pending: list[int] = field(default_factory=list)
    stopping: bool = False
    _depth: int = 0
    _since: float | None = None  # when stopping began (monotonic s)
    _late: int = 0  # signals recorded while stopping, more than BURST_S after it began

    def _stop(self) -> None:
        self.stopping = True
        if self._since is None:
            self._since = time.monotonic()

    def _handler(self, signum, frame) -> None:
        if self.stopping or self._depth:
            self.pending.append(signum)
            if self.stopping and self._since is not None and time.monotonic() - self._since >= BURST_S:
                self._late += 1
            if self.stopping and self._late >= 2:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        self._stop()
        raise RunStopped(signum)

    @contextlib.contextmanager
    def deferred(self):
        """Signals inside are recorded and raised on leaving (unless the run is already ending)."""
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
        if not self._depth and self.pending and not self.stopping:
            self._stop()
            raise RunStopped(self.pending[0])

    def ending(self) -> None:
        """From now on signals are recorded only: the run is writing its last status."""
        self._stop()


@contextlib.contextmanager
def stop_signals():
    """Install the stop handlers for the duration of a run (a no-op outside the main thread)."""
    state = StopSignals()
    saved = {}
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            if _is_default(signum):
                saved[signum] = signal.signal(signum, state._handler)
    state.installed = tuple(saved)
    try:
        yield state
    finally:
        for signum, old in saved.items():
            signal.signal(signum, old)


class _Alarm(BaseException):
    """Raised by the SIGALRM handler; a BaseException so a kernel's `except Exception` cannot swallow it."""


class Watchdog:
    """`with watchdog.limit(stage=...)` raises KernelTimeout when the body outlasts `timeout_s`.

    Active only in the main thread and where SIGALRM is unused (pytest-timeout, a user's own alarm keep
    theirs); `available` says which, and `note` says why not.
    """

    def __init__(self, timeout_s: float | None, *, on_limit=None) -> None:
        self.timeout_s = timeout_s
        # on_limit(what, timeout_s) when an outermost limit starts, on_limit(None, None) when it ends: how a
        # kernel's own process tells its parent which stretch of kernel code is running, and for how long at most.
        self._on_limit = on_limit
        self._depth = 0
        main = threading.current_thread() is threading.main_thread()
        has_alarm = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
        free = has_alarm and main and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
        self.available = bool(timeout_s) and free
        self.note = "" if self.available or not timeout_s else (
            "launch watchdog off: " + ("no SIGALRM on this platform" if not has_alarm else
                                       "not in the main thread" if not main else "SIGALRM is in use by another handler"))
        self._armed = False

    @staticmethod
    def _ring(signum, frame) -> None:
        raise _Alarm()

    @contextlib.contextmanager
    def limit(self, *, what: str):
        """Bound the body; `what` names the stretch in the error ("its first call", "a chunk")."""
        if self._on_limit is None or self._depth:
            with self._limit(what=what):
                yield
            return
        self._depth += 1
        self._on_limit(what, self.timeout_s)
        try:
            with self._limit(what=what):
                yield
        finally:
            self._depth -= 1
            self._on_limit(None, None)

    @contextlib.contextmanager
    def _limit(self, *, what: str):
        if not self.available or self._armed:  # nested: the outer limit already bounds it
            yield
            return
        old = signal.signal(signal.SIGALRM, self._ring)
        self._armed = True
        try:
            signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
            try:
                yield
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _Alarm:
            raise KernelTimeout(f"{what} did not return within the {self.timeout_s:g} s launch timeout") from None
        finally:
            self._armed = False
            signal.signal(signal.SIGALRM, old)
