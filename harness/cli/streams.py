"""stdout and stderr of a `bench` process: what a closed reader or a narrow encoding may not do to a run, what a
kernel in this process may not write into figures on stdout, and how a terminal wraps a sentence.

`guard_streams()` is called once by `harness.cli.main`, before any command runs.
"""

from __future__ import annotations

import errno
import os
import sys

from rich.console import Console

__all__ = ["guard_streams", "figures_fd", "restore_fd1", "terminal_console"]


# What a stream that cannot take more text raises: its reader went away (EPIPE), it is full (/dev/full, a full
# disk under a redirect: ENOSPC), its file descriptor was closed under it (EBADF: kernel code run in this process),
# or the device failed (EIO); a closed file object raises ValueError.
_GONE = (errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO)


def _cannot_write(exc: BaseException) -> bool:
    return isinstance(exc, ValueError) or (isinstance(exc, OSError) and exc.errno in _GONE)


class _ReaderSafe:
    """A text stream that stops writing when its reader has gone (`bench sustained | head -1`), it is full or its
    file descriptor was closed: that ends the printing, never the run, which goes on measuring and writes its
    results and its status (it was marked failed by a progress line written to /dev/full). The stream's file
    descriptor is pointed at /dev/null then, so Python's flush at exit cannot fail either."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as exc:
                if not _cannot_write(exc):
                    raise
                self._went_away()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                if not _cannot_write(exc):
                    raise
                self._went_away()

    def _went_away(self) -> None:
        self.gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def guard_streams() -> None:
    """stdout and stderr for a `bench` process: a character the stream's encoding lacks (PYTHONIOENCODING=ascii,
    a C locale) is written as a backslash escape instead of ending the command with an internal error, and a
    reader that went away stops the printing only (`_ReaderSafe`)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:  # started with that descriptor closed (`bench ... >&-`): printing goes nowhere
            stream = _devnull_on(fd)
            setattr(sys, name, stream)
        if isinstance(stream, _ReaderSafe):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
        setattr(sys, name, _ReaderSafe(stream))


def _devnull_on(fd: int):
    """A text stream on /dev/null at descriptor `fd` (closed at start): a file the command opens later must not
    get descriptor 1 or 2 and receive its prints."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return open(fd, "w", encoding="utf-8", closefd=False)


def figures_fd(out):
    """When stdout is the process's fd 1: the figures get a duplicate of it, and fd 1 points at stderr until they
    are written (`restore_fd1`), so what a kernel in this process writes there (os.write(1, ...), sys.__stdout__,
    C's printf) cannot land in the JSON or CSV. None where stdout is no file descriptor (a test's captured stream)."""
    try:
        if sys.stdout.fileno() != 1:
            return None
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (AttributeError, OSError, ValueError):
        return None
    out._saved_fd1 = saved
    return os.fdopen(os.dup(saved), "w", encoding=getattr(sys.stdout, "encoding", None) or "utf-8")


def restore_fd1(out, figures) -> None:
    """fd 1 is stdout again once the figures are written (`figures_fd`)."""
    saved = getattr(out, "_saved_fd1", None)
    if saved is not None:
        figures.flush()
        os.dup2(saved, 1)
        os.close(saved)
        out._saved_fd1 = None


def terminal_console(**kwargs):
    """A rich Console for a terminal where a line is never left for the terminal to break: a sentence asked for
    unwrapped (`soft_wrap=True`, whole in a log) is wrapped at spaces at the terminal's width, where the terminal
    itself would cut a word or a number (`1.01` / `02`) at its edge."""
    class TerminalConsole(Console):
        def print(self, *objects, soft_wrap=None, **kw):
            return super().print(*objects, soft_wrap=False, **kw)

    return TerminalConsole(**kwargs)
