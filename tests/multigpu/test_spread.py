"""The spread between GPUs: a pure function of rows, its tables at a fixed width, and its report section."""

from __future__ import annotations

import io

import pytest
from multigpu_helpers import write_run

from harness.analysis import gpu_spread, suite_spread
from harness.multigpu import merge_runs
from harness.report._gpu_section import gpu_spread_section, gpu_spread_tables
from harness.results import read_run


def row(gpu, t, clock, *, kernel="k", config_index=0, status="ok", repeat=0):
    return {"gpu": gpu, "config_index": config_index, "input_label": f"in{config_index}", "kernel": kernel, "status": status,
            "time_ns": t, "sm_clock_mhz": clock, "inband_clock_mhz": None, "repeat": repeat}


def test_medians_per_gpu_then_spread_across_gpus():
    rows = [row("a", 100.0, 1800.0), row("a", 102.0, 1790.0, repeat=1), row("a", 500.0, 1000.0, repeat=2),
            row("b", 104.0, 1750.0), row("b", 106.0, 1740.0, repeat=1),
            row("c", 101.0, 1780.0),
            row("c", 1.0, 1980.0, status="gate_failed")]  # not timed: left out
    (s,) = gpu_spread(rows)
    assert [f.gpu for f in s.gpus] == ["a", "b", "c"]
    assert [f.time_ns for f in s.gpus] == [102.0, 105.0, 101.0] and [f.repeats for f in s.gpus] == [3, 2, 1]
    assert (s.time_median_ns, s.time_min_ns, s.time_max_ns) == (102.0, 101.0, 105.0)
    assert s.time_spread == pytest.approx(4 / 102)
    assert (s.clock_median_mhz, s.clock_min_mhz, s.clock_max_mhz) == (1780.0, 1745.0, 1790.0)
    assert s.clock_spread == pytest.approx(45 / 1780)
    assert (s.slowest, s.fastest) == ("b", "c")


def test_one_gpu_has_no_spread_and_the_suite_median_ignores_it():
    spreads = gpu_spread([row("a", 100.0, 1800.0, kernel="solo"),
                          row("a", 100.0, 1800.0, kernel="k2"), row("b", 110.0, 1700.0, kernel="k2")])
    assert spreads[0].time_spread is None and spreads[0].slowest is None
    assert suite_spread(spreads) == pytest.approx(0.1 / 1.05)


def test_tables_at_a_fixed_width():
    from rich.console import Console

    spreads = gpu_spread([row("00000000:19:00.0", 1.0e6, 1800.0), row("00000000:3B:00.0", 1.04e6, 1750.0)])
    console = Console(file=io.StringIO(), width=150, color_system=None)
    for t in gpu_spread_tables(spreads):
        console.print(t.to_rich())
    lines = [x.replace("│", " ").split() for x in console.file.getvalue().splitlines()]
    rows = [x for x in lines if x and x[0] == "in0"]
    assert rows[0] == ["in0", "k", "2", "1.0200", "1.0000", "1.0400", "3.92%", "1775", "1750", "1800",
                            "2.82%", "00000000:3B:00.0"]
    # No GPU had an in-band reading: that column is left out, and named under the table.
    assert rows[1:] == [["in0", "k", "00000000:19:00.0", "1.0000", "-1.96%", "1800", "1"],
                        ["in0", "k", "00000000:3B:00.0", "1.0400", "+1.96%", "1750", "1"]]
    assert "not shown, no value in any row: in-band MHz" in console.file.getvalue()


def test_report_section_only_for_runs_of_several_gpus(tmp_path):
    a = write_run(tmp_path / "t", gpu="00000000:19:00.0", times={(0, "k"): [100, 101]})
    b = write_run(tmp_path / "t", gpu="00000000:3B:00.0", times={(0, "k"): [104, 105]})
    merge_runs([a, b], out=tmp_path / "m")
    section = gpu_spread_section(read_run(tmp_path / "m"))
    assert section.title == "Spread between GPUs" and "Median time spread between GPUs over 1 kernel x input" in section.text
    html = "".join(t.to_html() for t in section.tables)
    assert "00000000:3B:00.0" in html and "3.90%" in html
    assert gpu_spread_section(read_run(a)) is None


def test_the_replicated_h200_x2_run_reports_the_spread_between_its_two_gpus():
    # `bench sustained --gpus all --replicate -k sdpa-cudnn -k sdpa-flash -i gaussian:1 --repeats 1` on
    # nvidia-h200-x2 (tests/fixtures/h200/README.md): one merged run, the GPU a column of every row.
    from pathlib import Path

    run = read_run(Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "20261130-064214-replicate-036e2c")
    spreads = {s.kernel: s for s in gpu_spread(run.measurements.to_dicts())}
    assert set(spreads) == {"sdpa-cudnn", "sdpa-flash"}
    cudnn = spreads["sdpa-cudnn"]
    assert [f.gpu for f in cudnn.gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert cudnn.time_spread == pytest.approx((3.9773 - 3.8506) / ((3.9773 + 3.8506) / 2), abs=2e-4)
    assert cudnn.slowest == "00000000:00:07.0" and cudnn.clock_min_mhz == 1650 and cudnn.clock_max_mhz == 1695
    # the slower GPU ran at the lower clock: the spread is the card, not the code
    assert spreads["sdpa-flash"].slowest == "00000000:00:07.0"
    section = gpu_spread_section(run)
    assert section is not None and "GPU" in section.title
