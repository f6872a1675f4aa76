"""Write tests/durations.json: each test file's seconds in one run of the README's test command, which the root
conftest.py uses to hand files to the pytest-xdist workers longest first (tests/ordering.py).

    .venv/bin/python scripts/test_durations.py            # runs the suite (about 4 minutes) and writes the table
    .venv/bin/python scripts/test_durations.py -- -x      # extra pytest arguments after --

A file's seconds are the sum of its tests' setup, call and teardown, as its worker ran them beside the other
worker (so a file whose tests wait on subprocesses counts what it took there, not on an idle machine). A stale
table only makes the order less good; a file missing from it goes first where it has a test marked slow.
Re-run it when a file's time changes by more than a few seconds. A failed test's seconds count as they ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "durations.json"  # tests/ordering.py's DURATIONS (not imported: tests/ is no package)
README_COMMAND = ["-q", "-n", "2", "--dist", "loadfile"]


class Recorder:
    """A pytest plugin: the seconds of every phase of every test, summed per file (in the controlling process,
    which under pytest-xdist receives each worker's reports)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration


def table(seconds: dict[str, float]) -> dict:
    """The file's content: files longest first, to 0.1 s (finer is noise between runs)."""
    ordered = sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"what": "each test file's seconds in one run of the README's test command (scripts/test_durations.py); "
                    "the root conftest.py hands files to the workers longest first",
            "seconds": {file: round(s, 1) for file, s in ordered}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    recorder = Recorder()
    code = pytest.main([*README_COMMAND, "-p", "no:cacheprovider", *args.pytest_args], plugins=[recorder])
    if not recorder.seconds:
        print(f"test_durations: no test ran (exit status {int(code)}); {OUT} is left as it was", file=sys.stderr)
        return int(code) or 1
    OUT.write_text(json.dumps(table(recorder.seconds), indent=1) + "\n")
    total = sum(recorder.seconds.values())
    print(f"test_durations: {len(recorder.seconds)} files, {total:.0f} s in all, written to {OUT} (the run's exit "
          f"status: {int(code)})")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
