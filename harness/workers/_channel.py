"""The child's side: its channel to the parent on the real stdout, fd 1 pointed at stderr, and the stop signals
that end its run as Ctrl-C does."""

from __future__ import annotations

import json
import os
import signal
import sys

from harness.errors import RunStopped

__all__ = ["JsonLinesChannel", "protocol_channel", "stop_on_signals"]


class JsonLinesChannel:
    """One JSON object per line between a parent and its measuring child, seen from the child.

    A closed input reads as {"op": "stop"}, so a parent that died stops its children instead of leaving
    them blocked.
    """

    def __init__(self, out, inp) -> None:
        self._out, self._in = out, inp

    def send(self, **message) -> None:
        self._out.write(json.dumps(message, default=str) + "\n")
        self._out.flush()

    def receive(self) -> dict:
        line = self._in.readline() if self._in is not None else ""
        return json.loads(line) if line.strip() else {"op": "stop"}


def protocol_channel(inp=sys.stdin) -> JsonLinesChannel:
    """In a child: the channel to its parent on the real stdout, with fd 1 pointed at stderr from now on, so
    a kernel that prints (or a library that writes to fd 1) cannot write into the messages."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)
    return JsonLinesChannel(out, inp)


def _stopped(signum, frame):
    raise RunStopped(signum)


def stop_on_signals(signals=(signal.SIGTERM, signal.SIGHUP)) -> None:
    """In a child's main thread: each of `signals` (scancel, a job's time limit, a plain `kill`, the parent's
    kill of its group, the parent passing on its own stop) raises RunStopped, so the run ends as on Ctrl-C:
    finished measurements kept and the run `incomplete`, the signal named, instead of the process vanishing
    with its run `running`."""
    for sig in signals:
        signal.signal(sig, _stopped)
