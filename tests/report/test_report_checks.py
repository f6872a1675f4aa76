"""The sections that explain a run: clock cross-check, burst gap, the honest header, provenance tables."""

from pathlib import Path

import pytest

from harness.analysis import (
    burst_gap_rows,
    clock_crosscheck,
    crosscheck_verdict,
    summarize_run,
)
from harness.profiling import read_trace_table
from harness.report import build_report, render_html
from harness.results import read_run

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
TRACE = H200 / "20261130-063527-trace-d5e507"
QUICK = H200 / "20261130-063427-smollm2-gate-612c47"
ISSUE4 = H200 / "20261130-062902-issue4-8b108c"
REPLICATE = H200 / "20261130-064214-replicate-036e2c"


@pytest.fixture(scope="module")
def trace_run():
    return read_run(TRACE)


def test_crosscheck_reproduces_the_h200_numbers(trace_run):
    rows = clock_crosscheck(trace_run.measurements.to_dicts(), read_trace_table(TRACE, "traces"))
    assert len(rows) == 5
    inband = {r["kernel"]: r["inband_vs_ncu"] - 1 for r in rows}
    nvml = {r["kernel"]: r["nvml_vs_ncu"] - 1 for r in rows}
    # h200-measurements.md: in-band / ncu within -0.9 .. +2.1 %, NVML / ncu 8.7 .. 13.4 % high.
    assert all(-0.009 <= v <= 0.0215 for v in inband.values()), inband
    assert all(0.087 <= v <= 0.1345 for v in nvml.values()), nvml
    assert inband["sdpa-cudnn"] == pytest.approx(0.0214, abs=5e-4)
    assert nvml["sdpa-cudnn"] == pytest.approx(0.1335, abs=5e-4)
    assert inband["triton-bf16"] == pytest.approx(-0.0009, abs=5e-4)
    assert nvml["sdpa-flash"] == pytest.approx(0.0870, abs=5e-4)
    verdict, text = crosscheck_verdict(rows)
    assert verdict == "inband" and "+8.7 to +13.4 %" in text and "-0.8 to +2.1 %" in text


def test_crosscheck_verdict_cases():
    row = lambda i, n: {"inband_vs_ncu": i, "nvml_vs_ncu": n, "ncu_clock_mhz": 1700.0}
    assert crosscheck_verdict([row(1.0, 1.1)])[0] == "inband"
    assert crosscheck_verdict([row(1.1, 1.0)])[0] == "nvml"
    assert crosscheck_verdict([row(1.1, 1.1)])[0] == "neither"
    assert crosscheck_verdict([row(1.0, 1.1), row(1.05, 1.1)])[0] == "neither"  # every kernel must fit
    assert crosscheck_verdict([])[0] == "none"


def test_trace_report_has_the_crosscheck_section(trace_run):
    rep = build_report(trace_run, figures=False)
    titles = [s.title for s in rep.sections]
    assert titles.index("Clock cross-check") < titles.index("Pipe counters (ncu) and GPM")
    sec = rep.sections[titles.index("Clock cross-check")]
    assert "The in-band clock makes cycles invariant" in sec.text
    assert ("sdpa-cudnn", "gaussian:0.1") == sec.tables[0].rows[0][:2] and sec.tables[0].rows[0][7] == "+2.1 %"
    assert "Clock cross-check" not in [s.title for s in build_report(read_run(QUICK), figures=False).sections]


def test_burst_gap_rows_and_section():
    summary = summarize_run(read_run(ISSUE4))
    rows = {r["kernel"]: r for r in burst_gap_rows(summary)}
    assert set(rows) == {"sdpa-cudnn", "triton-bf16", "triton-fp8-exact"}
    r = rows["triton-bf16"]
    assert r["burst_faster_frac"] == pytest.approx(1 - r["burst_ms"] / r["sustained_ms"])
    assert "a burst timing would have reported 1.1 % faster than sustained" in r["sentence"]
    assert "slower than sustained" in rows["triton-fp8-exact"]["sentence"]
    rep = build_report(read_run(ISSUE4), figures=False)
    titles = [s.title for s in rep.sections]
    assert titles.index("Burst gap") == titles.index("Burst vs sustained") + 1
    assert burst_gap_rows(summarize_run(read_run(TRACE))) == []


