"""The one writer of results: an append-only run directory. Every file is written to a temporary name and renamed
into place.

Layout: `<root>/<run_id>/runs.parquet` (rewritten atomically as the status changes) and
`<root>/<run_id>/<table>/part-NNNNN.parquet` for the other tables, one part per finished measurement.
A measurement's samples, chunks and probes are written before its measurement row, so a measurement
row on disk means everything it was computed from is on disk too. Only names the store writes
(`PART_PATTERN`) count as parts when read back; a copy such as `part-00000 (copy).parquet` does not.
When the run ends (`finish`, whatever the ending), the parts of each table are merged into
`<table>/merged.parquet` (`_compact`); a run whose process was killed keeps its parts, readable as they are.

`RunAppender` adds to a run that has ended, through the same parts and the same compaction: `bench burst --into`'s
measurements, and the profiling tables (traces, peaks) that `bench trace` and `bench peaks` store beside a run.

A full disk: a small reserve file is kept beside runs.parquet and given up just before the final status
write, so the run's last row can still be written when the parts have filled the disk.
"""

from __future__ import annotations

import errno
import re
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from harness.errors import ConfigError, ResultsError
from harness.results._atomic import atomic_path
from harness.results._compact import PART_PATTERN, compact_run, compact_table, merged_parts
from harness.results._owner import write_owner
from harness.results._read import read_file
from harness.results._schema import OPTIONAL_TABLES, SCHEMA_VERSION, TABLES, columns, table_schema

__all__ = ["PART_PATTERN", "RUN_NAME_MAX", "RunAppender", "RunWriter", "append_rows", "end_abandoned_run", "new_run_id",
           "write_table_atomic"]

RUN_NAME_MAX = 64
_NAME_OK = re.compile(r"[A-Za-z0-9._-]+")
_RESERVE = ".space-reserve"


def new_run_id(name: str | None = None) -> str:
    """`<date>-<time>[-<name>]-<random>`: a single directory name under --results.

    >>> new_run_id("my.run_1")[16:24]
    'my.run_1'
    """
    if name is not None:
        if not _NAME_OK.fullmatch(name):
            bad = sorted({c for c in name if not _NAME_OK.fullmatch(c)})
            raise ConfigError(
                f"--name {name!r}: a run name may hold only letters, digits, '.', '_' and '-' (it becomes part of "
                f"the run directory's name under --results); it holds {', '.join(repr(c) for c in bad) or 'nothing'}. "
                f"Pick a name such as 'bf16-h200'."
            )
        if len(name) > RUN_NAME_MAX:
            raise ConfigError(f"--name: a run name may be at most {RUN_NAME_MAX} characters long; this one has "
                              f"{len(name)}. Pick a shorter name.")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = uuid.uuid4().hex[:6]
    return f"{stamp}-{name}-{suffix}" if name else f"{stamp}-{suffix}"


def _no_space(exc: OSError) -> bool:
    return getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc)


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
    with atomic_path(path) as tmp:  # removes the half-written file on a full disk or a signal mid-write
        pq.write_table(arrow, tmp)


