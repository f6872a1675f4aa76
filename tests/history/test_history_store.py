"""The history store: a night appended from a recorded H200 run through the results schema, read back and migrated,
and the refusals that keep a missing or damaged history from passing as an empty one."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import ResultsError
from harness.history import append_runs, night_files, night_rows, read_history, series_key
from harness.results import HISTORY_TABLE, SCHEMA_VERSION, read_run_rows, table_schema

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
NIGHTLY = H200 / "20261201-225444-nightly-c88974"  # sdpa-cudnn x gaussian:0.1 / gaussian:1, S=8192, 3 repeats
DECODE = H200 / "20261203-173332-decode-kv32k-settle-bfbbe1"  # B16 Skv32768 page 16, two decode kernels


def test_a_night_holds_one_row_per_series_with_every_repeat(tmp_path):
    path = append_runs(tmp_path / "h", [(NIGHTLY, "kernel")], night="2026-12-01")
    assert path.parent == tmp_path / "h" and path.name.startswith("night-2026-12-01-20261201-225444-nightly")
    meta = pq.read_schema(path).metadata
    assert meta[b"harness_table"] == b"history" and meta[b"harness_schema_version"] == str(SCHEMA_VERSION).encode()
    rows = read_history(tmp_path / "h").table.to_pylist()
    assert {r["series"] for r in rows} == {"sdpa-cudnn | gaussian:0.1 | B1 H32/8 S8192 d128 causal | bf16",
                                          "sdpa-cudnn | gaussian:1 | B1 H32/8 S8192 d128 causal | bf16"}
    run = read_run_rows(NIGHTLY)
    for r in rows:
        ms = [m for m in run.measurements if series_key(m) == r["series"] and m["time_ns"]]
        assert r["repeats"] == len(ms) == len(r["time_ns_repeats"]) and r["status"] == "timed"
        assert sorted(r["time_ns_repeats"]) == sorted(m["time_ns"] for m in ms)
        geo = 1.0
        for m in ms:
            geo *= m["time_ns"] ** (1 / len(ms))
        assert r["time_ns"] == pytest.approx(geo, rel=1e-12)
        assert r["cycles_clock"] == "inband" and r["cycles_repeats"] == [m["cycles_per_launch_inband"] for m in
                                                                         sorted(ms, key=lambda m: m["repeat"])]
        assert r["driver"] == "580.159.04" and r["power_limit_w"] == 700.0 and "driver 580.159.04" in r["fingerprint"]
        assert r["software"].startswith("torch 2.11.0; cuda 13.0; cudnn 91900; triton 3.6.0")
        assert "window" in r["protocol"] and r["night"] == "2026-12-01" and r["role"] == "kernel"
        assert r["gpu_serial"] is None  # a v5 run recorded no serial: unknown, not made up


def test_appending_the_same_run_twice_changes_nothing_and_a_decode_point_keeps_its_shape(tmp_path):
    first = append_runs(tmp_path, [(DECODE, "kernel")])
    assert first is not None and append_runs(tmp_path, [(DECODE, "kernel")]) is None
    assert len(night_files(tmp_path)) == 1
    series = set(read_history(tmp_path).table.column("series").to_pylist())
    assert "triton-splitkv | gaussian:0.1 | B16 H32/8 Sq1 Skv32768 d128 causal page16 | bf16" in series


def test_roles_name_the_control(tmp_path):
    append_runs(tmp_path, [(NIGHTLY, "kernel"), (DECODE, "control")], night="n1")
    rows = read_history(tmp_path).table.to_pylist()
    assert {r["role"] for r in rows if r["kernel"] == "sdpa-kvcache"} == {"control"}
    assert {r["role"] for r in rows if r["kernel"] == "sdpa-cudnn"} == {"kernel"}
    assert len(night_files(tmp_path)) == 1  # one night, one file


def test_missing_empty_or_file_histories_are_refused_by_name(tmp_path):
    with pytest.raises(ResultsError, match="no such folder"):
        read_history(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="holds no night"):
        read_history(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsError, match="is a file"):
        append_runs(tmp_path / "file", [(NIGHTLY, "kernel")])
    with pytest.raises(ResultsError, match="--night 'a b'"):
        append_runs(tmp_path / "h", [(NIGHTLY, "kernel")], night="a b")


def test_stray_files_are_ignored_with_a_warning_and_a_newer_night_is_refused(tmp_path):
    append_runs(tmp_path, [(NIGHTLY, "kernel")], night="n1")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.warns(Warning, match="notes.txt"):
        assert read_history(tmp_path).table.num_rows == 2
    future = table_schema(HISTORY_TABLE).with_metadata({b"harness_schema_version": str(SCHEMA_VERSION + 1).encode(),
                                                         b"harness_table": b"history"})
    pq.write_table(pa.Table.from_pylist([], schema=future), tmp_path / "night-n2-x.parquet")
    with warnings.catch_warnings(), pytest.raises(ResultsError, match="newer than this harness"):
        warnings.simplefilter("ignore")
        read_history(tmp_path)


def test_a_series_that_timed_nothing_is_a_row_saying_why():
    run = read_run_rows(NIGHTLY)
    broken = [{**m, "status": "gate failed", "error": "max |diff| 0.1", "time_ns": None} if m["input_label"] == "gaussian:1"
              else m for m in run.measurements]
    rows = night_rows(type(run)(path=run.path, info=run.info, measurements=broken, chunks=None, samples=None,
                                probes=None), night="n")
    bad = next(r for r in rows if "gaussian:1" in r["series"])
    assert bad["status"].startswith("not timed (gate failed: max |diff| 0.1") and bad["time_ns"] is None
    assert bad["repeats"] == 0 and bad["time_ns_repeats"] is None
