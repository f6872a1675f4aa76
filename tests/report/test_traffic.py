"""Bytes moved, GB/s and the share of the read roof in every view of a run: the aggregate rows, the terminal tables of
`bench sustained`, the report's tables and the JSON/CSV rows; and the shape text that says what was timed (S_q and
S_kv, page size, window, varlen), in the report header and the JSON rows alike."""

from __future__ import annotations

import pytest

from harness.analysis import aggregate_repeats, shape_text
from harness.profiling import Roof
from harness.report import sustained_figures, sustained_tables

READ = Roof(label="read-stream", kind="memory", value=4.6e12, clock_mhz=1585.0, clock_source="inband")
SHAPE = dict(dtype="bfloat16", batch=16, heads_q=32, heads_kv=8, seq_len=1, seq_len_kv=32768, head_dim_qk=128,
             head_dim_v=128, causal=True, window=None, page_size=16, varlen=None)


def _rows(times_ns=(480_000.0, 482_000.0, 490_000.0), nbytes=2.1476e9):
    return [{"config_index": 0, "input_label": "gaussian:0.1", "kernel": "triton-splitkv", "status": "ok", "repeat": i,
             "time_ns": t, "bytes_per_launch": nbytes, "flops_per_launch": 8.6e9, **SHAPE} for i, t in enumerate(times_ns)]


def test_an_aggregate_row_carries_the_bytes_and_gb_per_s_of_its_median_time():
    (a,) = aggregate_repeats(_rows())
    assert a["bytes_per_launch"] == 2.1476e9 and a["gb_per_s"] == pytest.approx(2.1476e9 / 482_000.0)
    (old,) = aggregate_repeats(_rows(nbytes=None))  # a run written before schema v5 has no bytes: no GB/s
    assert old["gb_per_s"] is None


def test_json_rows_hold_bytes_gb_per_s_the_read_roof_share_and_the_shape():
    (row,) = sustained_figures(aggregate_repeats(_rows()), read_roof=READ)
    gb = 2.1476e9 / 482_000.0
    assert row["bytes_per_launch"] == 2.1476e9 and row["gb_per_s"] == pytest.approx(gb)
    assert row["read_roof_pct"] == pytest.approx(100 * gb * 1e9 / 4.6e12) and row["read_roof_gb_per_s"] == 4600.0
    assert row["shape"] == "B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal page=16 bfloat16"
    (bare,) = sustained_figures(aggregate_repeats(_rows()))  # no peaks with the run: no share, the bytes still
    assert bare["read_roof_pct"] is None and bare["gb_per_s"] == pytest.approx(gb)


def test_the_terminal_table_shows_mb_per_launch_gb_per_s_and_the_share_of_the_read_roof():
    tables = sustained_tables(aggregate_repeats(_rows()), read_roof=READ)
    power = next(t for t in tables if "traffic" in t.title)
    row = dict(zip(power.columns, power.rows[0]))
    assert (row["MB/launch"], row["GB/s"], row["% of read roof"]) == ("2148", "4456", "96.9 %")
    assert "of the measured read-stream (4600 GB/s at 1585 MHz)" in power.caption
    plain = next(t for t in sustained_tables(aggregate_repeats(_rows())) if "traffic" in t.title)
    assert dict(zip(plain.columns, plain.rows[0]))["% of read roof"] == "-" and "bench peaks --into" in plain.caption


@pytest.mark.parametrize("extra, text", [
    ({}, "B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal page=16 bfloat16"),
    ({"page_size": None, "window": 256}, "B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal window=256 bfloat16"),
    ({"page_size": None, "varlen": "uniform"}, "B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal varlen=uniform bfloat16"),
    ({"page_size": None, "seq_len": 32768}, "B=16 H=32/8 S=32768 d=128/128 causal bfloat16"),  # self-attention
    ({"page_size": None, "seq_len": 4096, "seq_len_kv": None}, "B=16 H=32/8 S=4096 d=128/128 causal bfloat16"),  # pre-v5
    ({"page_size": None, "seq_len": 64, "seq_len_kv": 64, "varlen": "given"},  # lengths vary: S_kv is the longest
     "B=16 H=32/8 S_q=64 S_kv=64 d=128/128 causal varlen=given bfloat16"),
])
def test_the_shape_text_names_what_a_decode_run_timed(extra, text):
    assert shape_text({**SHAPE, **extra}) == text


def test_a_decode_runs_report_header_names_s_kv_and_the_page_size():
    from pathlib import Path

    from harness.report import build_report
    from harness.results import read_run

    run = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "20261204-201000-round2-decode-ab87f9"
    rep = build_report(read_run(run), figures=False)
    assert "B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal page=16 bfloat16" in rep.header
    assert rep.read_roof.label == "read-stream"
    power = next(t for s in rep.sections for t in s.tables if "traffic" in t.title)
    cells = {(r[0], r[1]): dict(zip(power.columns, r)) for r in power.rows}
    assert cells[("gaussian:0.1 page none", "triton-splitkv")]["% of read roof"] == "96.7 %"
