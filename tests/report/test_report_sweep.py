"""The report's sweep section: the swept shape columns found in the timed rows, GB/s from the run's own bytes,
TFLOP/s from its FLOPs, the roofs' shares where the run holds peaks, and the figure against the variable with
the most values."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.report._sweep_section import sweep_points, sweep_section, sweep_table


def _row(kernel, s_kv, page, t_ns, *, repeat=0, status="ok", bytes_per_launch=None, flops=None):
    return {"kernel": kernel, "input_source": "gaussian:0.1", "batch": 8, "heads_q": 32, "heads_kv": 8, "seq_len": 1,
            "seq_len_kv": s_kv, "head_dim_qk": 128, "head_dim_v": 128, "window": None, "page_size": page,
            "varlen": None, "time_ns": t_ns, "status": status, "repeat": repeat,
            "bytes_per_launch": bytes_per_launch if bytes_per_launch is not None else 2.0 * s_kv * 8 * 256 * 8,
            "flops_per_launch": flops if flops is not None else 2.0 * 32 * 256 * s_kv * 8}


ROWS = [_row(k, s, p, t * (1 + 0.1 * r), repeat=r) for k in ("sdpa-kvcache", "triton-splitkv")
        for s, t in ((1024, 10_000.0), (4096, 30_000.0), (16384, 100_000.0)) for p in (16, 256) for r in range(3)]


def test_points_are_medians_per_kernel_source_and_point_with_gb_and_tflop_per_s():
    swept, points = sweep_points(ROWS + [_row("sdpa-kvcache", 1024, 16, None, status="error")])
    assert swept == ["seq_len_kv", "page_size"] and len(points) == 12
    p = next(p for p in points if p["kernel"] == "triton-splitkv" and p["seq_len_kv"] == 4096 and p["page_size"] == 256)
    assert p["repeats"] == 3 and p["time_ns"] == pytest.approx(33_000.0)  # the median of 30, 33, 36 us
    assert p["gb_per_s"] == pytest.approx(2.0 * 4096 * 8 * 256 * 8 / 33_000.0)
    assert p["tflop_per_s"] == pytest.approx(2.0 * 32 * 256 * 4096 * 8 / 33_000.0 * 1e-3)


def test_no_section_without_a_swept_column_and_no_gb_per_s_before_schema_v5():
    one = [r for r in ROWS if r["seq_len_kv"] == 1024 and r["page_size"] == 16]
    assert sweep_points(one) == ([], [])
    old = [{**r, "bytes_per_launch": None} for r in ROWS]
    assert all(p["gb_per_s"] is None for p in sweep_points(old)[1])
    assert sweep_section(SimpleNamespace(measurements=one, path=None)) is None


def test_the_table_names_what_varies_its_spread_and_the_roofs_shares(tmp_path):
    from harness.profiling import Roof

    swept, points = sweep_points(ROWS)
    read = Roof(label="read-stream", kind="memory", value=4.6e12, clock_mhz=1755.0, clock_source="inband")
    t = sweep_table(swept, points, read_roof=read, gemm_roof=8.0e14)
    assert t.columns == ("kernel", "input", "S_kv", "page", "repeats", "median us", "min us", "max us", "range", "GB/s",
                         "TFLOP/s", "% of read-stream", "% of bf16 GEMM")
    first = dict(zip(t.columns, t.rows[0]))
    assert (first["kernel"], first["S_kv"], first["page"], first["repeats"]) == ("sdpa-kvcache", "1024", "16", "3")
    # 10, 11, 12 us: microseconds as plain numbers, and the spread of the repeats
    assert (first["median us"], first["min us"], first["max us"], first["range"]) == ("11.00", "10.00", "12.00",
                                                                                   "18.18 %")
    gb = 2.0 * 1024 * 8 * 256 * 8 / 11_000.0
    assert first["GB/s"] == f"{gb:.4g}" and first["% of read-stream"] == f"{gb * 1e9 / 4.6e12:.1%}"
    assert "read-stream: 4600 GB/s at 1755 MHz" in t.caption
    big = dict(zip(t.columns, next(r for r in t.rows if r[2] == "16384")))
    assert big["median us"] == "110.0" and "e+" not in " ".join(" ".join(r) for r in t.rows)


def test_a_sweep_run_opens_its_report_with_the_sweep():
    from harness.report import build_report
    from harness.results import read_run

    run = read_run(Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "20261203-171414-decode-kv-warm-1b1362")
    titles = [s.title for s in build_report(run, figures=False).sections]
    assert titles[0] == "Sweep" and titles.count("Sweep") == 1 and titles[-1] == "Provenance"


def test_the_section_draws_three_panels_against_the_variable_with_the_most_values(tmp_path):
    sec = sweep_section(SimpleNamespace(measurements=ROWS, path=tmp_path))
    assert sec.title == "Sweep" and "S_kv, page" in sec.text
    (fig,) = sec.figures
    assert fig.png[:8] == b"\x89PNG\r\n\x1a\n" and fig.title == "Sweep over S_kv" and "x page" in fig.caption
