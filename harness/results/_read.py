"""Reading runs back as polars frames, checking the schema version and migrating older files."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ResultsError, ResultsWarning
from harness.results._compact import MERGED, PART_PATTERN, merged_parts
from harness.results._owner import run_process_state
from harness.results._schema import OPTIONAL_TABLES, SCHEMA_VERSION, TABLES, file_version, migrate, table_schema

# The profiling tables (bench trace, bench peaks): traces/ also holds timelines, and a peaks row's measurement_id is
# its peaks run's, stored again in every run the peaks join.
_PROFILING = ("traces", "peaks")

__all__ = ["Run", "part_files", "read_file", "read_files", "read_run", "read_run_rows", "read_rows", "read_table", "resolve_run"]


@dataclass(frozen=True, eq=False)
class Run:
    """One run's tables as polars DataFrames. `info` is the single runs row as a dict."""

    path: Path
    info: dict
    measurements: object
    chunks: object
    samples: object
    probes: object

    @property
    def complete(self) -> bool:
        return self.info.get("status") == "complete"


def _run_name(dirname: str) -> str | None:
    """The --name part of `<YYYYMMDD>-<HHMMSS>-<name>-<6 hex>` (None for a run without a name)."""
    parts = dirname.split("-")
    if len(parts) < 4 or not (parts[0].isdigit() and parts[1].isdigit() and len(parts[-1]) == 6):
        return None
    return "-".join(parts[2:-1])


def resolve_run(text: str | Path, *, results: Path) -> Path:
    """The run directory `text` names: a directory holding `runs.parquet`, else a run id or a run's --name under
    `results` (a name given to several runs means the newest of them; run ids begin with their start time).

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> for d in ("20261201-100000-base-aaaaaa", "20261202-100000-base-bbbbbb"):
    ...     (root / d).mkdir(); _ = (root / d / "runs.parquet").write_bytes(b"")
    >>> resolve_run("base", results=root).name
    '20261202-100000-base-bbbbbb'
    """
    path = Path(text)
    if (path / "runs.parquet").is_file():
        return path
    results = Path(results)
    if (results / str(text) / "runs.parquet").is_file():
        return results / str(text)
    runs = sorted(d for d in results.iterdir() if (d / "runs.parquet").is_file()) if results.is_dir() else []
    named = [d for d in runs if _run_name(d.name) == str(text)]
    if named:
        newest = [d for d in named if d.name[:15] == named[-1].name[:15]]  # started in the newest run's second
        if len(newest) > 1:
            raise ResultsError(
                f"{str(text)!r} names {len(newest)} runs started in the same second under {results}: "
                f"{', '.join(d.name for d in newest)}. Their ids cannot say which is newer; give the run id (or its "
                f"directory) of the one you mean.")
        return named[-1]
    if path.exists():
        raise ResultsError(f"{path} holds no run (no runs.parquet in it). Name a run directory, or a run's --name "
                           f"under --results.")
    known = sorted({_run_name(d.name) for d in runs} - {None})
    raise ResultsError(
        f"No run {str(text)!r}: it is neither a run directory nor a run id or run name under --results {results} "
        + (f"(its runs are named {', '.join(known)})." if known else
           f"({'it holds no runs' if results.is_dir() else 'which does not exist'}).")
        + " Give the run's directory, or --results where it is stored.")


class DamagedPart(ResultsError):
    """One file of a run cannot be read as Parquet (cut short, overwritten)."""


def _read_parts(folder: Path, table: str, damaged: set | None = None, *,
                strict: bool = False) -> list[tuple[str, Path, object]]:
    """Every part of one table folder as (part name, file it is in, arrow table), in order: the parts a merged file
    holds (`_compact`), then the part files not merged yet. A damaged file is left out with a ResultsWarning naming
    it (its part names go into `damaged`): one bad file must not hide every other measurement of the run (the run's
    own runs.parquet is never skipped); `strict` raises instead. A part file removed while it was being read (a
    compaction finishing beside the reader) is read again from the merged file that now holds it."""
    for attempt in range(3):
        try:
            return _read_parts_once(Path(folder), table, damaged, strict)
        except FileNotFoundError:
            if attempt == 2:
                raise
    return []


