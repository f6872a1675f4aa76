"""Issue 42, acceptance 1, re-run on the H200 on 2026-12-05 (`benchmarks/h200/decode_roofs.sh` at c8987d7, after the
copy stream's fix; fixtures 20261205-*-round2-*, logs in logs/20261205/decode-roofs/): every figure the run's
summary.txt printed, recomputed from the stored runs through the harness's own readers and report functions, and
the figure summary.txt leaves to the roofline: each MLA point's share of the roof that governs it.

The copy, the read roof and triton-splitkv against cuDNN's dense rate pass. The MLA item (70 % of the read roof at
Hq 128) does not, and is not asserted as passing: at 128 heads the absorbed MLA does 238 FLOP per byte of its
latent cache, past the ridge of this run's bf16 GEMM roof, so the compute roof governs it (the figures it has are
asserted instead). The earlier run's fixtures and its test (test_h200_decode_roofs_and_mla.py: the copy flagged
DISAGREE at its old tiling) stay: other tests read them.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from h200_runs import FIXTURES

from harness.inputs import AttentionShape
from harness.profiling import DISAGREE_FRAC, read_roof, read_trace_table, roofs_from_peaks, run_read_roof
from harness.report import build_report
from harness.report._roofline import roofline_rows
from harness.report._trace_section import peaks_table, roofline_points
from harness.results import read_run

H200 = FIXTURES / "h200"
LOGS = H200 / "logs" / "20261205" / "decode-roofs"
PEAKS = H200 / "20261205-045448-round2-peaks-33ff6d"
DECODE = H200 / "20261205-045612-round2-decode-9bb9e8"
MLA = H200 / "20261205-045730-round2-mla-9fa521"
NUM = r"([-+]?\d+(?:\.\d+)?)"


@cache
def _summary() -> dict:
    """summary.txt as printed: the peaks, the ACCEPT lines and each run's rows (step 4 of decode_roofs.sh)."""
    out: dict = {"peaks": {}, "accept": {}, "rows": {}, "splitkv": {}, "mla": {}}
    run = None
    for line in (LOGS / "summary.txt").read_text().splitlines():
        if m := re.fullmatch(rf"peak (\S+): {NUM} T\w+/s at (\d+) MHz (\w+), second method {NUM} \({NUM}%: (.+)\)",
                             line):
            out["peaks"][m[1]] = {"value": float(m[2]), "clock": int(m[3]), "source": m[4], "check": float(m[5]),
                                  "diff_pct": float(m[6]), "method": m[7]}
        elif m := re.fullmatch(rf"ACCEPT copy within 3 % of eager copy_: (True|False) \({NUM}%\)", line):
            out["accept"]["copy"] = (m[1] == "True", float(m[2]))
        elif m := re.fullmatch(rf"ACCEPT read roof >= 4.5 TB/s: (True|False) \({NUM} TB/s\)", line):
            out["accept"]["read"] = (m[1] == "True", float(m[2]))
        elif m := re.fullmatch(r"run (\S+):", line):
            run = m[1]
        elif m := re.fullmatch(rf"  (\S+)\s+(.+?)\s+{NUM} us\s+(\d+) GB/s\s+{NUM} TFLOP/s, {NUM}% of the read roof at "
                               rf"(\d+) MHz \((\d+) repeats, (\d+) unsettled\)", line):
            out["rows"][(run, m[1], m[2])] = {"us": float(m[3]), "gb_per_s": int(m[4]), "tflops": float(m[5]),
                                              "read_pct": float(m[6]), "mhz": int(m[7]), "repeats": int(m[8]),
                                              "unsettled": int(m[9])}
        elif m := re.fullmatch(rf"ACCEPT triton-splitkv (.+) >= 92 % of cuDNN's dense rate: (True|False) \({NUM}%\)",
                               line):
            out["splitkv"][m[1]] = (m[2] == "True", float(m[3]))
        elif m := re.fullmatch(rf"ACCEPT\? triton-mla (.+) >= 70 % of the read roof: (True|False) \({NUM}%; .*\)",
                               line):
            out["mla"][m[1]] = (m[2] == "True", float(m[3]))
    return out


