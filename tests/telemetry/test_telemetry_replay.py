from __future__ import annotations

import os

import pytest

from harness.errors import ResultsError, TelemetryError
from harness.telemetry import SAMPLE_FIELDS, ReplaySampler, Sample, create_sampler, read_samples, write_samples

MS = 1_000_000


def full_sample(t_ns: int, **kw) -> Sample:
    values = dict(
        t_ns=t_ns, source="poll", sm_clock_mhz=1755.5, chiplet_clocks_mhz=(1700.25, 1755.5), mem_clock_mhz=2619.0,
        power_w=691.5, power_avg_w=690.123, energy_j=123456.789, temp_c=61.0, mem_temp_c=70.0, reasons=0x24,
        reason_names="sw_power_cap|sw_thermal", power_limited_ns=2**40 + 3, thermal_limited_ns=0, sm_util_pct=95.0,
        tensor_util_pct=69.6, fp32_util_pct=17.9, error=None,
    )
    values.update(kw)
    return Sample(**values)


def test_parquet_round_trip_keeps_every_field(tmp_path):
    samples = [
        full_sample(1_000),
        Sample(t_ns=2_000),
        Sample(t_ns=3_000, error="RuntimeError: NVML SM clock read failed"),
        Sample(t_ns=1_500, source="power_buffer", power_w=700.0),
        full_sample(4_000, chiplet_clocks_mhz=()),
    ]
    path = tmp_path / "telemetry.parquet"
    write_samples(path, samples)
    assert read_samples(path) == samples
    assert read_samples(str(path))[0].chiplet_clocks_mhz == (1700.25, 1755.5)


def test_file_layout(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    write_samples(path, [full_sample(1)])
    schema = pq.read_schema(path)
    assert tuple(schema.names) == SAMPLE_FIELDS
    assert schema.field("chiplet_clocks_mhz").type == pa.list_(pa.float64())
    assert schema.field("t_ns").type == pa.int64() and schema.field("power_w").type == pa.float64()
    assert schema.metadata[b"harness.telemetry.format"] == b"1"


def test_write_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "t.parquet"
    write_samples(path, [Sample(t_ns=1)])
    write_samples(path, [Sample(t_ns=2), Sample(t_ns=3)])
    assert [s.t_ns for s in read_samples(path)] == [2, 3]
    assert os.listdir(tmp_path) == ["t.parquet"]  # no temporary file left behind


def test_write_into_missing_directory_is_a_results_error(tmp_path):
    with pytest.raises(ResultsError, match="Cannot write telemetry"):
        write_samples(tmp_path / "nope" / "t.parquet", [Sample(t_ns=1)])


def test_older_file_without_a_column_reads_as_none(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "old.parquet"
    pq.write_table(pa.table({"t_ns": [5], "source": ["poll"], "sm_clock_mhz": [1.5], "future_col": [1]}), path)
    (s,) = read_samples(path)
    assert s == Sample(t_ns=5, sm_clock_mhz=1.5)


def test_not_a_telemetry_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"x": [1]}), bad)
    with pytest.raises(ResultsError, match="no t_ns column"):
        read_samples(bad)
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(ResultsError, match="Cannot read telemetry"):
        read_samples(junk)


def test_newer_format_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "new.parquet"
    table = pa.table({"t_ns": [1]}).replace_schema_metadata({b"harness.telemetry.format": b"2"})
    pq.write_table(table, path)
    with pytest.raises(ResultsError, match="newer than this harness reads"):
        read_samples(path)


def recording() -> list[Sample]:
    return [
        Sample(t_ns=1_000 * MS, sm_clock_mhz=1980.0, reasons=1),
        Sample(t_ns=1_005 * MS, source="power_buffer", power_w=123.0),  # not replayed
        Sample(t_ns=1_010 * MS, sm_clock_mhz=1800.0),
        Sample(t_ns=1_030 * MS, error="RuntimeError: gone"),
    ]


def test_replay_follows_the_clock_and_restamps(clock):
    r = ReplaySampler(list(reversed(recording())), clock=clock)
    r.open()
    start = clock.now
    seen = []
    for offset_ms in [0, 9, 10, 29, 30, 500]:
        clock.now = start + offset_ms * MS
        x = r.read()
        assert x.t_ns == clock.now and x.source == "replay"
        seen.append((x.sm_clock_mhz, x.error))
    assert seen == [(1980.0, None), (1980.0, None), (1800.0, None), (1800.0, None),
                    (None, "RuntimeError: gone"), (None, "RuntimeError: gone")]
    assert r.drain() == []
    assert "3 recorded poll samples (0.030 s)" in r.describe()["replay"]


def test_replay_from_a_file_through_the_factory(tmp_path, clock):
    path = tmp_path / "rec.parquet"
    write_samples(path, recording())
    r = create_sampler("replay", pci_bus_id=None, path=path, clock=clock)
    assert "not opened" in r.describe()["replay"]
    r.open()
    clock.advance(15 * MS)
    assert r.read().sm_clock_mhz == 1800.0
    assert str(path) in r.describe()["replay"]


def test_replay_needs_poll_samples_and_open(clock):
    r = ReplaySampler([Sample(t_ns=1, source="gpm", sm_util_pct=1.0)], clock=clock)
    with pytest.raises(TelemetryError, match="before open"):
        r.read()
    with pytest.raises(TelemetryError, match="no poll samples"):
        r.open()


def test_replay_docstring_says_it_is_never_a_fallback():
    assert "never a fallback" in ReplaySampler.__doc__