def _read_parts_once(folder: Path, table: str, damaged: set | None, strict: bool) -> list[tuple[str, Path, object]]:
    out: list[tuple[str, Path, object]] = []
    held = merged_parts(folder)
    merged = folder / MERGED
    if merged.is_file():
        try:
            arrow = _read_arrow(merged, table)
            if not held or sum(r for _, r in held) != arrow.num_rows:
                raise DamagedPart(f"{merged} does not say which parts it holds (or its counts do not add up to its "
                                  f"{arrow.num_rows} rows): the run directory is damaged.")
        except DamagedPart as exc:
            if strict:
                raise
            warnings.warn(f"{exc} It is left out: the figures lack every {table} row it held.", ResultsWarning,
                          stacklevel=4)
            if damaged is not None:
                damaged.update(n for n, _ in held)
            held = [(n, 0) for n, _ in held]  # its part files, if any are still there, are not read again
        else:
            offset = 0
            for name, rows in held:
                out.append((name, merged, arrow.slice(offset, rows)))
                offset += rows
    names = {n for n, _ in held}
    # traces/ also holds bench trace's timelines (pictures, Chrome traces): not parts, and not strays either
    for f in part_files(folder, quiet=table in _PROFILING):
        if f.name in names:
            continue  # merged already: a compaction was stopped before it removed the part
        try:
            out.append((f.name, f, _read_arrow(f, table)))
        except DamagedPart as exc:
            if not f.exists():
                raise FileNotFoundError(f) from None
            if strict:
                raise
            warnings.warn(f"{exc} It is left out: the figures lack what it held (one measurement's {table}).",
                          ResultsWarning, stacklevel=4)
            if damaged is not None:
                damaged.add(f.name)
    return out


def _part_names(folder: Path) -> set[str]:
    """The names of every part of a table folder, merged or not."""
    return {n for n, _ in merged_parts(folder)} | {f.name for f in part_files(folder)}


def _missing_parts(run_dir: Path, left_out: set) -> None:
    """Warn about a measurement whose chunks, samples or probes part is missing: the store writes all four parts of
    a measurement under one name, the measurement last, so a missing one was removed after the run."""
    names = {t: _part_names(run_dir / t) for t in ("measurements", "chunks", "samples", "probes")
             if (run_dir / t).is_dir()}
    measured = names.get("measurements", set()) - left_out  # a part left out (damaged, foreign) measured nothing
    for table in (t for t in ("chunks", "samples", "probes") if t in names):  # a missing folder is refused on read
        gone = sorted(measured - names[table])
        if gone:
            warnings.warn(f"{run_dir / table}: {', '.join(gone)} missing (the measurement(s) of the same part name in "
                          f"measurements/ have no {table}): figures that need their {table} are missing for them.",
                          ResultsWarning, stacklevel=3)


def _read_arrow(path: Path, table: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        arrow = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DamagedPart(f"Results file {path} cannot be read as Parquet ({exc}); the run directory is damaged.") from None
    meta = arrow.schema.metadata or {}
    version = file_version(meta)
    if version == 0 and b"harness_table" not in meta:
        raise DamagedPart(f"{path} is not a harness result (no schema version in it): something else wrote it there.")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} was written with results schema v{version}, newer than this harness's v{SCHEMA_VERSION}. "
            f"Upgrade the harness to read it."
        )
    if version < 1:
        raise ResultsError(f"{path} uses results schema v{version}, which this harness (v{SCHEMA_VERSION}) cannot "
                           f"migrate: versions begin at v1, so no harness wrote it. Restore the file from the run's "
                           f"copy.")
    arrow = migrate(table, arrow, version)  # every older version is migrated (the schema's ADDED), never refused
    want = table_schema(table)
    missing = [n for n in want.names if n not in arrow.schema.names]
    if missing:
        raise ResultsError(f"{path} lacks columns {missing} of the {table} table; the file is not a harness result.")
    return arrow.select(want.names).cast(want)


