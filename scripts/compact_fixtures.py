"""Compact the recorded runs under tests/fixtures/ as a run is compacted when it ends: each table's part files
merged into `<table>/merged.parquet` (harness.results.compact_run). Run once when the store learnt to compact;
rerunnable (a compacted run is left as it is).

Every table of every run (runs, measurements, chunks, samples, probes, traces, peaks, ...) is read through the
results reader before and after, and must read back identically, with the same warnings; the script stops at the
first run that does not (the parts it removed are in git). It prints the Parquet file count before and after.

    .venv/bin/python scripts/compact_fixtures.py [DIR ...]     (default: tests/fixtures)
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from harness.results import TABLES, compact_run, read_rows

ROOT = Path(__file__).resolve().parent.parent


def _snapshot(run: Path) -> str:
    """Every row of every table as the reader returns them, and the warnings it gives, as one JSON text."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tables = {t: read_rows(run, t) for t in TABLES}
    return json.dumps({"tables": tables, "warnings": sorted(str(w.message) for w in seen)}, default=str, sort_keys=True)


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [ROOT / "tests" / "fixtures"]
    runs = sorted({p.parent for r in roots for p in r.rglob("runs.parquet")})
    before = sum(1 for r in roots for _ in r.rglob("*.parquet"))
    removed = 0
    for run in runs:
        old = _snapshot(run)
        n = compact_run(run)
        if _snapshot(run) != old:
            print(f"{run}: reads differently after compaction; restore it from git (git checkout -- {run})")
            return 1
        removed += n
        print(f"{run.relative_to(ROOT) if run.is_relative_to(ROOT) else run}: {n} part file(s) merged, reads the same")
    after = sum(1 for r in roots for _ in r.rglob("*.parquet"))
    print(f"{len(runs)} runs; Parquet files: {before} before, {after} after ({removed} parts merged)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
