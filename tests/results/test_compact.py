"""Compaction (parts merged into one file per table when a run ends) and migration driven by the schema's ADDED table:
a compacted run reads as its parts did, every way a run stops leaves it readable, old versions are migrated."""

from __future__ import annotations

import errno
import json
import shutil
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import ResultsWarning
from harness.results import MERGED, RunAppender, RunWriter, append_rows, compact_run, expand_run, read_rows, read_run
from harness.results._compact import PARTS_KEY, compact_table, merged_parts
from harness.results._schema import ADDED, SCHEMA_VERSION, table_schema

TABLES4 = ("measurements", "chunks", "samples", "probes")


def _measure(w, i: int, *, timed: bool = True) -> None:
    mid = f"m{i}"
    w.append_measurement(
        measurement={"measurement_id": mid, "kernel": "k", "repeat": i, "status": "ok" if timed else "gate-failed",
                     "time_ns": 1000.0 + i if timed else None, "seq_len": 128},
        chunks=[{"measurement_id": mid, "chunk_index": c, "phase": "window", "time_ns": 10.0 * c + i}
                for c in range(3 if timed else 0)],
        samples=[{"measurement_id": mid, "t_ns": t, "sm_clock_mhz": 1700.0 + t, "chiplet_clocks_mhz": [1.0, 2.0 + t]}
                 for t in range(4 if timed else 0)],
        probes=[{"measurement_id": mid, "t_ns": 5, "clock_mhz": 1650.0}] if timed else [],
    )


def _writer(tmp_path, n: int = 3) -> RunWriter:
    w = RunWriter(tmp_path, "r")
    w.write_run({"status": "running"})
    for i in range(n):
        _measure(w, i, timed=i != 1)  # m1 failed its gate: a measurement row with no chunks, samples or probes
    return w


def _frames(path):
    run = read_run(path)
    return {t: getattr(run, t) for t in TABLES4}


def _files(path, table):
    return sorted(f.name for f in (path / table).iterdir())


def test_a_compacted_run_reads_identically_to_its_parts_one_file_per_table(tmp_path):
    w = _writer(tmp_path)
    before = _frames(w.path)
    assert _files(w.path, "samples") == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    w.finish("complete")
    after = _frames(w.path)
    for table in TABLES4:
        assert after[table].equals(before[table]), table
        assert _files(w.path, table) == [MERGED]
        assert merged_parts(w.path / table) == [("part-00000.parquet", 1 if table == "measurements" else
                                                 {"chunks": 3, "samples": 4, "probes": 1}[table]),
                                                ("part-00001.parquet", 1 if table == "measurements" else 0),
                                                ("part-00002.parquet", 1 if table == "measurements" else
                                                 {"chunks": 3, "samples": 4, "probes": 1}[table])]
    assert before["samples"].height == 8 and before["measurements"]["measurement_id"].to_list() == ["m0", "m1", "m2"]
    assert read_run(w.path).info["status"] == "complete"
    assert expand_run(w.path) == 12  # and back: the same parts, reading the same
    assert _files(w.path, "chunks") == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    for table, frame in _frames(w.path).items():
        assert frame.equals(before[table]), table


def test_a_run_killed_mid_way_keeps_its_parts_and_reads(tmp_path):
    w = _writer(tmp_path, n=2)  # the process dies here: finish (and so compaction) never runs
    (w.path / "samples" / ".part-00002.parquet.x1y2.tmp").write_bytes(b"half")  # a write cut by the kill
    run = read_run(w.path)
    assert run.info["status"] == "running"
    assert run.measurements["measurement_id"].to_list() == ["m0", "m1"] and run.samples.height == 4
    assert _files(w.path, "measurements") == ["part-00000.parquet", "part-00001.parquet"]


def test_compaction_killed_between_the_rename_and_the_removal_reads_every_part_once(tmp_path):
    w = _writer(tmp_path)
    before = _frames(w.path)
    saved = tmp_path / "saved"
    shutil.copytree(w.path, saved)
    compact_run(w.path)
    for table in TABLES4:  # the parts are back beside the merged file that lists them: the kill came before unlink
        for part in (saved / table).glob("part-*.parquet"):
            shutil.copy(part, w.path / table / part.name)
    assert len(_files(w.path, "chunks")) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultsWarning)  # leftovers of a compaction are no copies to warn about
        after = _frames(w.path)
    for table in TABLES4:
        assert after[table].equals(before[table]), table  # nothing counted twice
    assert compact_run(w.path) == 12  # the next compaction removes the leftovers
    assert _files(w.path, "probes") == [MERGED] and _frames(w.path)["samples"].equals(before["samples"])


