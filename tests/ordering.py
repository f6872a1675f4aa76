"""The order the root conftest.py hands test files to the pytest-xdist workers in: longest first, by each file's
seconds in an earlier run of the README's test command (tests/durations.json, written by
scripts/test_durations.py)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DURATIONS", "file_order", "read_durations"]

DURATIONS = Path(__file__).with_name("durations.json")


def read_durations(path: Path) -> dict[str, float]:
    """{test file: seconds}; empty where the table is absent (the order then falls back to the slow marker)."""
    return json.loads(path.read_text())["seconds"] if path.is_file() else {}


def file_order(items: list, durations: dict[str, float]) -> list:
    """`items` with each file's tests kept together and in order, the files longest first. Each worker takes the
    next file when it is nearly done, so the longest going first leaves the short ones to even out the end (longest
    processing time first, the classic rule for splitting jobs over machines). In collection order a worker that
    drew a 20-s file last ran it alone for 20 s after the other had finished. A file not in the table (new since
    it was written) goes before all others where it holds a test marked slow, else after them (as 0 s)."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}

    def seconds(item) -> float:
        file = item.nodeid.split("::")[0]
        return durations.get(file, float("inf") if file in slow else 0.0)

    return sorted(items, key=lambda item: -seconds(item))
