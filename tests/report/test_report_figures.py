"""Figures that fit the page: 150 dpi, the cycles grid with zoom panels only where repeats exist, one colour per GPU."""

import io
from pathlib import Path

from PIL import Image

from harness.analysis import summarize_run
from harness.report import build_report
from harness.report._html import per_gpu_view
from harness.report._plots import cycles_figure
from harness.results import read_run

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
TRACE = H200 / "20261130-063527-trace-d5e507"  # one repeat per kernel
TUNED = H200 / "20261130-051815-issue4-tuned-f59496"  # four kernels, three repeats
REPLICATE = H200 / "20261130-064214-replicate-036e2c"


def _size(fig):
    return Image.open(io.BytesIO(fig.png)).size


def test_cycles_figure_zooms_only_with_two_repeats_and_fits_a_13_inch_grid():
    one = read_run(TRACE)
    w, h = _size(cycles_figure(one, summarize_run(one)))
    assert (w, h) == (13 * 150, int(4.6 * 150))  # overview only: every kernel has one repeat
    three = read_run(TUNED)
    w, h = _size(cycles_figure(three, summarize_run(three)))
    assert (w, h) == (13 * 150, int((4.6 + 2 * 3.6) * 150))  # four zooms on a 3-column grid: two rows


def test_replicate_run_counts_repeats_per_gpu_and_colours_each_gpu():
    run = read_run(REPLICATE)
    view = per_gpu_view(run)
    assert sorted(set(view.measurements["kernel"])) == ["sdpa-cudnn @ 00:06.0", "sdpa-cudnn @ 00:07.0",
                                                        "sdpa-flash @ 00:06.0", "sdpa-flash @ 00:07.0"]
    rep = build_report(run, figures=False)
    assert all(a["repeats"] == 1 for a in rep.summary.sustained)  # --repeats 1: a GPU is not a repeat
    assert "2 kernel(s) x 1 input(s) on 2 GPUs (one row per GPU)" in rep.header
    assert per_gpu_view(read_run(TRACE)).measurements["kernel"].to_list() == \
        read_run(TRACE).measurements["kernel"].to_list()