@cache
def _roofs() -> dict:
    return {r.label: r for r in roofs_from_peaks(read_trace_table(PEAKS, "peaks"))}


@cache
def _report(path):
    return build_report(read_run(path), figures=False)


def _aggregates(path) -> dict:
    return {(a["kernel"], a["input_label"]): a for a in _report(path).summary.sustained}


def _table(path, title_part: str):
    return next(t for s in _report(path).sections for t in s.tables if title_part in t.title)


def _terminal_cells(log: str, column: str) -> dict:
    """(input, kernel) -> the cell of `column` in the rich table that `bench sustained` printed into the log."""
    header, cells = None, {}
    for line in (LOGS / log).read_text().splitlines():
        if line.startswith("┃") and column in line:
            header = [c.strip() for c in line.strip("┃").split("┃")]
        elif header and line.startswith("│"):
            row = dict(zip(header, (c.strip() for c in line.strip("│").split("│"))))
            cells[(row["input"], row["kernel"])] = row[column]
    return cells


def test_the_summary_was_parsed_whole():
    """Every line of summary.txt is one the tests below recompute (a format change would leave figures untested)."""
    s = _summary()
    assert len(s["peaks"]) == 5 and set(s["accept"]) == {"copy", "read"}
    assert len(s["rows"]) == 8 and len(s["splitkv"]) == 2 and len(s["mla"]) == 2


def test_each_peak_is_what_summary_printed_and_the_runs_carry_the_same_peaks():
    roofs = _roofs()
    assert set(roofs) == set(_summary()["peaks"])
    for label, printed in _summary()["peaks"].items():
        r = roofs[label]
        assert r.value / 1e12 == pytest.approx(printed["value"], abs=5e-4), label
        assert r.check_value / 1e12 == pytest.approx(printed["check"], abs=5e-4), label
        assert 100 * r.disagreement == pytest.approx(printed["diff_pct"], abs=0.05), label
        assert round(r.clock_mhz) == printed["clock"] and r.clock_source == printed["source"], label
        assert r.check_method == printed["method"]
    # `bench sustained --peaks` stored this peaks table beside the decode and MLA runs: the same read roof there
    for run in (DECODE, MLA):
        assert run_read_roof(run) == read_roof(list(roofs.values()))


def test_the_copy_stream_is_within_3_percent_of_the_eager_copy_timed_beside_it():
    copy = _roofs()["copy-d2d"]
    assert copy.check_method.startswith("eager copy_")  # the runtime's memcpy, not the same kernel timed twice
    assert abs(copy.disagreement) <= 0.03
    assert _summary()["accept"]["copy"] == (True, pytest.approx(100 * copy.disagreement, abs=0.005))
    # the report's verdict on the two timings agrees (its threshold is the acceptance's 3 %)
    assert DISAGREE_FRAC == 0.03
    table = peaks_table(read_trace_table(PEAKS, "peaks"))
    assert {dict(zip(table.columns, r))["methods"] for r in table.rows} == {"agree"}


def test_the_read_roof_is_at_least_4_5_tb_s_and_above_every_decode_kernel():
    read = read_roof(list(_roofs().values()))
    assert read.label == "read-stream" and read.value >= 4.5e12
    assert _summary()["accept"]["read"] == (True, pytest.approx(read.value / 1e12, abs=5e-4))
    # a roof, not a floor: cuDNN SDPA on the dense cache reads closest to it, and below it
    assert max(a["gb_per_s"] for a in _aggregates(DECODE).values()) * 1e9 < read.value


