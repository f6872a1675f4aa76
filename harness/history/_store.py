"""The history store: a folder of Parquet files, one per nightly invocation (a night), each holding one row per
series, written through the results schema (table `history`, versioned and migrated on read like a run's tables).

No server and no index: a team keeps the folder in a CI cache, an artifact or a bucket, and `bench history DIR`
reads whatever files are there. A file is written under a temporary name and renamed into place, so a job killed
mid-write leaves no half night; appending a run that is already in the history changes nothing.

Layout: `DIR/night-<night label>-<run id>.parquet`. The night label is `--night` where given (several
invocations of one CI job, e.g. a prefill and a decode suite, share it), else the run's start time.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.errors import ResultsError, ResultsWarning
from harness.history._series import night_rows
from harness.results import HISTORY_TABLE, read_files, read_run_rows, write_table_atomic

__all__ = ["History", "append_runs", "read_history", "night_files", "night_label", "NIGHT_PATTERN"]

NIGHT_PATTERN = re.compile(r"night-[A-Za-z0-9._-]+\.parquet")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_LABEL = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@dataclass(frozen=True)
class History:
    """Every row of a history folder (a pyarrow Table of the current `history` schema) and the files read."""

    path: Path
    table: object  # pyarrow.Table
    files: tuple[Path, ...]

    @property
    def nights(self) -> int:
        return len(set(self.table.column("night").to_pylist())) if self.table.num_rows else 0


def night_label(started_at: str | None) -> str:
    """The default night label: the run's start as `2026-12-04T02:15:09Z` (UTC, to the second)."""
    try:
        when = datetime.fromisoformat(str(started_at))
    except (TypeError, ValueError):
        return "unknown"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_dir(history_dir: Path, *, flag: str) -> Path:
    path = Path(history_dir)
    if path.exists() and not path.is_dir():
        raise ResultsError(f"{flag} {path} is a file; the history is a folder of night-*.parquet files (one per night). "
                           f"Pass a folder (it is created if missing).")
    return path


def append_runs(history_dir: Path, runs: list[tuple[Path, str]], *, night: str | None = None,
                roles: dict | None = None, flag: str = "--history") -> Path | None:
    """Append one night: the runs given as (run directory, role) pairs, e.g. the suite's run ("kernel") and the
    control's ("control"), into one file. Returns the file, or None when these runs are already in the history
    (appending twice changes nothing). pyarrow only."""
    path = _check_dir(history_dir, flag=flag)
    read = [(read_run_rows(Path(d)), role) for d, role in runs]
    if not read:
        raise ValueError("append_runs needs at least one run")
    label = night or night_label(read[0][0].info.get("started_at"))
    if not _LABEL.fullmatch(label):
        raise ResultsError(f"--night {label!r}: a night label is 1-64 letters, digits, '.', '_', '-' or ':' (it names "
                           f"the night's file in {path}). Pick a label such as 2026-12-04.")
    rows = [r for run, role in read for r in night_rows(run, night=label, role=role, roles=roles)]
    if not rows:
        raise ResultsError(f"{', '.join(str(d) for d, _ in runs)}: no measurement to add to the history in {path} (the "
                           f"runs hold no kernel x input). Nothing was appended.")
    ids = "+".join(str(run.info.get("run_id")) for run, _ in read)
    target = path / f"night-{_SAFE.sub('_', label)}-{_SAFE.sub('_', ids)[:150]}.parquet"
    if target.exists():
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
        write_table_atomic(target, HISTORY_TABLE, rows)
    except OSError as exc:
        raise ResultsError(f"Cannot write the night to {target}: {exc.strerror or exc}. Give {flag} a writable folder "
                           f"(with space for a night: a few kB per series).") from None
    return target


def night_files(history_dir: Path) -> list[Path]:
    """The night files of a history folder, in name order; anything else there is ignored with a warning."""
    keep, odd = [], []
    for f in sorted(Path(history_dir).iterdir()):
        if f.name.startswith("."):
            continue  # a write in progress (atomic_path's temporary), or a hidden file
        (keep if f.is_file() and NIGHT_PATTERN.fullmatch(f.name) else odd).append(f)
    if odd:
        warnings.warn(f"{history_dir}: ignored {len(odd)} file(s) the history did not write "
                      f"({', '.join(repr(f.name) for f in odd[:5])}{', ...' if len(odd) > 5 else ''}); only "
                      f"night-*.parquet files are nights.", ResultsWarning, stacklevel=2)
    return keep


def read_history(history_dir: Path, *, flag: str = "DIR", columns=None) -> History:
    """Every night of a history folder, migrated to the current schema (pyarrow only). A folder that is missing
    or holds no night is refused, naming it: reading it as an empty history would pass every verdict. `columns`:
    only these (what `analyze_history` needs: ANALYSIS_COLUMNS), the rest left on disk."""
    path = _check_dir(history_dir, flag=flag)
    if not path.is_dir():
        raise ResultsError(f"{flag} {path}: no such folder. Give the folder `bench nightly --history` (or `bench "
                           f"sustained --history`) appended nights to.")
    files = night_files(path)
    if not files:
        raise ResultsError(f"{flag} {path} holds no night (no night-*.parquet file). Run `bench nightly --history "
                           f"{path}` to append the first one.")
    return History(path=path, table=read_files(files, HISTORY_TABLE, columns=list(columns) if columns else None),
                   files=tuple(files))
