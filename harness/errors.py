"""Errors a user can act on.

Every error raised for bad input, a missing dependency or an unusable machine is a `HarnessError`
whose message is one paragraph: what was wrong and how to fix it. The CLI prints the message and
exits with status 2; it never prints a traceback for these.
"""

from __future__ import annotations

import signal
from enum import IntEnum

__all__ = [
    "ExitCode",
    "HarnessError",
    "ConfigError",
    "DeviceError",
    "DeviceBusyError",
    "TelemetryError",
    "KernelError",
    "UnknownKernelError",
    "UnsupportedInputError",
    "GateFailure",
    "ResultsError",
    "CaptureError",
    "InputError",
    "KernelTimeout",
    "RunStopped",
    "StopRequested",
    "ResultsWarning",
]


class HarnessError(Exception):
    """Base class: a problem the user can fix, described in one paragraph."""


class ConfigError(HarnessError):
    """A setting is out of range or inconsistent with another."""


class InputError(HarnessError):
    """Inputs are malformed: wrong shapes, NaN or Inf values, an unknown distribution."""


class DeviceError(HarnessError):
    """The requested device does not exist or cannot be used."""


class DeviceBusyError(DeviceError):
    """Another compute process is on the GPU; measuring would be meaningless."""


class TelemetryError(HarnessError):
    """A telemetry backend cannot start (library missing, no permission, unsupported device)."""


class KernelError(HarnessError):
    """A kernel cannot be loaded or run."""


class UnknownKernelError(KernelError):
    """No kernel of that name is registered."""


class UnsupportedInputError(KernelError):
    """The kernel does not support the dtype, head dims, device or shape asked for."""


class GateFailure(KernelError):
    """The kernel's output failed the correctness gate; it is not timed."""


class ResultsError(HarnessError):
    """A results directory cannot be written or read."""


class CaptureError(HarnessError):
    """A model capture cannot be made or loaded."""


class KernelTimeout(KernelError):
    """A kernel's launch (its first call in the gate, or one chunk) outlasted the watchdog; it was stopped."""


class RunStopped(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT, SIGTERM, SIGHUP): finished measurements are kept.

    A KeyboardInterrupt, so every caller that already ends cleanly on Ctrl-C ends cleanly on a stop, and
    no `except Exception` in a kernel swallows it. `signum` names the signal; a CLI exits 128 + signum.
    """

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        self.signal_name = signal.Signals(self.signum).name
        super().__init__(f"stopped by {self.signal_name}")


class StopRequested(KeyboardInterrupt):
    """The run was stopped from outside for a named reason (the orchestrator of `bench commits` after another
    revision's worker died): finished measurements are kept and the run is marked incomplete with `reason`.
    A KeyboardInterrupt for the same reason as RunStopped."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ResultsWarning(UserWarning):
    """A file in a run directory that the store did not write (a copy, a stray file): it is ignored."""


class ExitCode(IntEnum):
    """The exit status of every `bench` command (README: Exit codes). CI reads 1 as "slower", so nothing
    but a verdict may return it."""

    OK = 0
    REGRESSION = 1  # a verdict only: slower beyond --fail-on-slowdown, or repro --fail-on-diff found differences
    USAGE = 2  # a user error: a HarnessError (bad input, missing dependency, unusable machine); one paragraph
    INTERNAL = 3  # a bug: one line names the file holding the traceback
    RUN_FAILED = 4  # the run ended `failed`: nothing was timed
    RUN_INCOMPLETE = 5  # the run ended `incomplete`: it stopped early (what finished is kept)
    UNRESOLVED = 6  # a gate could not judge: a row (or every row) not resolved at the threshold; no pass
    SIGHUP = 129  # hung up (the terminal closed, `kill -HUP`): 128 + SIGHUP
    SIGINT = 130  # interrupted (Ctrl-C): 128 + SIGINT
    SIGTERM = 143  # terminated: 128 + SIGTERM