@pytest.mark.parametrize("path, log", [(DECODE, "decode.log"), (MLA, "mla.log")])
def test_each_runs_rows_are_what_summary_and_the_terminal_table_printed(path, log):
    read = run_read_roof(path)
    aggs = _aggregates(path)
    printed = {(k, lab): v for (run, k, lab), v in _summary()["rows"].items() if run == path.name}
    assert set(printed) == set(aggs)
    terminal = _terminal_cells(log, "% of read roof")
    report = _table(path, "traffic")
    report_cells = {(r[0], r[1]): dict(zip(report.columns, r))["% of read roof"] for r in report.rows}
    for key, p in printed.items():
        a = aggs[key]
        share = a["gb_per_s"] * 1e9 / read.value
        assert a["time_ns"] / 1e3 == pytest.approx(p["us"], abs=0.05), key
        assert a["gb_per_s"] == pytest.approx(p["gb_per_s"], abs=0.5), key
        assert a["flops_per_launch"] / a["time_ns"] * 1e-3 == pytest.approx(p["tflops"], abs=0.05), key
        assert 100 * share == pytest.approx(p["read_pct"], abs=0.05), key
        assert a["inband_clock_mhz"] == pytest.approx(p["mhz"], abs=0.5), key
        assert (a["repeats"], a["unsettled"]) == (p["repeats"], p["unsettled"]), key
        # shown against the read roof: in the terminal table bench sustained printed, and in the report's
        assert terminal[key[::-1]] == report_cells[key[::-1]] == f"{100 * share:.1f} %", key


