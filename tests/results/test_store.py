import os
import stat

import pyarrow.parquet as pq
import pytest

from harness.errors import ResultsError
from harness.results import SCHEMA_VERSION, RunWriter, columns, polars_schema, read_run, table_schema


def test_schema_round_trip_keeps_types_units_and_version(tmp_path):
    w = RunWriter(tmp_path, "r1")
    w.write_run({"status": "running", "git_commit": "abc", "git_dirty": True, "sm_count": 132, "power_limit_w": 700.0})
    w.append_measurement(
        measurement={"measurement_id": "m0", "kernel": "k", "config_index": 0, "input_label": "gaussian:0.1",
                     "time_ns": 3.88e6, "sm_clock_mhz": 1710.0, "settled": True},
        chunks=[{"measurement_id": "m0", "chunk_index": 0, "phase": "warmin", "t_start_ns": 1, "t_end_ns": 2,
                 "device_ns": 1, "launches": 10, "time_ns": 0.1}],
        samples=[{"measurement_id": "m0", "phase": "idle", "t_ns": 5, "source": "poll", "chiplet_clocks_mhz": [1.0, 2.0]}],
        probes=[],
    )
    w.set_status("complete")
    run = read_run(tmp_path / "r1")
    assert run.complete and run.info["git_dirty"] is True and run.info["schema_version"] == SCHEMA_VERSION
    assert run.measurements["time_ns"].to_list() == [3.88e6]
    assert run.samples["chiplet_clocks_mhz"].to_list() == [[1.0, 2.0]]
    assert run.measurements.schema == polars_schema("measurements")
    assert run.probes.height == 0 and run.probes.columns == columns("probes")
    meta = pq.read_schema(tmp_path / "r1" / "measurements" / "merged.parquet").metadata  # merged when it ended
    assert meta[b"harness_schema_version"] == str(SCHEMA_VERSION).encode()
    assert not (tmp_path / "r1" / "measurements" / "part-00000.parquet").exists()


def test_unknown_column_is_rejected(tmp_path):
    w = RunWriter(tmp_path, "r1")
    with pytest.raises(ValueError, match="not in the measurements schema"):
        w.append_measurement(measurement={"bogus": 1}, chunks=[], samples=[], probes=[])


def test_no_temporary_files_left_behind(tmp_path):
    w = RunWriter(tmp_path, "r1")
    w.write_run({"status": "running"})
    w.set_status("complete")
    # model_error/ (optional) only once rows are written to it; .owner.json: the process that wrote it (issue 41)
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == [".owner.json", "chunks", "measurements", "probes", "runs.parquet", "samples"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; permission bits do not stop it")
def test_unwritable_results_directory_message(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    with pytest.raises(ResultsError, match="Cannot write results under"):
        RunWriter(ro, "r1")


def test_results_path_that_is_a_file_gives_clear_message(tmp_path):
    # Works as root too: a path under a regular file can never be a directory.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ResultsError, match="--results DIR"):
        RunWriter(blocker, "r1")


def test_reading_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(ResultsError, match="no runs.parquet"):
        read_run(tmp_path)


def test_newer_schema_is_refused(tmp_path):

    w = RunWriter(tmp_path, "r1")
    w.write_run({"status": "complete"})
    path = tmp_path / "r1" / "runs.parquet"
    t = pq.read_table(path)
    t = t.replace_schema_metadata({b"harness_schema_version": b"99"})
    pq.write_table(t, path)
    with pytest.raises(ResultsError, match="newer than this harness"):
        read_run(tmp_path / "r1")


def test_table_schema_has_units_in_names():
    names = table_schema("measurements").names
    for n in ("time_ns", "sm_clock_mhz", "power_w", "energy_j", "inband_clock_mhz"):
        assert n in names


def test_v1_runs_are_migrated_on_read():
    # The committed H200 runs were written with schema v1, before the chiplet columns existed.
    from pathlib import Path

    run = read_run(Path(__file__).parent.parent / "fixtures" / "h200" / "20261130-043508-issue2-b7147a")
    meta = pq.read_schema(run.path / "measurements" / "merged.parquet").metadata  # compacted at the version it had
    assert meta[b"harness_schema_version"] == b"1"
    assert run.measurements.schema == polars_schema("measurements")
    assert run.measurements["chiplet_count"].null_count() == run.measurements.height
    assert run.measurements["time_ns"].null_count() == 0


def test_tree_digest_identifies_code_without_git(tmp_path):
    from harness.results import tree_digest

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.py").write_text("ignored")
    first = tree_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.py").write_text("still ignored")
    assert tree_digest(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert tree_digest(tmp_path / "pkg") != first
