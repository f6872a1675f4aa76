"""Profiling tables stored beside a run: `traces` (one row per ncu-profiled kernel launch: pipe cycles and the raw
metrics) and `peaks` (one row per peak microbenchmark measurement: its work per launch and the achieved rate).

They are tables of the one results schema (harness.results, v9), written by its writer and read by its reader:
one part per finished piece of work, merged into `<table>/merged.parquet` at once; files of the retired profiling
schema (v1, v2) are migrated on read like any older results file. A run reads and compares the same without them.

>>> set(TRACE_TABLES) == {"traces", "peaks"}
True
"""

from __future__ import annotations

from pathlib import Path

from harness.results import append_rows, columns, read_rows, table_schema

__all__ = ["TRACE_TABLES", "read_trace_table", "trace_schema", "write_trace_table"]

TRACE_TABLES: dict[str, list[str]] = {t: columns(t) for t in ("traces", "peaks")}


def trace_schema(table: str):
    """The Arrow schema of a profiling table (the results schema's)."""
    return table_schema(_table(table))


def _table(table: str) -> str:
    if table not in TRACE_TABLES:
        raise ValueError(f"unknown profiling table {table!r}; one of {sorted(TRACE_TABLES)}")
    return table


def write_trace_table(run_dir: Path, table: str, rows: list[dict]) -> Path:
    """Append `rows` to `table` in the run directory (one part, merged into the table at once); the part's path."""
    return append_rows(Path(run_dir), _table(table), rows)


def read_trace_table(run_dir: Path, table: str) -> list[dict]:
    """Every row of a profiling table (all parts, in order); an empty list when the run has none."""
    return read_rows(Path(run_dir), _table(table))