def read_file(path: Path, table: str):
    """One Parquet file of `table` as a pyarrow Table of the current schema: its version checked, migrated when
    older, refused when newer (pyarrow only). The history store reads its nights with it."""
    return _read_arrow(Path(path), table)


def read_files(paths: list[Path], table: str, *, columns: list[str] | None = None):
    """Many Parquet files of one table as one pyarrow Table of the current schema (or of `columns` of it), read as
    `read_file` would but in bulk: every file's version is read from its footer first; the files of the current
    version are scanned together (pyarrow's dataset reader: one pass, not a reader a file), older ones are migrated
    one by one, a newer or foreign one is refused naming it. The history store reads its nights with it."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    want = table_schema(table)
    names = columns or want.names
    current, older = [], []
    for path in map(Path, paths):
        try:
            meta = pq.read_schema(path).metadata or {}
        except (OSError, pa.ArrowInvalid) as exc:
            raise ResultsError(f"Results file {path} cannot be read as Parquet ({exc}); remove or restore it.") from None
        version = file_version(meta)
        if meta.get(b"harness_table", table.encode()) != table.encode():
            raise ResultsError(f"{path} holds the {meta[b'harness_table'].decode()} table, not {table}: it is not part "
                               f"of this store. Move it elsewhere.")
        (current if version == SCHEMA_VERSION else older).append(path)
    parts = [_read_arrow(p, table).select(names) for p in older]  # migrated, or refused when newer
    if current:
        try:
            parts.append(ds.dataset([str(p) for p in current], format="parquet", schema=want).to_table(columns=names))
        except (OSError, pa.ArrowInvalid, pa.ArrowTypeError):
            parts += [_read_arrow(p, table).select(names) for p in current]  # one by one: the error names the file
    if not parts:
        return want.empty_table().select(names)
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _never_written(run_dir: Path, table: str) -> bool:
    """True for an optional table the run never wrote (no folder): it has no rows, whatever its version."""
    return table in OPTIONAL_TABLES and not (run_dir / table).is_dir()


def part_files(folder: Path, *, quiet: bool = False) -> list[Path]:
    """The parts the store wrote in one table folder, in order. Anything else there (a copy such as
    `part-00000 (copy).parquet`, a stray file) is ignored with a ResultsWarning naming it: counting it
    would add a repeat that was never measured. Hidden files (`.part-*.tmp` of an interrupted write) are
    skipped without a word."""
    folder = Path(folder)
    keep, odd = [], []
    for f in sorted(folder.iterdir()) if folder.is_dir() else ():
        if f.name.startswith(".") or f.name == MERGED:
            continue  # a temporary of an interrupted write; the parts merged when the run ended (`_compact`)
        (keep if f.is_file() and PART_PATTERN.fullmatch(f.name) else odd).append(f)
    if odd and not quiet:
        warnings.warn(
            f"{folder}: ignored {len(odd)} file(s) the harness did not write ({', '.join(repr(f.name) for f in odd)}); "
            f"only part-NNNNN.parquet and merged.parquet files count as measurements. Remove them to silence this.",
            ResultsWarning, stacklevel=2)
    return keep


def _once(parts: list[tuple[str, Path, object]]) -> list:
    """The parts' tables, without one that only repeats measurements of an earlier part (a part copied under a name
    the store could have written, `part-00007.parquet`): counted again it would add a repeat that was never
    measured. Skipped with a ResultsWarning naming both parts."""
    seen: dict[str, str] = {}
    keep = []
    for name, f, arrow in parts:
        ids = set(arrow.column("measurement_id").to_pylist()) if "measurement_id" in arrow.schema.names else set()
        if ids and ids <= seen.keys():
            first = sorted({seen[i] for i in ids})
            where = f if f.name == name else f"{f} (its part {name})"
            warnings.warn(f"{where}: its measurement(s) {', '.join(sorted(ids))} are already in {', '.join(first)}; "
                          f"the copy is counted once, not as another repeat. Remove it to silence this.",
                          ResultsWarning, stacklevel=3)
            continue
        seen.update({i: name for i in ids if i not in seen})
        keep.append(arrow)
    return keep


def _table_arrows(run_dir: Path, table: str, left_out: set | None = None, *, strict: bool = False) -> list:
    """One table of a run as a list of arrow tables of the current schema (runs.parquet, or every part once)."""
    if table == "runs":
        return [_read_arrow(run_dir / "runs.parquet", table)]
    if _never_written(run_dir, table):
        return []
    folder = run_dir / table
    if not folder.is_dir():
        raise ResultsError(
            f"Run directory {run_dir} has no {table}/ folder: it is not a complete harness run directory "
            f"(expected runs.parquet and the folders "
            f"{', '.join(t for t in TABLES if t != 'runs' and t not in OPTIONAL_TABLES)})."
        )
    parts = _read_parts(folder, table, left_out, strict=strict)
    if table in _PROFILING:  # their measurement_id is the peaks run's, stored again in every run the peaks join
        return [arrow for _, _, arrow in parts]
    return _once(parts)


def read_table(run_dir: Path, table: str, *, _left_out: set | None = None):
    """All parts of one table as a polars DataFrame (an empty frame with the schema when there are none)."""
    import polars as pl
    import pyarrow as pa

    parts = _table_arrows(Path(run_dir), table, _left_out)
    arrow = pa.concat_tables(parts) if parts else table_schema(table).empty_table()
    return pl.from_arrow(arrow)


def read_run(run_dir: Path | str) -> Run:
    """Read a run directory. A run that stopped early reads fine; `Run.complete` says so."""
    run_dir = Path(run_dir)
    if not (run_dir / "runs.parquet").is_file():
        raise ResultsError(
            f"{run_dir} is not a run directory: it has no runs.parquet. Pass a directory that `bench sustained` "
            f"wrote (results/<run id>)."
        )
    runs = read_table(run_dir, "runs")
    if runs.height != 1:
        raise ResultsError(f"{run_dir}/runs.parquet holds {runs.height} rows; a run directory holds exactly one.")
    left_out: set = set()
    measurements = read_table(run_dir, "measurements", _left_out=left_out)
    _missing_parts(run_dir, left_out)
    return Run(
        path=run_dir,
        info=_with_liveness(run_dir, runs.row(0, named=True)),
        measurements=measurements,
        chunks=read_table(run_dir, "chunks"),
        samples=read_table(run_dir, "samples"),
        probes=read_table(run_dir, "probes"),
    )


def _with_liveness(run_dir: Path, info: dict) -> dict:
    """A `running` run whose writing process is gone says so in its status_detail (`_owner`); nothing is written."""
    if info.get("status") == "running":
        state, words = run_process_state(run_dir)
        if state == "gone":
            info = {**info, "status_detail": "; ".join(x for x in (info.get("status_detail"), words) if x)}
    return info


def read_run_rows(run_dir: Path) -> Run:
    """A run whose `measurements` are plain dicts (pyarrow only; chunks, samples and probes left unread): what
    a comparison needs, on a machine without polars."""
    run_dir = Path(run_dir)
    runs = read_rows(run_dir, "runs")
    if not runs:
        raise ResultsError(f"{run_dir / 'runs.parquet'} holds no run row; the run directory is damaged.")
    return Run(path=run_dir, info=_with_liveness(run_dir, runs[0]), measurements=read_rows(run_dir, "measurements"), chunks=None,
               samples=None, probes=None)


def read_rows(run_dir: Path, table: str) -> list[dict]:
    """One table of a run as dicts, migrated to the current schema. pyarrow only, not polars: runs are
    merged and appended to on GPU machines, which may have no polars. A damaged file is refused, naming it (what
    is copied or merged from a run must be whole)."""
    return [row for arrow in _table_arrows(Path(run_dir), table, strict=True) for row in arrow.to_pylist()]
