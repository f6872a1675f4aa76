"""The report's sweep section: the swept shape columns found in the timed rows, GB/s from the run's own bytes,
TFLOP/s from its FLOPs, the roofs' shares where the run holds peaks, and the figure against the variable with
the most values."""

from __future__ import annotations

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


def test_the_table_names_what_varies_and_the_roofs_shares(tmp_path):
    swept, points = sweep_points(ROWS)
    t = sweep_table(swept, points, copy_roof=4.0e12, gemm_roof=8.0e14)
    assert t.columns == ("kernel", "input", "S_kv", "page", "repeats", "median us", "GB/s", "TFLOP/s", "% of copy",
                         "% of bf16 GEMM")
    first = t.rows[0]
    assert first[:5] == ("sdpa-kvcache", "gaussian:0.1", "1024", "16", "3") and first[5] == "11"
    gb = 2.0 * 1024 * 8 * 256 * 8 / 11_000.0
    assert first[6] == f"{gb:.4g}" and first[8] == f"{gb * 1e9 / 4.0e12:.1%}"


def test_the_section_draws_three_panels_against_the_variable_with_the_most_values(tmp_path):
    sec = sweep_section(SimpleNamespace(measurements=ROWS, path=tmp_path))
    assert sec.title == "Sweep" and "S_kv, page" in sec.text
    (fig,) = sec.figures
    assert fig.png[:8] == b"\x89PNG\r\n\x1a\n" and fig.title == "Sweep over S_kv" and "x page" in fig.caption
