"""Profiling tables stored beside a run: `<run>/traces/part-*.parquet` and `<run>/peaks/part-*.parquet`.

They are not part of the results schema (harness.results._schema), which they leave untouched: a run
reads and compares the same without them. They carry their own small versioned schema, declared here
once, written with pyarrow (the device machine has no polars) and read back as lists of dicts.

- `traces`: one row per profiled kernel launch (ncu): pipe cycles and the raw metrics.
- `peaks`: one row per peak microbenchmark measurement: its work per launch and the achieved rate.

>>> TRACE_SCHEMA_VERSION >= 1 and set(TRACE_TABLES) == {"traces", "peaks"}
True
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from harness.errors import ResultsError
from harness.results import atomic_path

__all__ = ["TRACE_SCHEMA_VERSION", "TRACE_TABLES", "read_trace_table", "trace_schema", "write_trace_table"]

TRACE_SCHEMA_VERSION = 2
# v2 added each peak's independent second timing (check_*); a v1 part reads with those columns empty.
_ADDED = {2: {"peaks": ("check_method", "check_time_ns", "check_rate_per_s")}}

TRACE_TABLES: dict[str, list[tuple[str, str]]] = {
    "traces": [
        ("run_id", "string"), ("trace_id", "string"), ("tool", "string"), ("kernel", "string"),
        ("input_label", "string"), ("launch_kernel", "string"), ("launch_id", "int32"), ("block", "string"),
        ("grid", "string"), ("compute_capability", "string"), ("warm_s", "float64"), ("warm_launches", "int64"),
        ("duration_ns", "float64"), ("sm_clock_mhz", "float64"), ("achieved_cycles", "float64"),
        ("active_cycles", "float64"), ("cycles_basis", "string"), ("tensor_pct", "float64"), ("fma_pct", "float64"),
        ("alu_pct", "float64"), ("xu_pct", "float64"), ("issue_pct", "float64"), ("matrix_cycles", "float64"),
        ("fma_cycles", "float64"), ("alu_cycles", "float64"), ("xu_cycles", "float64"), ("vector_cycles", "float64"),
        ("serialized_cycles", "float64"), ("overlap", "float64"), ("xu_inst", "float64"), ("dram_bytes", "float64"),
        ("metrics_json", "string"), ("command_json", "string"), ("created_at", "string"),
    ],
    "peaks": [
        ("run_id", "string"), ("peaks_run_id", "string"), ("measurement_id", "string"), ("kernel", "string"),
        ("group", "string"), ("operands", "string"), ("unit", "string"), ("work_per_launch", "float64"),
        ("repeat", "int32"), ("status", "string"), ("time_ns", "float64"), ("rate_per_s", "float64"),
        ("sm_clock_mhz", "float64"), ("inband_clock_mhz", "float64"), ("power_w", "float64"),
        ("power_limited_frac", "float64"), ("reason_names", "string"), ("settled", "bool"), ("device_name", "string"),
        ("check_method", "string"), ("check_time_ns", "float64"), ("check_rate_per_s", "float64"),
    ],
}

_META_VERSION = b"harness_trace_schema_version"


@lru_cache(maxsize=None)
def trace_schema(table: str):
    """The Arrow schema of a profiling table, with its own version in the metadata."""
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    return pa.schema([pa.field(n, types[t]) for n, t in TRACE_TABLES[table]],
                     metadata={_META_VERSION: str(TRACE_SCHEMA_VERSION).encode(), b"harness_table": table.encode()})


def _folder(run_dir: Path, table: str) -> Path:
    if table not in TRACE_TABLES:
        raise ValueError(f"unknown profiling table {table!r}; one of {sorted(TRACE_TABLES)}")
    return Path(run_dir) / table


def write_trace_table(run_dir: Path, table: str, rows: list[dict]) -> Path:
    """Append `rows` as the next part file of `table` in the run directory (atomic: temp name, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    if not (run_dir / "runs.parquet").is_file():
        raise ResultsError(f"{run_dir} is not a run directory (no runs.parquet): profiling tables are stored beside "
                           f"a run that `bench sustained` or `bench peaks` wrote.")
    names = [n for n, _ in TRACE_TABLES[table]]
    unknown = set().union(*(r.keys() for r in rows)) - set(names) if rows else set()
    if unknown:
        raise ValueError(f"columns not in the {table} table: {sorted(unknown)}")
    folder = _folder(run_dir, table)
    folder.mkdir(exist_ok=True)
    index = len(list(folder.glob("part-*.parquet")))
    path = folder / f"part-{index:05d}.parquet"
    while path.exists():
        index += 1
        path = folder / f"part-{index:05d}.parquet"
    arrow = pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in names}, schema=trace_schema(table))
    with atomic_path(path) as tmp:
        pq.write_table(arrow, tmp)
    return path


def read_trace_table(run_dir: Path, table: str) -> list[dict]:
    """Every row of a profiling table (all parts, in order); an empty list when the run has none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: list[dict] = []
    want = trace_schema(table)
    for path in sorted(_folder(run_dir, table).glob("part-*.parquet")):
        try:
            arrow = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise ResultsError(f"{path} cannot be read as Parquet ({exc}); delete it and profile again.") from None
        version = int((arrow.schema.metadata or {}).get(_META_VERSION, b"0"))
        if not 1 <= version <= TRACE_SCHEMA_VERSION:
            raise ResultsError(
                f"{path} has profiling schema v{version}; this harness reads v1 to v{TRACE_SCHEMA_VERSION}. Re-profile "
                f"the run (bench trace / bench peaks), or read it with the harness version that wrote it.")
        for later in range(version + 1, TRACE_SCHEMA_VERSION + 1):  # migrate: columns added since, empty
            for name in _ADDED.get(later, {}).get(table, ()):
                arrow = arrow.append_column(want.field(name), pa.nulls(arrow.num_rows, want.field(name).type))
        missing = [n for n in want.names if n not in arrow.schema.names]
        if missing:
            raise ResultsError(f"{path} lacks columns {missing} of the {table} table; it is not a harness profile.")
        out += arrow.select(want.names).cast(want).to_pylist()
    return out
