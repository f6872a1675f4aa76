"""stdout and stderr of a `bench` process: what a closed reader or a narrow encoding may not do to a run.

`guard_streams()` is called once by `harness.cli.main`, before any command runs.
"""

from __future__ import annotations

import sys

__all__ = ["guard_streams"]


class _ReaderSafe:
    """A text stream that stops writing when its reader has gone (`bench sustained | head -1`): a broken pipe
    ends the printing, never the run, which goes on measuring and writes its results and its status. The
    stream's file descriptor is pointed at /dev/null then, so Python's flush at exit cannot fail either."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._went_away()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._went_away()

    def _went_away(self) -> None:
        import os

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
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, _ReaderSafe):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
        setattr(sys, name, _ReaderSafe(stream))
