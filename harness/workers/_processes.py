"""What /proc and the exit status say about a process: its name for a signal, whether it is stopped, its
parent, whether any process of a group is still alive."""

from __future__ import annotations

import os
import signal

__all__ = ["exit_words", "group_alive", "killpg", "parent_of", "process_stopped", "signal_name"]


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def exit_words(rc: int | None) -> str:
    """How a child's process ended, from its return code: "was killed by SIGKILL", "exited with status 3"."""
    if rc is None:
        return "did not end even when killed (stuck in the kernel or a driver call)"
    return f"was killed by {signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, ...); None where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
        return text[text.rindex(")") + 2:].split()
    except (OSError, ValueError):
        return None


def process_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (state T in /proc; False where that cannot be read)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] in ("T", "t")


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    try:
        return int(fields[1]) if fields else None
    except (ValueError, IndexError):
        return None


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` is alive (zombies, which only wait to be reaped, are not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        names = os.listdir("/proc")
    except OSError:
        return True  # no /proc: the signal's answer is all there is
    for name in names:
        if name.isdigit() and (fields := _stat(name)) and len(fields) > 2:
            if fields[2] == str(pgid) and fields[0] not in ("Z", "X", "x"):
                return True
    return False


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