def test_a_compaction_that_cannot_write_leaves_the_parts_and_the_status_is_written(tmp_path, monkeypatch):
    w = _writer(tmp_path)
    real = pq.write_table

    def full(table, where, *a, **k):
        if ".merged.parquet." in str(where):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(table, where, *a, **k)

    monkeypatch.setattr(pq, "write_table", full)
    w.finish("incomplete", "interrupted by SIGTERM")
    monkeypatch.undo()
    run = read_run(w.path)
    assert (run.info["status"], run.info["status_detail"]) == ("incomplete", "interrupted by SIGTERM")
    assert run.measurements.height == 3 and run.samples.height == 8
    assert _files(w.path, "samples") == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]  # no temp


def test_parts_appended_to_a_compacted_run_are_merged_after_its_own(tmp_path):
    w = _writer(tmp_path, n=2)
    w.finish("complete")
    app = RunAppender(w.path)
    _measure(app, 7)
    rows = [{"kernel": "peak-mma", "rate_per_s": 1e15}]
    first = append_rows(w.path, "peaks", rows)
    second = app.append_rows("peaks", rows)
    assert (first.name, second.name) == ("part-00000.parquet", "part-00001.parquet")  # merged names are not reused
    app.finish("failed", "the burst failed")
    assert read_run(w.path).info["status"] == "complete"  # an appended burst leaves the run's status alone
    names = [n for n, _ in merged_parts(w.path / "measurements")]
    assert names[:2] == ["part-00000.parquet", "part-00001.parquet"] and names[2].startswith("part-burst-")
    assert read_run(w.path).measurements["measurement_id"].to_list() == ["m0", "m1", "m7"]
    assert _files(w.path, "peaks") == [MERGED] and len(read_rows(w.path, "peaks")) == 2


def test_a_damaged_part_is_not_merged_and_is_still_named(tmp_path):
    w = _writer(tmp_path)
    (w.path / "samples" / "part-00002.parquet").write_bytes(b"cut short")
    w.finish("complete")
    assert _files(w.path, "samples") == [MERGED, "part-00002.parquet"]
    with pytest.warns(ResultsWarning, match="samples/part-00002.parquet cannot be read as Parquet"):
        run = read_run(w.path)
    assert run.samples.height == 4 and run.measurements.height == 3


def test_a_damaged_merged_file_is_left_out_and_named(tmp_path):
    w = _writer(tmp_path)
    w.finish("complete")
    (w.path / "chunks" / MERGED).write_bytes(b"cut short")
    with pytest.warns(ResultsWarning, match=f"chunks/{MERGED} cannot be read as Parquet.*every chunks row"):
        run = read_run(w.path)
    assert run.chunks.height == 0 and run.measurements.height == 3


