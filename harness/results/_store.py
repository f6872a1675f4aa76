"""An append-only run directory. Every file is written to a temporary name and renamed into place.

Layout: `<root>/<run_id>/runs.parquet` (rewritten atomically as the status changes) and
`<root>/<run_id>/<table>/part-NNNNN.parquet` for the other tables, one part per finished measurement.
A measurement's samples, chunks and probes are written before its measurement row, so a measurement
row on disk means everything it was computed from is on disk too.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from harness.errors import ResultsError
from harness.results._atomic import atomic_path
from harness.results._schema import SCHEMA_VERSION, TABLES, columns, table_schema

__all__ = ["RunWriter", "new_run_id", "write_table_atomic"]


def new_run_id(name: str | None = None) -> str:
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = uuid.uuid4().hex[:6]
    return f"{stamp}-{name}-{suffix}" if name else f"{stamp}-{suffix}"


def write_table_atomic(path: Path, table: str, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = table_schema(table)
    names = columns(table)
    unknown = set().union(*(r.keys() for r in rows)) - set(names) if rows else set()
    if unknown:
        raise ValueError(f"columns not in the {table} schema: {sorted(unknown)}")
    data = {n: [r.get(n) for r in rows] for n in names}
    arrow = pa.Table.from_pydict(data, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(arrow, tmp)


class RunWriter:
    """Writes one run. Create it before measuring: an unwritable directory fails before any GPU time."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.root = Path(root)
        self.run_id = run_id
        self.path = self.root / run_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
            for table in TABLES:
                if table != "runs":
                    (self.path / table).mkdir()
            probe = self.path / ".write-test"
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError as exc:
            raise ResultsError(
                f"Cannot write results under {self.root}: {exc.strerror or exc}. Pass a writable directory with "
                f"--results DIR (it is created if missing), or fix the permissions of {self.root}."
            ) from None
        self._part = 0
        self._run_row: dict = {}

    def write_run(self, row: dict) -> None:
        self._run_row = {**row, "run_id": self.run_id, "schema_version": SCHEMA_VERSION}
        write_table_atomic(self.path / "runs.parquet", "runs", [self._run_row])

    def set_status(self, status: str, detail: str = "", **extra) -> None:
        self.write_run({**self._run_row, "status": status, "status_detail": detail, **extra})

    def append_measurement(self, *, measurement: dict, chunks: list[dict], samples: list[dict], probes: list[dict]) -> None:
        part = f"part-{self._part:05d}.parquet"
        self._part += 1
        for table, rows in (("samples", samples), ("chunks", chunks), ("probes", probes)):
            write_table_atomic(self.path / table / part, table, [{**r, "run_id": self.run_id} for r in rows])
        write_table_atomic(self.path / "measurements" / part, "measurements", [{**measurement, "run_id": self.run_id}])
