"""The report section of the profiling tables on a real H200 run, hooked into its HTML page as
harness.report would, and `bench peaks` through Typer."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest
import typer
from test_profiling_proton import (
    synthetic_trace,  # tests/profiling is on sys.path (rootdir-relative imports)
)
from test_profiling_trace import FOUND, ISSUE2, ScriptedNcu
from typer.testing import CliRunner

from harness.profiling import TraceConfig, timeline_png, trace_run, write_trace_table
from harness.report import build_report, render_html, write_report
from harness.report._trace_section import (
    peaks_table,
    pipe_tables,
    roofline_points,
    trace_sections,
)
from harness.results import read_run

PEAKS = [
    {"kernel": "peak-gemm-bf16-random", "group": "gemm-bf16", "operands": "random", "unit": "FLOP",
     "work_per_launch": 2 * 8192.0**3, "time_ns": 1.654e6, "sm_clock_mhz": 1485.0, "power_w": 691.0,
     "power_limited_frac": 0.99},
    {"kernel": "peak-gemm-bf16-zero", "group": "gemm-bf16", "operands": "zero", "unit": "FLOP",
     "work_per_launch": 2 * 8192.0**3, "time_ns": 1.390e6, "sm_clock_mhz": 1755.0, "power_w": 403.0,
     "power_limited_frac": 0.0},
    {"kernel": "peak-copy-d2d", "group": "copy", "operands": "random", "unit": "byte", "work_per_launch": 2.0 * 2**30,
     "time_ns": 0.5e6, "sm_clock_mhz": 1980.0, "power_w": 500.0},
    {"kernel": "peak-exp2-mufu", "group": "exp2-mufu", "operands": "chaotic", "unit": "exp",
     "work_per_launch": 64.0 * 32768 * 4096, "time_ns": 2.0e6},
]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    run = Path(shutil.copytree(ISSUE2, tmp_path_factory.mktemp("r") / ISSUE2.name))
    trace_run(TraceConfig(run_dir=run, kernels=("sdpa-cudnn",)), runner=ScriptedNcu(), which=FOUND)
    write_trace_table(run, "peaks", [{**p, "run_id": run.name, "peaks_run_id": "peaks-1", "repeat": 0, "status": "ok",
                                      "rate_per_s": p["work_per_launch"] / (p["time_ns"] * 1e-9)} for p in PEAKS])
    (run / "traces" / "timeline-triton-fp8-lean-gaussian_0.1.png").write_bytes(timeline_png(synthetic_trace()))
    return run


def test_ncu_beside_gpm_agrees_within_five_points_for_cudnn(profiled):
    (sec_pipe, sec_tl, sec_peaks) = trace_sections(read_run(profiled))
    assert sec_pipe.title == "Pipe counters (ncu) and GPM" and len(sec_pipe.tables) == 2
    util = {r[:2]: r for r in sec_pipe.tables[1].rows}
    row = util[("sdpa-cudnn", "gaussian:0.1")]
    # ncu 74.82 % of active cycles x GPM SM util 96.0 % = 71.8 % expected; GPM read 69.8 % in the run
    assert row[2] == "74.8" and row[7] == "96.0" and row[8] == "71.8" and row[9] == "69.8"
    assert row[10] == "-2.1" and row[11] == "agree (within 5 pts)"
    cycles = sec_pipe.tables[0].rows[0]
    assert cycles[3] == "3.3236" and cycles[5] == "5.790" and cycles[6] == "4.332" and cycles[10] == "1.54"
    assert cycles[-1] == "elapsed"
    assert sec_tl.figures[0].png[:4] == b"\x89PNG"
    assert sec_peaks.figures[0].key == "roofline"


def test_peaks_table_shows_the_operand_dependent_clock():
    rows = [{**p, "rate_per_s": p["work_per_launch"] / (p["time_ns"] * 1e-9)} for p in PEAKS]
    t = {r[0]: r for r in peaks_table(rows).rows}
    assert t["gemm-bf16-random"][2:5] == ("664.8 TFLOP/s", "1.6540", "1485")
    assert t["gemm-bf16-zero"][2:5] == ("791.0 TFLOP/s", "1.3900", "1755")
    assert t["copy-d2d"][2] == "4.29 TB/s" and t["exp2-mufu"][2] == "4295.0 Gexp/s"


def test_each_peak_beside_its_second_method_and_a_disagreement_over_3_pct_flagged():
    base = {"group": "copy", "operands": "random", "unit": "byte", "work_per_launch": 2.0 * 2**30, "time_ns": 0.5e6}
    rate = base["work_per_launch"] / (base["time_ns"] * 1e-9)  # 4.29 TB/s
    rows = [{**base, "kernel": "peak-copy-d2d", "rate_per_s": rate, "check_rate_per_s": rate / 0.96,
             "check_method": "eager copy_ (the runtime's device-to-device memcpy), timed with device events"},
            {**base, "kernel": "peak-read-stream", "group": "read", "rate_per_s": rate, "check_rate_per_s": rate / 1.02,
             "check_method": "the same kernel in an eager loop, timed with device events"},
            {**base, "kernel": "peak-write-stream", "group": "write", "rate_per_s": rate}]  # a v1 row: no second timing
    table = peaks_table(rows)
    t = {r[0]: dict(zip(table.columns, r)) for r in table.rows}
    assert t["copy-d2d"]["sustained / second - 1"] == "-4.0%" and t["copy-d2d"]["methods"] == "DISAGREE"
    assert t["copy-d2d"]["second method"] == "4.47 TB/s" and "eager copy_" in t["copy-d2d"]["second method is"]
    assert t["read-stream"]["sustained / second - 1"] == "+2.0%" and t["read-stream"]["methods"] == "agree"
    assert t["write-stream"]["methods"] == "-" and t["write-stream"]["second method"] == "-"
    assert table.caption.startswith("DISAGREE: copy-d2d.")


def test_roofline_points_use_ncu_dram_bytes_else_compulsory_bytes():
    run = read_run(ISSUE2)
    traces = [{"kernel": "sdpa-cudnn", "input_label": "gaussian:0.1", "dram_bytes": 4.0e8}]
    pts = {p.label: p for p in roofline_points(run.measurements.to_dicts(), traces)}
    assert pts["sdpa-cudnn / gaussian:0.1"].note == "ncu DRAM bytes"
    assert pts["sdpa-cudnn / gaussian:0.1"].intensity == pytest.approx(2.19902e12 / 4.0e8, rel=1e-4)
    flash = pts["sdpa-flash / gaussian:1"]
    # q, k, v read and o written once: 4 x 32 x 16384 x 128 bf16 elements = 512 MiB
    assert flash.note == "compulsory bytes" and flash.intensity == pytest.approx(2.19902e12 / (4 * 32 * 16384 * 128 * 2),
                                                                                 rel=1e-4)


def test_a_run_without_profiling_tables_gets_no_section():
    assert trace_sections(read_run(ISSUE2)) == []
    assert pipe_tables([]) == []


def test_sections_render_in_the_html_page_and_the_markdown_twin(profiled, tmp_path):
    # build_report puts the profiling sections before Provenance, their figures with them.
    run = read_run(profiled)
    rep = build_report(run)
    titles = [s.title for s in rep.sections]
    assert titles[-1] == "Provenance" and any(t.title in titles for t in trace_sections(run))
    html = render_html(rep.title, rep.header, rep.sections)
    assert "Pipe counters (ncu) and GPM" in html and "agree (within 5 pts)" in html and "Empirical peaks" in html
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == len(rep.figures) and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    written = write_report(rep, md=tmp_path / "r.md")
    assert (tmp_path / "r-roofline.png").read_bytes()[:4] == b"\x89PNG" and tmp_path / "r.md" in written
    assert "| sdpa-cudnn | gaussian:0.1 | 74.8 |" in (tmp_path / "r.md").read_text()


def invoke_peaks(*args):
    from harness.cli.profiling import peaks

    app = typer.Typer()
    app.command()(peaks)
    app.command("noop")(lambda: None)
    return CliRunner().invoke(app, ["peaks", *map(str, args)], env={"COLUMNS": "200"})


def test_bench_peaks_lists_its_kernels():
    r = invoke_peaks("--list", "--gemm-size", "4096")
    assert r.exit_code == 0, r.output
    assert "peak-gemm-fp8-zero" in r.output and "fp8 e4m3 GEMM 4096^3, zero operands" in r.output
    assert "peak-exp2-mufu" in r.output and "exp" in r.output


@pytest.mark.parametrize("args, message", [
    (("--device", "cpu", "--kernel", "peak-exp2-mufu,peak-fma-fp32"), "No peak kernel can run on cpu"),
    (("--device", "cpu", "--kernel", "peak-nope"), "No kernel named 'peak-nope'"),
    (("--gemm-size", "8"), "Peak sizes too small"),
])
def test_bench_peaks_bad_input_exits_2(args, message, tmp_path):
    r = invoke_peaks(*args, "--results", tmp_path)
    assert r.exit_code == 2 and message in " ".join(r.output.split()) and "Traceback" not in r.output