def test_header_counts_only_settled_full_protocol_rows(trace_run):
    quick = build_report(read_run(QUICK), figures=False).header
    assert "0 of 20 kernel x input timed at sustained clocks" in quick and "WARNING: the run used a loosened" in quick
    full = build_report(trace_run, figures=False).header
    assert "5 of 5 kernel x input timed at sustained clocks" in full and "WARNING" not in full


def test_provenance_is_tables_not_a_dict():
    rep = build_report(read_run(REPLICATE), figures=False)
    prov = rep.sections[-1]
    titles = [t.title for t in prov.tables]
    assert titles == ["Run", "GPUs", "Software", "Telemetry: what answered", "Protocol"]
    gpus = prov.tables[1].rows
    assert [g[1] for g in gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    html = render_html(rep.title, rep.header, rep.sections)
    assert "{'" not in html and '{"' not in html
    assert ("window_s", "4.0") in prov.tables[-1].rows


def test_roofline_has_the_exp2_roof_and_shares(trace_run):
    from harness.profiling import roofs_from_peaks
    from harness.report._roofline import roofline_rows
    from harness.report._trace_section import roofline_points

    m = trace_run.measurements.to_dicts()
    traces, peaks = read_trace_table(TRACE, "traces"), read_trace_table(TRACE, "peaks")
    roofs = roofs_from_peaks(peaks)
    exp2 = next(r for r in roofs if r.label == "exp2-mufu")
    points = {p.label.partition(" / ")[0]: p for p in roofline_points(m, traces)}
    rows = {r["kernel"]: r for r in roofline_rows(list(points.values()), m, roofs)}
    # one exp per score, 2 (d_qk + d_v) = 512 FLOP per score at d = 128, at the kernel's own clock: the exp2 peak
    # ran at its in-band clock, sdpa-cudnn at a lower one, so its exp2 roof is the peak's per cycle x its clock
    clock = points["sdpa-cudnn"].clock_mhz
    assert exp2.clock_source == "inband" and clock < exp2.clock_mhz
    assert rows["sdpa-cudnn"]["clock_mhz"] == clock
    assert rows["sdpa-cudnn"]["roofs"]["exp2 (d=128)"] == pytest.approx(exp2.value * 512 * clock / exp2.clock_mhz)
    gemm = next(r for r in roofs if r.label == "gemm-bf16-random")
    assert rows["sdpa-cudnn"]["roofs"]["gemm-bf16"] == pytest.approx(gemm.value * clock / gemm.clock_mhz)
    memory = next(r for r in roofs if r.kind == "memory")  # the DRAM's: not scaled by the SM clock
    assert rows["sdpa-cudnn"]["roofs"]["memory"] == pytest.approx(memory.value * points["sdpa-cudnn"].intensity)
    assert rows["sdpa-cudnn"]["governing_roof"] == "gemm-bf16"
    assert rows["triton-fp8-lean"]["governing_roof"] == "gemm-fp8"
    r = rows["triton-bf16"]
    assert r["share_of_roof"] == pytest.approx(r["flops_per_s"] / r["governing_flops_per_s"])
    sec = next(s for s in build_report(trace_run, figures=False).sections if s.title == "Empirical peaks and roofline")
    table = sec.tables[1]
    assert table.title == "Share of the governing roof" and table.rows[0][-3] == "gemm-bf16"


def test_header_leaves_unsettled_rows_out_of_the_sustained_count(trace_run):
    import dataclasses

    from harness.report import report_header

    summary = summarize_run(trace_run)
    rows = list(summary.sustained)
    rows[0] = {**rows[0], "unsettled": 1}
    text = report_header(dataclasses.replace(summary, sustained=tuple(rows)))
    assert "4 of 5 kernel x input timed at sustained clocks (settled, full protocol), 1 UNSETTLED" in text


def test_inputs_section_says_each_row_in_words():
    rep = build_report(read_run(H200 / "20261130-043508-issue2-b7147a"), figures=False)
    sec = next(s for s in rep.sections if s.title == "Inputs compared: B relative to A")
    assert sec.text.endswith("In words, one row each:")
    assert sec.points[0].startswith("sdpa-cudnn on gaussian:1 (A: gaussian:0.1): B is 1.0 % slower")
    assert len(sec.points) == len(rep.summary.inputs.rows)  # one sentence per row, each an item of its own
