"""Run directories that cannot be compared or reported: each gives one clear paragraph, not a traceback."""

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from h200_runs import RUN_A

from harness.errors import ResultsError
from harness.results import SCHEMA_VERSION, expand_run, read_run


def _set_version(path, version: int) -> None:
    t = pq.read_table(path)
    meta = dict(t.schema.metadata)
    meta[b"harness_schema_version"] = str(version).encode()
    pq.write_table(t.replace_schema_metadata(meta), path)


def test_directory_without_runs_parquet(tmp_path):
    with pytest.raises(ResultsError, match="is not a run directory: it has no runs.parquet"):
        read_run(tmp_path)


def test_missing_table(copy_run):
    run = copy_run(RUN_A)
    shutil.rmtree(run / "probes")
    with pytest.raises(ResultsError, match="has no probes/ folder: it is not a complete harness run directory"):
        read_run(run)


def test_older_schema_without_a_migration(copy_run):
    run = copy_run(RUN_A)
    expand_run(run)  # its parts (the fixture is compacted), one of which is damaged below
    _set_version(run / "measurements" / "part-00000.parquet", 0)
    with pytest.raises(ResultsError, match=f"uses results schema v0, which this harness .v{SCHEMA_VERSION}. cannot migrate"):
        read_run(run)


def test_newer_schema(copy_run):
    run = copy_run(RUN_A)
    _set_version(run / "runs.parquet", 99)
    with pytest.raises(ResultsError, match="schema v99, newer than this harness"):
        read_run(run)


def test_table_missing_columns(copy_run):
    run = copy_run(RUN_A)
    expand_run(run)
    part = run / "chunks" / "part-00000.parquet"
    t = pq.read_table(part)
    pq.write_table(t.drop(["power_w"]), part)
    with pytest.raises(ResultsError, match=r"lacks columns \['power_w'\] of the chunks table"):
        read_run(run)


def test_damaged_file(copy_run):
    """One damaged part is left out with a warning naming it (issue 41: it refused the whole run); the run's own
    runs.parquet is never skipped."""
    from harness.errors import ResultsWarning

    run = copy_run(RUN_A)
    expand_run(run)
    (run / "samples" / "part-00000.parquet").write_bytes(b"not parquet")
    with pytest.warns(ResultsWarning, match="samples/part-00000.parquet cannot be read as Parquet.*It is left out"):
        loaded = read_run(run)
    assert loaded.measurements.height > 0
    (run / "runs.parquet").write_bytes(b"not parquet")
    with pytest.raises(ResultsError, match="cannot be read as Parquet"):
        read_run(run)


def test_two_rows_in_runs_parquet(copy_run):
    run = copy_run(RUN_A)
    t = pq.read_table(run / "runs.parquet")
    pq.write_table(pa.concat_tables([t, t]), run / "runs.parquet")
    with pytest.raises(ResultsError, match="holds 2 rows"):
        read_run(run)
