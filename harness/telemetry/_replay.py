"""Recorded telemetry: Parquet files of Samples, and a sampler that plays one back.

A telemetry file has one column per `SAMPLE_FIELDS` entry, units in the names, full precision
(`chiplet_clocks_mhz` is list<float64>). Files from older versions that lack a column read back with
that field None; columns this version does not know are ignored.

>>> import tempfile, os
>>> from harness.telemetry import Sample, write_samples, read_samples
>>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
>>> write_samples(path, [Sample(t_ns=1, sm_clock_mhz=1980.0)])
>>> read_samples(path)[0].sm_clock_mhz
1980.0
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import time
from typing import Any, Callable, Sequence

from harness.errors import ResultsError, TelemetryError
from harness.results import atomic_path
from harness.telemetry._sample import SAMPLE_FIELDS, Sample

__all__ = ["ReplaySampler", "write_samples", "read_samples", "FORMAT_VERSION"]

FORMAT_VERSION = "1"
_META_KEY = b"harness.telemetry.format"


def _arrow_schema() -> Any:
    import pyarrow as pa

    by_annotation = {
        "int": pa.int64(),
        "int | None": pa.int64(),
        "str": pa.string(),
        "str | None": pa.string(),
        "float | None": pa.float64(),
        "tuple[float, ...] | None": pa.list_(pa.float64()),
    }
    columns = []
    for f in dataclasses.fields(Sample):
        # Annotations are strings (postponed evaluation); a new field with a new type must be added above.
        arrow_type = by_annotation.get(str(f.type))
        if arrow_type is None:
            raise TypeError(f"Sample.{f.name} has type {f.type!r}, which write_samples does not know how to store")
        columns.append(pa.field(f.name, arrow_type, nullable=f.name != "t_ns"))
    return pa.schema(columns, metadata={_META_KEY: FORMAT_VERSION.encode()})


def write_samples(path: str | os.PathLike[str], samples: Sequence[Sample]) -> None:
    """Write `samples` to a Parquet file at `path`, atomically: readers see the old file or the new one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    data = {name: [getattr(s, name) for s in samples] for name in SAMPLE_FIELDS}
    data["chiplet_clocks_mhz"] = [None if c is None else list(c) for c in data["chiplet_clocks_mhz"]]
    table = pa.Table.from_pydict(data, schema=schema)
    try:
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
    except OSError as e:
        raise ResultsError(
            f"Cannot write telemetry to {path}: {e}. Check that the directory exists and is writable."
        ) from e


def read_samples(path: str | os.PathLike[str]) -> list[Sample]:
    """Read a file written by `write_samples`; fields missing from an older file come back None."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.fspath(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise ResultsError(f"Cannot read telemetry from {path}: {e}. Is it a file written by write_samples?") from e
    version = (table.schema.metadata or {}).get(_META_KEY, b"").decode()
    if version.isdigit() and int(version) > int(FORMAT_VERSION):
        raise ResultsError(
            f"{path} is telemetry format {version}, newer than this harness reads ({FORMAT_VERSION}); "
            "upgrade the harness."
        )
    if "t_ns" not in table.column_names:
        raise ResultsError(f"{path} has no t_ns column, so it is not a telemetry file written by write_samples.")
    present = [name for name in SAMPLE_FIELDS if name in table.column_names]
    out = []
    for row in table.select(present).to_pylist():
        chiplets = row.get("chiplet_clocks_mhz")
        if chiplets is not None:
            row["chiplet_clocks_mhz"] = tuple(chiplets)
        out.append(Sample(**row))
    return out


class ReplaySampler:
    """Plays back recorded "poll" samples in real time (or on an injected clock).

    For tests and offline re-analysis only. It is never a fallback: a run whose live telemetry cannot
    start must say so, not quietly report a recording. `read()` returns the latest recorded poll sample
    whose offset from the first one is at most the time since `open()`, re-stamped with the current
    clock and `source="replay"`; after the recording ends it keeps returning the last sample. Recorded
    power-buffer and GPM samples are not replayed: `drain()` returns [].

    >>> now = [0]
    >>> r = ReplaySampler([Sample(t_ns=5_000, sm_clock_mhz=1.0), Sample(t_ns=15_000, sm_clock_mhz=2.0)],
    ...                   clock=lambda: now[0])
    >>> r.open(); now[0] = 10_000
    >>> r.read().sm_clock_mhz, r.read().t_ns, r.read().source
    (2.0, 10000, 'replay')
    """

    name = "replay"

    def __init__(
        self,
        samples: Sequence[Sample] | str | os.PathLike[str],
        *,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._source = samples
        self._clock = clock
        self._polls: list[Sample] = []
        self._offsets: list[int] = []
        self._start: int | None = None

    def _origin(self) -> str:
        if isinstance(self._source, (str, os.PathLike)):
            return os.fspath(self._source)
        return "samples given in memory"

    def open(self) -> None:
        recorded = read_samples(self._source) if isinstance(self._source, (str, os.PathLike)) else list(self._source)
        polls = sorted((s for s in recorded if s.source == "poll"), key=lambda s: s.t_ns)
        if not polls:
            raise TelemetryError(
                f"The recording ({self._origin()}) has no poll samples ({len(recorded)} samples of other kinds), "
                "so there is nothing to replay. Record with a live backend first."
            )
        self._polls = polls
        self._offsets = [s.t_ns - polls[0].t_ns for s in polls]
        self._start = self._clock()

    def read(self) -> Sample:
        if self._start is None:
            raise TelemetryError("ReplaySampler.read() before open(): call open() first.")
        now = self._clock()
        i = max(bisect.bisect_right(self._offsets, now - self._start) - 1, 0)
        return dataclasses.replace(self._polls[i], t_ns=now, source="replay")

    def drain(self) -> list[Sample]:
        return []

    def describe(self) -> dict[str, str]:
        if self._start is None:
            return {"replay": f"not opened yet: will replay {self._origin()}"}
        span = self._offsets[-1] / 1e9
        return {
            "replay": (
                f"replaying {len(self._polls)} recorded poll samples ({span:.3f} s) from {self._origin()}; "
                "recorded, not live telemetry"
            )
        }

    def close(self) -> None:
        self._start = None
