"""The child's side: its channel to the parent on the real stdout, fd 1 pointed at stderr."""

from __future__ import annotations

import json
import os
import sys

__all__ = ["JsonLinesChannel", "protocol_channel"]


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