def test_triton_splitkv_dense_and_in_pages_of_16_reads_at_92_percent_of_cudnns_dense_rate_or_more():
    aggs = _aggregates(DECODE)
    cudnn = aggs[("sdpa-kvcache-cudnn", "gaussian:0.1 page none")]["gb_per_s"]
    printed = _summary()["splitkv"]
    assert set(printed) == {"gaussian:0.1 page none", "gaussian:0.1 page16"}
    for label, (ok, pct) in printed.items():
        rate = aggs[("triton-splitkv", label)]["gb_per_s"] / cudnn
        assert rate >= 0.92 and ok, label
        assert 100 * rate == pytest.approx(pct, abs=0.05), label
    # both bytes counts are the workload's least traffic: the paged one adds only its page table and lengths
    dense, paged = (aggs[("triton-splitkv", f"gaussian:0.1 {p}")]["bytes_per_launch"] for p in ("page none", "page16"))
    assert paged - dense == 4 * (16 * 32768 // 16 + 16)


def test_mla_bytes_count_the_latent_cache_once_and_flops_are_the_shapes():
    cfg = {i["name"]: i["shape"] for i in json.loads(read_run(MLA).info["config_json"])["inputs"]}
    for (kernel, label), a in _aggregates(MLA).items():
        shape = AttentionShape(**cfg[label])
        assert shape.latent_kv and a["flops_per_launch"] == shape.flops
        assert a["bytes_per_launch"] == shape.bytes_moved(item=2, out_item=2)
        # V is the first 512 dims of the cached 576: reading it again would add the V cache's bytes once more
        split = AttentionShape(**{**cfg[label], "latent_kv": False})
        assert split.bytes_moved(item=2, out_item=2) - a["bytes_per_launch"] == 16 * 16384 * 512 * 2


def test_mla_shares_of_the_read_roof_and_of_the_roof_that_governs_each_point():
    """Hq 16 (a TP-8 slice) is memory-bound and its share of the read roof is its share of its roof; Hq 128 is
    governed by the bf16 GEMM roof, scaled from the GEMM's clock to the kernel's (roofline_rows, the report's
    roofline and its table): the acceptance's 70 % of the read roof is not met, and is not the roof that binds."""
    read, gemm = run_read_roof(MLA), _roofs()["gemm-bf16-random"]
    aggs = _aggregates(MLA)
    run = read_run(MLA)
    measurements = run.measurements.to_dicts()
    # the roofs the report draws: the peaks stored beside the MLA run
    roofs = roofs_from_peaks(read_trace_table(MLA, "peaks"))
    rows = {r["input_label"]: r for r in roofline_rows(roofline_points(measurements), measurements, roofs)}
    governing = _table(MLA, "governing roof")
    cells = {r[1]: dict(zip(governing.columns, r)) for r in governing.rows}
    sweep_table = _table(MLA, "Sweep")
    sweep = {r[2]: dict(zip(sweep_table.columns, r)) for r in sweep_table.rows}  # by Hq
    for label, (ok, pct) in _summary()["mla"].items():
        a, row = aggs[("triton-mla", label)], rows[label]
        share = a["gb_per_s"] * 1e9 / read.value
        assert 100 * share == pytest.approx(pct, abs=0.05) and row["read_roof_share"] == pytest.approx(share)
        assert share < 0.70 and not ok  # the acceptance item as measured: not met at either head count
        # the share of the governing roof, computed here from the run's FLOPs, time and clock and the GEMM peak
        flops_per_s = a["flops_per_launch"] / a["time_ns"] * 1e9
        intensity = a["flops_per_launch"] / a["bytes_per_launch"]
        gemm_here = gemm.value * a["inband_clock_mhz"] / gemm.clock_mhz  # per-cycle roof at the kernel's clock
        # (the exp2 roof, 8.2 PFLOP/s equivalent at d 576 + 512, is far above both and left out here)
        roof, name = min((read.value * intensity, "memory"), (gemm_here, "gemm-bf16"))
        assert row["governing_roof"] == cells[label]["governing roof"] == name, label
        assert row["share_of_roof"] == pytest.approx(flops_per_s / roof, rel=1e-6), label
        assert cells[label]["% of roof"] == f"{100 * flops_per_s / roof:.0f} %"
        # the report's sweep table sets the same point against the GEMM as measured, at the GEMM's own clock
        assert sweep[label.split("Hq")[1]]["% of bf16 GEMM"] == f"{100 * flops_per_s / gemm.value:.1f}%"
    hq128, hq16 = rows["gaussian:0.1 Hq128"], rows["gaussian:0.1 Hq16"]
    assert hq16["governing_roof"] == "memory" and hq16["share_of_roof"] == pytest.approx(hq16["read_roof_share"])
    assert hq128["governing_roof"] == "gemm-bf16"


def test_mla_at_128_heads_is_past_the_ridge_so_70_percent_of_the_read_roof_needs_more_than_the_gemm_peak():
    """At 128 heads each byte of the latent cache feeds 238 FLOP, past the ridge (GEMM roof / read roof: 142 FLOP/B
    at the GEMM's power-capped 1331 MHz, 193.5 scaled to the kernel's 1814 MHz). 70 % of the read roof at that
    intensity is 783 TFLOP/s, above the 667 TFLOP/s the bf16 GEMM itself sustained in this run; it is 86 % of the
    GEMM roof scaled to the kernel's 1814 MHz (908, the roof the report's roofline sets the point against), a rate
    no kernel here sustained: the GEMM holds only 1331 MHz at the board's 700 W. Hq 16 (30 FLOP/B) is below the
    ridge: memory-bound."""
    read, gemm = run_read_roof(MLA), _roofs()["gemm-bf16-random"]
    aggs = _aggregates(MLA)
    hq128, hq16 = aggs[("triton-mla", "gaussian:0.1 Hq128")], aggs[("triton-mla", "gaussian:0.1 Hq16")]
    intensity = {k: a["flops_per_launch"] / a["bytes_per_launch"] for k, a in (("128", hq128), ("16", hq16))}
    ridge_measured, ridge_at_kernel = gemm.value / read.value, gemm.at_clock(hq128["inband_clock_mhz"]) / read.value
    assert ridge_measured < ridge_at_kernel < intensity["128"]
    assert intensity["16"] < ridge_measured
    need = 0.70 * read.value * intensity["128"]
    assert gemm.value < need < gemm.at_clock(hq128["inband_clock_mhz"])
    # the GEMM ran power-capped, MLA at 128 heads did not: a clock the GEMM could not hold
    gemm_rows = [r for r in read_trace_table(PEAKS, "peaks") if r["kernel"] == "peak-gemm-bf16-random"]
    assert min(r["power_limited_frac"] for r in gemm_rows) > 0.9 and hq128["power_limited_frac"] == 0
    assert gemm.clock_mhz < hq128["inband_clock_mhz"]
