"""Results: the one versioned schema, the one writer (append-only parts, merged when a run ends) and the reader.

>>> from harness.results import SCHEMA_VERSION, TABLES
>>> SCHEMA_VERSION >= 1 and "measurements" in TABLES
True
"""

from harness.results._atomic import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic
from harness.results._compact import MERGED, compact_run, expand_run
from harness.results._gpu import (
    GPU_SEPARATOR,
    gpu_dirname,
    gpu_label,
    gpu_measurement_id,
    gpu_of,
    split_measurement_id,
    with_gpu,
)
from harness.results._owner import OWNER_FILE, run_process_state
from harness.results._provenance import file_digest, git_state, host_facts, software_versions, to_json, tree_digest
from harness.results._read import (
    Run,
    part_files,
    read_file,
    read_files,
    read_rows,
    read_run,
    read_run_rows,
    read_table,
    resolve_run,
)
from harness.results._schema import HISTORY_TABLE, SCHEMA_VERSION, TABLES, columns, polars_schema, table_schema
from harness.results._store import (
    PART_PATTERN,
    RUN_NAME_MAX,
    RunAppender,
    RunWriter,
    append_rows,
    end_abandoned_run,
    new_run_id,
    write_table_atomic,
)

__all__ = [
    "MERGED",
    "RunAppender",
    "append_rows",
    "compact_run",
    "expand_run",
    "end_abandoned_run",
    "run_process_state",
    "OWNER_FILE",
    "part_files",
    "read_rows",
    "to_json",
    "GPU_SEPARATOR",
    "gpu_dirname",
    "gpu_label",
    "gpu_measurement_id",
    "gpu_of",
    "split_measurement_id",
    "with_gpu",
    "atomic_path",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
    "PART_PATTERN",
    "RUN_NAME_MAX",
    "HISTORY_TABLE",
    "SCHEMA_VERSION",
    "TABLES",
    "Run",
    "RunWriter",
    "columns",
    "file_digest",
    "git_state",
    "host_facts",
    "new_run_id",
    "part_files",
    "polars_schema",
    "read_file",
    "read_files",
    "read_run",
    "read_run_rows",
    "read_table",
    "resolve_run",
    "software_versions",
    "table_schema",
    "tree_digest",
    "write_table_atomic",
]
