from __future__ import annotations

import json

__all__ = ["JsonLinesChannel"]


class JsonLinesChannel:
    """One JSON object per line between an orchestrator and a measuring worker process.

    Workers measure in a process of their own (one per revision, one per GPU); this is how they hear
    "go" and answer with rows. A closed input reads as {"op": "stop"}, so an orchestrator that died
    stops its workers instead of leaving them blocked.
    """

    def __init__(self, out, inp) -> None:
        self._out, self._in = out, inp

    def send(self, **message) -> None:
        self._out.write(json.dumps(message, default=str) + "\n")
        self._out.flush()

    def receive(self) -> dict:
        line = self._in.readline() if self._in is not None else ""
        return json.loads(line) if line.strip() else {"op": "stop"}