class RunWriter:
    """Writes one run. Create it before measuring: an unwritable directory fails before any GPU time."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.root = Path(root).absolute()  # resolved now: a kernel that changes directory cannot move it
        if not run_id or run_id in (".", "..") or Path(run_id).name != run_id or "\\" in run_id:
            raise ResultsError(f"Run id {run_id!r} is not a single directory name; results never leave {self.root}.")
        self.run_id = run_id
        self.path = self.root / run_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
            for table in TABLES:
                if table != "runs" and table not in OPTIONAL_TABLES:
                    (self.path / table).mkdir()
            probe = self.path / ".write-test"
            probe.write_bytes(b"ok")
            probe.unlink()
            write_owner(self.path)  # who writes it: a run left `running` by a process that is gone is told apart
        except OSError as exc:
            if _no_space(exc):
                raise ResultsError(f"No space left on the device holding {self.root}: the run directory cannot be "
                                   f"created. Free space or pass --results on a larger disk.") from None
            raise ResultsError(
                f"Cannot write results under {self.root}: {exc.strerror or exc}. Pass a writable directory with "
                f"--results DIR (it is created if missing), or fix the permissions of {self.root}."
            ) from None
        self._part = 0
        self._written = 0
        self._run_row: dict = {}

    def _write(self, path: Path, table: str, rows: list[dict]) -> None:
        try:
            write_table_atomic(path, table, rows)
        except OSError as exc:
            if _no_space(exc):
                raise ResultsError(
                    f"No space left on the device holding {self.path} while writing {path.relative_to(self.path)}. "
                    f"The {self._written} measurements written before it stay readable; the run is marked failed. "
                    f"Free space or pass --results on a larger disk."
                ) from None
            raise ResultsError(f"Cannot write {path}: {exc}. The {self._written} measurements written before it "
                               f"stay readable.") from None

    def write_run(self, row: dict) -> None:
        self._run_row = {**row, "run_id": self.run_id, "schema_version": SCHEMA_VERSION}
        self._write(self.path / "runs.parquet", "runs", [self._run_row])
        self._reserve()

    def _reserve(self) -> None:
        """Hold about twice the run row's size, so the final status can be written on a full disk."""
        reserve = self.path / _RESERVE
        if reserve.exists():
            return
        try:
            size = max(64 * 1024, 2 * (self.path / "runs.parquet").stat().st_size)
            with open(reserve, "wb") as f:
                f.write(b"\0" * size)
        except OSError:
            reserve.unlink(missing_ok=True)  # too little space even for this: the final write may still fit

    def set_status(self, status: str, detail: str = "", **extra) -> None:
        """A final status (complete, incomplete, failed): the same as `finish`."""
        self.finish(status, detail, **extra)

    def finish(self, status: str, detail: str = "", **extra) -> None:
        """The run's last status: the space reserve is given up for it, and temp files left by an
        interrupted write are removed. Then the parts are merged (`compact`): the status is written first, so a
        run whose compaction is cut short (a third Ctrl-C, a full disk) still says how it ended."""
        (self.path / _RESERVE).unlink(missing_ok=True)
        for tmp in self.path.glob("**/.*.tmp"):
            tmp.unlink(missing_ok=True)
        self._run_row = {**self._run_row, "status": status, "status_detail": detail, **extra}
        self._write(self.path / "runs.parquet", "runs", [self._run_row])
        self.compact()

    def compact(self) -> None:
        """Merge the run's parts, one file per table (`_compact`). Best effort: on a full disk or any error the
        parts stay as they are, readable, and the next compaction (or none) takes them."""
        compact_quietly(self.path)

    def append_rows(self, table: str, rows: list[dict]) -> None:
        """One part file of `table` (a table without samples of its own, e.g. model_error) holding `rows`."""
        if table in ("runs", "measurements"):
            raise ValueError(f"{table} rows are written with write_run / append_measurement")
        part = f"part-{self._part:05d}.parquet"
        self._part += 1
        try:
            (self.path / table).mkdir(exist_ok=True)  # optional tables get their folder with their first rows
        except OSError as exc:
            raise ResultsError(f"Cannot create {self.path / table}: {exc}.") from None
        self._write(self.path / table / part, table, [{**r, "run_id": self.run_id} for r in rows])

    def append_measurement(self, *, measurement: dict, chunks: list[dict], samples: list[dict], probes: list[dict]) -> None:
        part = f"part-{self._part:05d}.parquet"
        self._part += 1
        for table, rows in (("samples", samples), ("chunks", chunks), ("probes", probes)):
            self._write(self.path / table / part, table, [{**r, "run_id": self.run_id} for r in rows])
        self._write(self.path / "measurements" / part, "measurements", [{**measurement, "run_id": self.run_id}])
        self._written += 1


def compact_quietly(run_dir: Path) -> None:
    """`compact_run`, leaving the parts as they are when it cannot finish (no space, a damaged file): compaction
    saves files, it is never why a run fails."""
    try:
        compact_run(run_dir)
    except Exception:  # noqa: BLE001 - whatever stopped it, the parts it did not merge are still there and read
        for tmp in Path(run_dir).glob("*/.merged.parquet.*.tmp"):
            tmp.unlink(missing_ok=True)