def _old_part(path, table: str, version: int, data: dict) -> None:
    """A part as a harness of `version` wrote it: its columns, its version in the metadata."""
    arrow = pa.table(data).replace_schema_metadata({b"harness_schema_version": str(version).encode(),
                                                     b"harness_table": table.encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


def _old_run(tmp_path, version: int = 4):
    """A run of schema v4 (before the workload columns): seq_len_kv is not stored and reads as seq_len."""
    w = _writer(tmp_path, n=1)
    run = w.path
    cols = [n for n in table_schema("measurements").names
            if n not in {c for v in range(version + 1, SCHEMA_VERSION + 1) for c in ADDED[v].get("measurements", {})}]
    row = {n: pa.array([None], table_schema("measurements").field(n).type) for n in cols}
    row.update(run_id=pa.array(["r"]), measurement_id=pa.array(["m5"]), seq_len=pa.array([4096], pa.int32()),
               time_ns=pa.array([2.0e6]))
    _old_part(run / "measurements" / "part-00005.parquet", "measurements", version, row)
    for t in ("chunks", "samples", "probes"):
        pq.write_table(table_schema(t).empty_table().replace_schema_metadata(
            {b"harness_schema_version": str(version).encode(), b"harness_table": t.encode()}),
            run / t / "part-00005.parquet")
    return w


def test_an_old_version_part_is_migrated_on_read_and_after_compaction(tmp_path):
    w = _old_run(tmp_path)
    before = _frames(w.path)
    m5 = before["measurements"].filter(before["measurements"]["measurement_id"] == "m5").row(0, named=True)
    assert (m5["seq_len_kv"], m5["page_size"], m5["gate_max_ratio"]) == (4096, None, None)  # v5's copy rule, nulls
    w.finish("complete")  # v4 and v9 parts together: migrated to v9 in the merged file
    meta = pq.read_schema(w.path / "measurements" / MERGED).metadata
    assert meta[b"harness_schema_version"] == str(SCHEMA_VERSION).encode()
    assert [n for n, _ in json.loads(meta[PARTS_KEY])] == ["part-00000.parquet", "part-00005.parquet"]
    after = _frames(w.path)
    for table in TABLES4:
        assert after[table].equals(before[table]), table


def test_parts_of_one_old_version_stay_at_it_when_merged(tmp_path):
    folder = tmp_path / "measurements"
    for i in range(2):
        _old_part(folder / f"part-0000{i}.parquet", "measurements", 4,
                  {"run_id": ["r"], "measurement_id": [f"m{i}"], "seq_len": pa.array([128 * (i + 1)], pa.int32())})
    assert compact_table(folder, "measurements") == 2
    stored = pq.read_table(folder / MERGED)
    assert stored.schema.metadata[b"harness_schema_version"] == b"4"  # values as stored, not rewritten
    assert stored.column_names == ["run_id", "measurement_id", "seq_len"]


def test_profiling_files_of_the_retired_schema_are_migrated_not_refused(tmp_path):
    w = _writer(tmp_path, n=0)
    w.finish("complete")
    for version, extra in ((1, {}), (2, {"check_method": ["event"], "check_time_ns": [5.0], "check_rate_per_s": [2.0]})):
        cols = {n: pa.array([None], table_schema("peaks").field(n).type) for n in table_schema("peaks").names
                if n not in ADDED[9]["peaks"]}
        arrow = pa.table({**cols, "run_id": ["r"], "kernel": [f"peak-v{version}"], "rate_per_s": [1e15], **extra})
        arrow = arrow.replace_schema_metadata({b"harness_trace_schema_version": str(version).encode(),
                                               b"harness_table": b"peaks"})
        (w.path / "peaks").mkdir(exist_ok=True)
        pq.write_table(arrow, w.path / "peaks" / f"part-0000{version - 1}.parquet")
    rows = read_rows(w.path, "peaks")
    assert [(r["kernel"], r["check_method"], r["rate_per_s"]) for r in rows] == [("peak-v1", None, 1e15),
                                                                                ("peak-v2", "event", 1e15)]
    assert set(rows[0]) == set(table_schema("peaks").names)
    compact_run(w.path)
    assert _files(w.path, "peaks") == [MERGED] and read_rows(w.path, "peaks") == rows


def test_a_newer_version_is_refused_naming_the_file(tmp_path):
    w = _writer(tmp_path, n=0)
    _old_part(w.path / "measurements" / "part-00000.parquet", "measurements", SCHEMA_VERSION + 1,
              {"run_id": ["r"], "measurement_id": ["m0"]})
    compact_run(w.path)  # a newer part is not merged (this harness cannot know its columns)
    assert _files(w.path, "measurements") == ["part-00000.parquet"]
    with pytest.raises(Exception, match=f"part-00000.parquet was written with results schema v{SCHEMA_VERSION + 1}"):
        read_run(w.path)


def test_a_killed_run_ended_by_its_parent_is_merged_and_reads_the_same(tmp_path):
    from harness.results import end_abandoned_run

    w = _writer(tmp_path)  # its process was killed: parts only, still `running`
    before = _frames(w.path)
    assert end_abandoned_run(w.path, "failed", "worker killed by SIGKILL")
    run = read_run(w.path)
    assert (run.info["status"], run.info["status_detail"]) == ("failed", "worker killed by SIGKILL")
    for table in TABLES4:
        assert _files(w.path, table) == [MERGED] and getattr(run, table).equals(before[table]), table
    assert not end_abandoned_run(w.path, "failed", "again")  # only a run still `running` is changed
