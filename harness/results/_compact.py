"""Compaction: a run's part files merged into one file per table when the run ends.

While a run measures, every finished measurement is its own part file (`<table>/part-NNNNN.parquet`), so a run that
is killed keeps what finished. When it ends, the parts of each table are merged into `<table>/merged.parquet`: one
file per table instead of one per measurement per table. The merged file lists the parts it holds, in order, with
their row counts (metadata `harness_parts`), so a reader splits it back into the same parts and reads the run
exactly as it read the parts (each part's measurements once, a missing or repeated part still noticed).

Crash safety, step by step: the merged file is written beside the parts under a temporary name and renamed into
place, and only then are the parts it lists removed. Killed before the rename: the parts are all there (the
temporary is hidden and ignored). Killed after it: a part still on disk that the merged file lists is skipped by
readers and removed by the next compaction. So every moment leaves a readable run holding every finished part once.
A part that cannot be read (cut short, foreign) is left where it is, for the reader to name.

The values are not rewritten: parts of one schema version are concatenated as stored and the merged file keeps that
version (a run of v3 stays v3, and is migrated on read as its parts were); only parts of different versions (a
`bench burst --into` of an older run) are migrated to the current version first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.results._atomic import atomic_path
from harness.results._schema import SCHEMA_VERSION, TABLES, file_version, migrate, table_schema

__all__ = ["MERGED", "PARTS_KEY", "PART_PATTERN", "compact_run", "compact_table", "expand_run", "merged_parts"]

# The part names the store writes: RunWriter's and append_rows' part-NNNNN, `bench burst --into`'s
# part-burst-<stamp>-NNN.
PART_PATTERN = re.compile(r"part-(\d{5}|burst-\d{14}[0-9a-f]{4}-\d{3})\.parquet")
MERGED = "merged.parquet"
PARTS_KEY = b"harness_parts"


def merged_parts(folder: Path) -> list[tuple[str, int]]:
    """(part name, rows) of every part `<folder>/merged.parquet` holds, in order; [] without one (or unreadable)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(folder) / MERGED
    if not path.is_file():
        return []
    try:
        meta = pq.read_schema(path).metadata or {}
        return [(str(n), int(r)) for n, r in json.loads(meta[PARTS_KEY])]
    except (OSError, pa.ArrowInvalid, KeyError, ValueError, TypeError):
        return []


def _loose(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and PART_PATTERN.fullmatch(f.name))


def compact_table(folder: Path, table: str) -> int:
    """Merge the parts of one table folder into its merged file; returns how many part files were removed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    if not folder.is_dir():
        return 0
    held = merged_parts(folder)
    if (folder / MERGED).is_file() and not held:
        return 0  # a merged file that cannot be read: left alone, for the reader to name; nothing is merged into it
    names = {n for n, _ in held}
    loose = _loose(folder)
    stale = [f for f in loose if f.name in names]  # merged by a compaction killed before it removed them
    pieces: list[tuple[list[tuple[str, int]], object, int]] = []  # (parts, arrow, version)
    if held:
        arrow = pq.read_table(folder / MERGED)
        pieces.append((held, arrow, file_version(arrow.schema.metadata)))
    fresh = []
    for f in (f for f in loose if f.name not in names):
        try:
            arrow = pq.read_table(f)
        except (OSError, pa.ArrowInvalid):
            continue  # cut short: stays a part, and the reader warns about it
        version = file_version(arrow.schema.metadata)
        if version == 0 or version > SCHEMA_VERSION or (arrow.schema.metadata or {}).get(
                b"harness_table", table.encode()) != table.encode():
            continue  # not a harness part of this table, or newer than this harness: stays, the reader says so
        pieces.append(([(f.name, arrow.num_rows)], arrow, version))
        fresh.append(f)
    if fresh:
        versions = {v for _, _, v in pieces}
        arrows = [a.replace_schema_metadata(None) for _, a, _ in pieces]
        meta = dict(pieces[0][1].schema.metadata or {})
        same = len(versions) == 1 and all(a.schema.equals(arrows[0].schema) for a in arrows)
        if not same:  # parts of different versions (or layouts): each migrated to the current schema
            want = table_schema(table)
            arrows = [migrate(table, a, v).select(want.names).cast(want) for (_, _, v), a in zip(pieces, arrows)]
            meta = dict(want.metadata)
        parts = [p for ps, _, _ in pieces for p in ps]
        meta[PARTS_KEY] = json.dumps(parts).encode()
        merged = pa.concat_tables(arrows).replace_schema_metadata(meta)
        with atomic_path(folder / MERGED) as tmp:  # a full disk or a signal leaves the parts as they were
            pq.write_table(merged, tmp)
    removed = 0
    for f in [*stale, *fresh]:
        f.unlink(missing_ok=True)
        removed += 1
    return removed


def compact_run(run_dir: Path) -> int:
    """Merge the parts of every table of one run directory (not of runs under it, such as `gpus/`); returns how
    many part files were removed. The run reads the same before and after."""
    run_dir = Path(run_dir)
    return sum(compact_table(run_dir / t, t) for t in TABLES if t != "runs")


def expand_run(run_dir: Path) -> int:
    """The inverse of `compact_run`: every merged file split back into the part files it lists (as stored, version
    and metadata kept), then removed; returns how many parts were written. For editing or removing one measurement
    of a finished run by hand (tests do), and to check a compaction. Crash-safe the other way round: the parts are
    written before the merged file goes, and a reader skips a part that the merged file still lists."""
    import pyarrow.parquet as pq

    written = 0
    for table in (t for t in TABLES if t != "runs"):
        folder = Path(run_dir) / table
        held = merged_parts(folder)
        if not held:
            continue
        arrow = pq.read_table(folder / MERGED)
        meta = {k: v for k, v in (arrow.schema.metadata or {}).items() if k != PARTS_KEY}
        offset = 0
        for name, rows in held:
            with atomic_path(folder / name) as tmp:
                pq.write_table(arrow.slice(offset, rows).replace_schema_metadata(meta), tmp)
            offset += rows
            written += 1
        (folder / MERGED).unlink()
    return written