def _next_part(folder: Path) -> str:
    """A part name not yet used in `folder`, merged or not."""
    used = {n for n, _ in merged_parts(folder)} | {f.name for f in folder.glob("part-*.parquet")}
    index = len(used)
    while f"part-{index:05d}.parquet" in used:
        index += 1
    return f"part-{index:05d}.parquet"


class RunAppender:
    """Adds parts to a run directory that has ended: `bench burst --into`'s measurements and the profiling tables.

    `flag` names the option that chose the run, for the errors. The runs row is read with pyarrow (the GPU machine
    that appends may have no polars); `update_run` rewrites it. `finish` merges what was added.
    """

    def __init__(self, run_dir: Path, *, flag: str = "--into") -> None:

        self.path = Path(run_dir).absolute()
        if not (self.path / "runs.parquet").is_file():
            raise ResultsError(f"{flag} {run_dir}: not a run directory (no runs.parquet). Pass a directory that "
                               f"`bench sustained` wrote.")
        self.info = read_file(self.path / "runs.parquet", "runs").to_pylist()[0]
        self.run_id = self.info["run_id"]
        self._stamp = None
        self._part = 0

    def update_run(self, **fields) -> None:
        self.info = {**self.info, **fields}
        write_table_atomic(self.path / "runs.parquet", "runs", [self.info])

    def append_measurement(self, *, measurement: dict, chunks: list[dict], samples: list[dict],
                           probes: list[dict]) -> None:
        """One measurement's parts, named `part-burst-<stamp>-NNN` (a name the run's own parts never take), the
        measurement last as `RunWriter` writes them."""
        if self._stamp is None:
            self._stamp = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:4]
        part = f"part-burst-{self._stamp}-{self._part:03d}.parquet"
        self._part += 1
        tables = (("samples", samples), ("chunks", chunks), ("probes", probes), ("measurements", [measurement]))
        for table, rows in tables:
            write_table_atomic(self.path / table / part, table, [{**r, "run_id": self.run_id} for r in rows])

    def append_rows(self, table: str, rows: list[dict]) -> Path:
        """`rows` as the next part of `table` (its folder made when new), merged into the table at once: each call
        is one finished piece of work (one kernel's traces), kept whatever happens after."""
        return append_rows(self.path, table, rows)

    def finish(self, *args, **kw) -> None:
        """Merge the parts added (the run's status is its own: an appended burst that stops leaves it alone)."""
        compact_quietly(self.path)


def append_rows(run_dir: Path, table: str, rows: list[dict]) -> Path:
    """Add `rows` to `table` of the run at `run_dir` (one part, then merged into the table's merged file) and return
    the part's path (the name it is listed under in merged.parquet)."""
    run_dir = Path(run_dir)
    if not (run_dir / "runs.parquet").is_file():
        raise ResultsError(f"{run_dir} is not a run directory (no runs.parquet): tables are stored beside a run that "
                           f"`bench sustained` or `bench peaks` wrote.")
    folder = run_dir / table
    folder.mkdir(exist_ok=True)
    path = folder / _next_part(folder)
    write_table_atomic(path, table, rows)
    try:
        compact_table(folder, table)
    except Exception:  # noqa: BLE001 - the part stays, readable; the next compaction takes it
        pass
    return path


def end_abandoned_run(run_dir: Path, status: str, detail: str) -> bool:
    """Write the final status of a run whose own process died before it could (a worker killed by SIGKILL):
    only a run still marked `running` is changed; its space reserve and temp files are removed and its parts
    merged as `finish` would. Returns whether the row was written. pyarrow only (the GPU images may lack polars)."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    path = run_dir / "runs.parquet"
    try:
        (row,) = pq.read_table(path).to_pylist()
    except (OSError, ValueError):
        return False
    if row.get("status") != "running":
        return False
    (run_dir / _RESERVE).unlink(missing_ok=True)
    for tmp in run_dir.glob("**/.*.tmp"):
        tmp.unlink(missing_ok=True)
    row.update(status=status, status_detail=detail, finished_at=datetime.now(timezone.utc).isoformat())
    write_table_atomic(path, "runs", [row])
    compact_quietly(run_dir)  # it has ended now: its parts merged as any run's that ends
    return True
