"""The roofline's intensity axis reaches every roof it lists: MLA decode's exp2 roof (one exp per 2 x (576 + 512)
FLOP, 8.9 PFLOP/s equivalent on the H200) meets the read roof near 1,900 FLOP/B, past four times its points'
intensity, and was in the legend without a line on the chart (H200 run of 2026-12-05)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profiling import read_roof, read_trace_table, roofs_from_peaks
from harness.report._roofline import _x_limits, roofline_rows
from harness.report._trace_section import roofline_points
from harness.results import read_run

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"


@pytest.mark.parametrize("run", ["20261205-045730-round2-mla-9fa521", "20261205-045612-round2-decode-9bb9e8"])
def test_each_roofs_ridge_and_each_point_lie_inside_the_intensity_axis(run):
    measurements = read_run(H200 / run).measurements.to_dicts()
    roofs = roofs_from_peaks(read_trace_table(H200 / run, "peaks"))
    points = roofline_points(measurements)
    rows = roofline_rows(points, measurements, roofs)
    memory = read_roof(roofs)
    exp2 = next(r for r in roofs if "exp2" in r.label)
    # the roofs the figure draws: each compute roof, and the exp2 roof once per head dim at its measured clock
    drawn = [r.value for r in roofs if r.kind == "compute"] + [exp2.value * 2 * r["d_sum"] for r in rows]
    xs = [p.intensity for p in points]
    lo, hi = _x_limits(xs, memory, drawn, min(drawn + [p.flops_per_s for p in points]) / 6)
    for v in drawn:
        # the ridge and a stretch of the flat roof after it, so the line is seen
        assert lo < v / memory.value and 1.5 * v / memory.value < hi
    assert all(lo < x < hi for x in xs)
