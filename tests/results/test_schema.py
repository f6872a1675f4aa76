"""The results schema: table names, column types, the version in the metadata and the v1 -> ... -> v10
migrations (driven by the schema's ADDED table)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from harness.results._schema import (
    HISTORY_TABLE,
    MIGRATIONS,
    OPTIONAL_TABLES,
    SCHEMA_VERSION,
    TABLES,
    V2_CHIPLET_COLUMNS,
    V3_RUNS_COLUMNS,
    V4_GATE_COLUMNS,
    V5_WORKLOAD_COLUMNS,
    V6_RUNS_COLUMNS,
    V7_MODEL_ERROR_COLUMNS,
    _arrow_type,
    columns,
    polars_schema,
    table_schema,
)


def test_tables_and_version():
    assert TABLES == ("runs", "measurements", "chunks", "samples", "probes", "model_error", "in_model", "traces",
                      "peaks")
    assert OPTIONAL_TABLES == ("model_error", "in_model", "traces", "peaks")
    assert SCHEMA_VERSION == 10 and set(MIGRATIONS) == {1, 2, 3, 4, 5, 6, 7, 8, 9}
    assert HISTORY_TABLE == "history" and HISTORY_TABLE not in TABLES  # the history store's, not a run's


@pytest.mark.parametrize("table", ["runs", "measurements", "chunks", "samples", "probes", "model_error", "in_model",
                                   "traces", "peaks"])
def test_schema_metadata_names_the_version_and_table(table):
    s = table_schema(table)
    assert s.metadata[b"harness_schema_version"] == b"10"
    assert s.metadata[b"harness_table"] == table.encode()
    assert s.names == columns(table) and s.names[0] == "run_id"
    assert table_schema(table) is s  # built once


def test_column_types():
    m = table_schema("measurements")
    assert m.field("time_ns").type == pa.float64() and m.field("window_launches").type == pa.int64()
    assert m.field("repeat").type == pa.int32() and m.field("causal").type == pa.bool_()
    assert m.field("kernel").type == pa.string()
    assert table_schema("samples").field("chiplet_clocks_mhz").type == pa.list_(pa.float64())
    assert _arrow_type("list<int64>") == pa.list_(pa.int64())
    assert _arrow_type("list<float32>") == pa.list_(pa.float32())
    with pytest.raises(KeyError):
        _arrow_type("float16")
    assert {"window_start_ns", "energy_per_launch_j", "slowest_chiplet_share"} <= set(m.names)
    assert table_schema("probes").names == ["run_id", "measurement_id", "t_ns", "clock_mhz", "clock_min_mhz",
                                            "clock_max_mhz", "blocks", "span_ns"]


def test_v1_measurements_gain_null_chiplet_columns_and_other_tables_pass_through():
    v1 = pa.table({"run_id": ["r", "r"], "time_ns": [1.0, 2.0]})
    up = MIGRATIONS[1]("measurements", v1)
    assert up.column_names == ["run_id", "time_ns", *V2_CHIPLET_COLUMNS]
    for name in V2_CHIPLET_COLUMNS:
        assert up.column(name).null_count == 2
        assert up.schema.field(name).type == table_schema("measurements").field(name).type
    assert MIGRATIONS[1]("chunks", v1) is v1
    half = v1.append_column("chiplet_count", pa.array([8, 8], pa.int32()))
    kept = MIGRATIONS[1]("measurements", half)
    assert kept.column("chiplet_count").to_pylist() == [8, 8]  # present columns are kept, not nulled


def test_polars_schema_matches_arrow():
    pl = pytest.importorskip("polars")
    s = polars_schema("samples")
    assert s["chiplet_clocks_mhz"] == pl.List(pl.Float64) and s["t_ns"] == pl.Int64
    assert list(s.names()) == columns("samples")


def test_v2_runs_gain_null_contention_and_timing_note_and_other_tables_pass_through():
    v2 = pa.table({"run_id": ["r"], "status": ["complete"]})
    up = MIGRATIONS[2]("runs", v2)
    assert up.column_names == ["run_id", "status", "contention_json", "timing_note"]
    assert up.column("contention_json").null_count == 1 and up.column("timing_note").null_count == 1
    assert MIGRATIONS[2]("measurements", v2) is v2


def test_v3_measurements_gain_null_declared_gate_columns_and_other_tables_pass_through():
    v3 = pa.table({"run_id": ["r", "r"], "gate_max_abs_diff": [0.01, 0.02]})
    up = MIGRATIONS[3]("measurements", v3)
    assert up.column_names == ["run_id", "gate_max_abs_diff", *V4_GATE_COLUMNS]
    for name in V4_GATE_COLUMNS:
        assert up.column(name).null_count == 2
        assert up.schema.field(name).type == table_schema("measurements").field(name).type
    assert up.column("gate_max_abs_diff").to_pylist() == [0.01, 0.02]
    assert MIGRATIONS[3]("runs", v3) is v3 and MIGRATIONS[3]("chunks", v3) is v3


def test_v4_measurements_gain_the_workload_columns_seq_len_kv_from_seq_len_and_other_tables_pass_through():
    v4 = pa.table({"run_id": ["r", "r"], "seq_len": pa.array([128, 4096], pa.int32())})
    up = MIGRATIONS[4]("measurements", v4)
    assert up.column_names == ["run_id", "seq_len", *V5_WORKLOAD_COLUMNS]
    assert up.column("seq_len_kv").to_pylist() == [128, 4096]  # v4 knew self-attention only
    for name in V5_WORKLOAD_COLUMNS:
        assert up.schema.field(name).type == table_schema("measurements").field(name).type
        if name != "seq_len_kv":
            assert up.column(name).null_count == 2
    assert table_schema("measurements").field("kv_lens").type == pa.list_(pa.int32())
    assert MIGRATIONS[4]("runs", v4) is v4 and MIGRATIONS[4]("chunks", v4) is v4


def test_v6_model_error_rows_gain_the_fp64_reference_and_null_dnll_and_other_tables_pass_through():
    v6 = pa.table({"run_id": ["r", "r"], "kl_mean_nats": [1e-4, 2e-4]})
    up = MIGRATIONS[6]("model_error", v6)
    assert up.column_names == ["run_id", "kl_mean_nats", *V7_MODEL_ERROR_COLUMNS]
    assert up.column("reference").to_pylist() == ["fp64", "fp64"]
    assert up.column("dnll_nats").null_count == 2 and up.column("dnll_mean_nats").null_count == 2
    assert up.schema.field("dnll_nats").type == pa.list_(pa.float32())
    assert MIGRATIONS[6]("measurements", v6) is v6
    assert MIGRATIONS[6]("model_error", up).column_names == up.column_names  # already there: unchanged


def test_model_error_columns_keep_every_token():
    m = table_schema("model_error")
    assert m.field("kl_nats").type == pa.list_(pa.float32()) and m.field("top1_match").type == pa.list_(pa.bool_())
    assert m.field("layer").type == pa.int32() and {"kl_mean_nats", "kl_max_nats", "top1_agreement"} <= set(m.names)


def _v3_fixture_runs():
    from pathlib import Path

    import pyarrow.parquet as pq

    root = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
    runs = [p for p in sorted(root.iterdir()) if (p / "runs.parquet").exists()
            and pq.read_schema(p / "runs.parquet").metadata[b"harness_schema_version"] == b"3"]
    assert runs, "the H200 fixtures include runs written at schema v3"
    return runs


def test_the_schema_is_what_the_h200_runs_of_v3_hold_plus_the_v4_and_v5_columns():
    # Runs written by the device machine at v3: every table's stored columns, in order and type, are the
    # declared ones less what v4 added (a misspelt or retyped column would not read back their data).
    import pyarrow.parquet as pq

    added = {"measurements": V4_GATE_COLUMNS + V5_WORKLOAD_COLUMNS, "runs": V6_RUNS_COLUMNS}
    assert V3_RUNS_COLUMNS  # v3's own additions are stored in these runs
    checked = set()
    for run in _v3_fixture_runs():
        for table in TABLES:
            if table in ("traces", "peaks"):
                continue  # written at the retired profiling schema's version (test_legacy_profiling_files_...)
            if table in OPTIONAL_TABLES:
                assert not (run / table).exists()
                continue
            files = [run / "runs.parquet"] if table == "runs" else sorted((run / table).glob("*.parquet"))
            for f in files[:1]:
                stored = pq.read_schema(f)
                assert stored.metadata[b"harness_table"] == table.encode()
                want = table_schema(table).remove_metadata()
                v3 = pa.schema([fld for fld in want if fld.name not in added.get(table, ())])
                assert stored.remove_metadata().equals(v3), (run.name, table)
                checked.add(table)
    assert checked == set(TABLES) - set(OPTIONAL_TABLES)


def test_a_v3_run_reads_back_with_the_v4_and_v5_columns_and_no_model_error_rows():
    from harness.results import read_rows

    run = _v3_fixture_runs()[0]
    rows = read_rows(run, "measurements")
    assert rows and all(r["gate_max_ratio"] is None and r["gate_reference"] is None for r in rows)
    assert all(r["seq_len_kv"] == r["seq_len"] and r["page_size"] is None and r["bytes_per_launch"] is None
               for r in rows)
    assert read_rows(run, "model_error") == []


def test_v5_runs_gain_a_null_machine_fingerprint_and_the_history_table_is_declared():
    v5 = pa.table({"run_id": ["r"], "driver": ["580.159.04"]})
    up = MIGRATIONS[5]("runs", v5)
    assert up.column_names == ["run_id", "driver", "machine_json"] and up.column("machine_json").null_count == 1
    m = pa.table({"run_id": ["r"], "time_ns": [1.0]})
    assert MIGRATIONS[5]("measurements", m) is m
    h = table_schema(HISTORY_TABLE)
    assert h.metadata[b"harness_table"] == b"history" and h.field("time_ns_repeats").type == pa.list_(pa.float64())
    assert {"night", "series", "role", "fingerprint", "software", "protocol", "kernel_commit"} <= set(h.names)


def test_public_names_exist():
    import harness.results._schema as schema

    assert all(hasattr(schema, name) for name in schema.__all__) and "table_schema" in schema.__all__


def test_v7_tables_pass_through_to_v8_whose_in_model_table_is_new():
    # v8 adds a table and changes no column: a v7 run is read as it was, with no in_model rows (no folder).
    v7 = pa.table({"run_id": ["r"], "time_ns": [1.0]})
    for table in ("runs", "measurements", "chunks", "samples", "probes", "model_error"):
        assert MIGRATIONS[7](table, v7) is v7
    im = table_schema("in_model")
    assert im.field("layer_attention_ns").type == pa.list_(pa.float64()) and im.field("random_weights").type == pa.bool_()
    assert {"attention_ns", "rest_ns", "attention_share", "instrumentation_cost_ns", "pass_inband_clock_mhz"} <= set(im.names)


def test_file_version_reads_the_results_key_and_maps_the_retired_profiling_schema_to_v8():
    from harness.results._schema import LEGACY_PROFILING, file_version

    assert file_version({b"harness_schema_version": b"3", b"harness_table": b"runs"}) == 3
    assert file_version({b"harness_trace_schema_version": b"2", b"harness_table": b"peaks"}) == 8
    assert file_version({b"harness_trace_schema_version": b"1"}) == 8 == LEGACY_PROFILING[b"harness_trace_schema_version"]
    assert file_version({b"harness_schema_version": b"9", b"harness_trace_schema_version": b"1"}) == 9  # results key wins
    assert file_version({b"harness_table": b"runs"}) == 0 and file_version(None) == 0 and file_version({}) == 0


def test_migrate_walks_every_version_and_fills_each_added_column_as_ADDED_says():
    from harness.results._schema import ADDED, V9_PEAKS_COLUMNS, migrate

    assert sorted(ADDED) == list(range(2, SCHEMA_VERSION + 1))  # one entry per version: nothing skipped
    v1 = pa.table({"run_id": ["r", "r"], "seq_len": pa.array([128, 4096], pa.int32())})
    up = migrate("measurements", v1, 1)
    assert up.column_names == ["run_id", "seq_len", *V2_CHIPLET_COLUMNS, *V4_GATE_COLUMNS, *V5_WORKLOAD_COLUMNS]
    assert up.column("seq_len_kv").to_pylist() == [128, 4096] and up.column("window").null_count == 2
    assert up.schema.field("seq_len_kv").type == pa.int32() and up.schema.field("kv_lens").type == pa.list_(pa.int32())
    assert migrate("measurements", v1, 5).column_names == ["run_id", "seq_len"]  # from v5 on nothing was added to it
    assert migrate("measurements", v1, SCHEMA_VERSION) is v1
    me = migrate("model_error", pa.table({"run_id": ["r"]}), 3)
    assert me.column_names == ["run_id", *V7_MODEL_ERROR_COLUMNS] and me.column("reference").to_pylist() == ["fp64"]
    assert migrate("model_error", pa.table({"run_id": ["r"]}), 7).column_names == ["run_id"]  # v8, v9: no change
    runs = migrate("runs", pa.table({"run_id": ["r"]}), 1)
    assert runs.column_names == ["run_id", *V3_RUNS_COLUMNS, *V6_RUNS_COLUMNS]
    assert runs.column("machine_json").null_count == 1 and runs.schema.field("timing_note").type == pa.string()
    peaks = migrate("peaks", pa.table({"run_id": ["r", "r"], "check_method": ["event", None]}), 8)
    assert peaks.column_names == ["run_id", "check_method", "check_time_ns", "check_rate_per_s"]
    assert peaks.column("check_method").to_pylist() == ["event", None]  # present in a profiling v2 file: kept
    assert peaks.column("check_rate_per_s").null_count == 2 and set(V9_PEAKS_COLUMNS) <= set(peaks.column_names)
    assert peaks.schema.field("check_time_ns").type == pa.float64()
    assert MIGRATIONS[8]("traces", v1) is v1 and MIGRATIONS[8].__name__ == "to_v9"
    # v10: an in_model row of v8 or v9 did not split the kernel's refresh() out of its time: null, not 0
    im = migrate("in_model", pa.table({"run_id": ["r"], "attention_ns": [1.0]}), 9)
    assert im.column_names == ["run_id", "attention_ns", "pass_refresh_ns", "refresh_ns"]
    assert im.column("refresh_ns").null_count == 1 and im.schema.field("pass_refresh_ns").type == pa.list_(pa.float64())


def test_traces_and_peaks_are_tables_of_the_one_schema():
    t, p = table_schema("traces"), table_schema("peaks")
    assert t.metadata[b"harness_schema_version"] == p.metadata[b"harness_schema_version"] == str(SCHEMA_VERSION).encode()
    assert t.field("launch_id").type == pa.int32() and t.field("warm_launches").type == pa.int64()
    assert t.field("tensor_pct").type == pa.float64() and t.field("metrics_json").type == pa.string()
    assert p.field("settled").type == pa.bool_() and p.field("repeat").type == pa.int32()
    assert p.names[-3:] == ["check_method", "check_time_ns", "check_rate_per_s"]
    assert t.names[:4] == ["run_id", "trace_id", "tool", "kernel"] and len(t.names) == 34 and len(p.names) == 22


def test_the_traces_and_peaks_the_h200_runs_hold_are_the_declared_tables():
    # Written by the device machine, most at the retired profiling schema (v1 peaks lack the second timing), the
    # 2026-12-05 peaks at v9: every stored column, in order and type, is the declared one (a misspelt or retyped column would not read back their data).
    from pathlib import Path

    import pyarrow.parquet as pq

    from harness.results._schema import ADDED, file_version

    root = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
    seen = set()
    for f in sorted(root.glob("*/*/merged.parquet")):
        table = f.parent.name
        if table not in ("traces", "peaks"):
            continue
        stored = pq.read_schema(f)
        # v8 files (before 2026-12-05) still carry the retired profiling schema's marker; later ones are v9 as written.
        version = file_version(stored.metadata)
        assert version == 9 or (version == 8 and b"harness_trace_schema_version" in stored.metadata), f
        want = table_schema(table).remove_metadata()
        v1 = pa.schema([fld for fld in want if fld.name not in ADDED[9].get(table, {})])
        assert stored.remove_metadata().equals(want) or stored.remove_metadata().equals(v1), f
        seen.add((table, stored.remove_metadata().equals(want)))
    assert {t for t, _ in seen} == {"traces", "peaks"}


def test_the_declared_tables_are_the_snapshot_of_this_version():
    # tests/results/schema-v10.json: every table's columns and types as v10 declares them. A column added, removed,
    # renamed or retyped without a new version (and its ADDED entry) fails here; a new version adds its snapshot.
    import json
    from pathlib import Path

    snap = json.loads((Path(__file__).parent / f"schema-v{SCHEMA_VERSION}.json").read_text())
    assert snap["schema_version"] == SCHEMA_VERSION
    assert list(snap["tables"]) == [*TABLES, HISTORY_TABLE]
    for table, cols in snap["tables"].items():
        assert columns(table) == [n for n, _ in cols], table
        assert [table_schema(table).field(n).type for n, _ in cols] == [_arrow_type(t) for _, t in cols], table


def test_a_fill_that_is_neither_copy_nor_value_is_refused(monkeypatch):
    from harness.results._schema import ADDED, migrate

    monkeypatch.setitem(ADDED, 9, {"peaks": {"check_method": ("guess", "x")}})
    with pytest.raises(ValueError, match=r"^ADDED\[9\]\['peaks'\]\['check_method'\] = \('guess', 'x'\): a fill is None, "
                                         r"\('copy', column\) or \('value', constant\)$"):
        migrate("peaks", pa.table({"run_id": ["r"]}), 8)
