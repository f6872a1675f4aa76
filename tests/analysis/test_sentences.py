"""The one-sentence verdict per kernel: captured vs its control, with the interval, its method, the threshold, the
caveats and the split into clock and cycles, from measurement rows (no polars) and from a ComparisonRow."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from harness.analysis import (
    CPU_CAVEAT,
    ComparisonRow,
    Ratio,
    VerdictRule,
    decompose,
    input_row_sentence,
    input_sentences,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h200"


def _row(label, kernel, time_ns, clock, *, pl=0.99, status="ok"):
    return {"input_label": label, "kernel": kernel, "time_ns": time_ns, "inband_clock_mhz": clock,
            "sm_clock_mhz": clock and clock * 1.1, "status": status, "power_limited_frac": pl, "thermal_limited_frac": 0.0,
            "reason_names": "sw_power_cap:1.0"}


def test_slower_on_captured_with_clock_and_cycles():
    rows = []
    for t, c in ((1.000, 1500.0), (1.001, 1499.0), (0.999, 1501.0)):
        rows.append(_row("L15:gaussian:0.1", "sdpa-cudnn", 570_000 * t, c))
        rows.append(_row("L15:captured", "sdpa-cudnn", 570_000 * t * 1.018, c * 0.985))
    (sentence,) = input_sentences(rows)
    d = decompose(time_a=[r["time_ns"] for r in rows[0::2]], time_b=[r["time_ns"] for r in rows[1::2]],
                  clock_a=[r["inband_clock_mhz"] for r in rows[0::2]], clock_b=[r["inband_clock_mhz"] for r in rows[1::2]])
    assert sentence == (
        f"On captured L15 activations sdpa-cudnn runs 1.8 % slower than on Gaussian 0.1, beyond the threshold (95 % "
        f"Welch t interval "
        f"{(d.time.low - 1) * 100:+.1f} % to {(d.time.high - 1) * 100:+.1f} %; ratio of geometric means over 3+3 "
        f"repeats; threshold 0.5 % (default)): clock -1.5 %, cycles +0.27 % (in-band clock; both at the power cap)."
    )


def test_no_difference_beyond_noise_and_mixed_limiters():
    rows = [_row("L03:gaussian:1", "sdpa-flash", 1000.0 + i, 1900.0, pl=0.0) for i in (0, 2, 4)]
    rows += [_row("L03:captured", "sdpa-flash", 1001.0 + i, 1900.0) for i in (0, 2, 4)]
    for r in rows[:3]:
        r["reason_names"] = ""
    (sentence,) = input_sentences(rows, max_clock_mhz=1980.0)
    assert sentence.startswith("On captured L3 activations sdpa-flash shows no difference beyond noise from Gaussian 1 "
                               "(time +0.10 %, 95 % Welch t interval")
    assert sentence.endswith("(in-band clock; captured: power cap 99%; control: none (NVML at max clock)).")


def test_too_few_repeats_and_failed_rows():
    rows = [_row("L15:gaussian:0.1", "k", 100.0, 1500.0), _row("L15:captured", "k", 101.0, 1500.0),
            _row("L15:captured", "k", None, None, status="gate_failed")]
    (sentence,) = input_sentences(rows)
    assert sentence == ("On captured L15 activations k cannot be compared with Gaussian 0.1: no usable interval "
                        "(1+1 repeats): add repeats (time +1.0 %).")
    (cpu,) = input_sentences(rows, caveats=(CPU_CAVEAT,))
    assert cpu.endswith("(time +1.0 %) [CPU timings (not sustained-clock figures)].")  # too few: that comes first


def test_nvml_clock_when_the_probe_is_missing():
    rows = [_row("L15:zeros", "k", 100.0 + i, 1500.0) for i in range(3)]
    rows += [_row("L15:captured", "k", 120.0 + i, 1500.0) for i in range(3)]
    rows[0]["inband_clock_mhz"] = None
    (sentence,) = input_sentences(rows, rule=VerdictRule(level=0.9))
    assert "than on zeros, beyond the threshold (90 % Welch t interval" in sentence and "(NVML clock; both at the power cap)" in sentence


def test_row_sentence_without_clocks_and_with_caveats():
    row = ComparisonRow(kernel="sdpa-cpu", input_a="gaussian:0.1", input_b="gaussian:1", shape="", repeats_a=2,
                        repeats_b=2, time_a_ns=1.0, time_b_ns=0.97,
                        time=Ratio(value=0.97, low=0.96, high=0.98, method="Welch t", level=0.95), cycles=None,
                        clock=None, clock_source="none", clock_a_mhz=None, clock_b_mhz=None, power_a_w=None,
                        power_b_w=None, limiter_a="none", limiter_b="none", verdict="faster",
                        caveats=(CPU_CAVEAT, "1 of 4 repeats unsettled"))
    assert input_row_sentence(row) == (
        "On Gaussian 1 sdpa-cpu runs 3.0 % faster than on Gaussian 0.1, beyond the threshold (95 % Welch t interval "
        "-4.0 % to -2.0 %; "
        "ratio of geometric means over 2+2 repeats; threshold 0.5 % (default)) [CPU timings (not sustained-clock "
        "figures); 1 of 4 repeats unsettled]: no clock reading on both sides, so no split into clock and cycles "
        "(neither at a limiter).")


def test_an_unresolved_sentence_says_the_interval_is_too_wide():
    rows = [_row("L15:gaussian:0.1", "k", 1000.0 * (1 + 0.03 * i), 1900.0) for i in range(3)]
    rows += [_row("L15:captured", "k", 1010.0 * (1 + 0.03 * i), 1900.0) for i in range(3)]
    (sentence,) = input_sentences(rows)
    assert ("k cannot be told apart from Gaussian 0.1 at the threshold: a change of its size can be neither shown "
            "nor ruled out") in sentence
    assert "smallest change it could call" in sentence


def test_the_h200_main_job_fixture_says_no_difference():
    pq = pytest.importorskip("pyarrow.parquet")
    run = FIXTURES / "20261130-043801-smollm2-217172"
    rows = [r for f in sorted(glob.glob(str(run / "measurements" / "*.parquet"))) for r in pq.read_table(f).to_pylist()]
    sentences = input_sentences(rows, max_clock_mhz=1980.0)
    assert [s.split(" activations ")[1].split()[0] for s in sentences] == ["sdpa-cudnn", "sdpa-flash"]
    # Neither claims a difference: both equivalence intervals (90 %) lie inside +-0.5 %, cuDNN's although its
    # 95 % interval reaches +-0.58 %.
    assert all(" runs " not in s and "neither at a limiter" in s for s in sentences)
    assert all("no difference beyond noise from Gaussian 0.1" in s for s in sentences)


def test_a_resolved_change_below_the_threshold_is_not_called_noise():
    # Repeats that agree to 0.01 %: the interval excludes 1, but +0.1 % is under the rule's 0.5 %.
    rows = [_row("L15:gaussian:0.1", "sdpa-flash", 1000.0 + 0.01 * i, 1900.0) for i in range(3)]
    rows += [_row("L15:captured", "sdpa-flash", 1001.0 + 0.01 * i, 1900.0) for i in range(3)]
    (sentence,) = input_sentences(rows, max_clock_mhz=1980.0)
    assert sentence.startswith("On captured L15 activations sdpa-flash differs from Gaussian 0.1 by less than the "
                               "threshold (time +0.10 %, 95 % Welch t interval +0.10 % to +0.10 %; ratio of geometric "
                               "means over 3+3 repeats; threshold 0.5 % (default))")
    wider_rule = VerdictRule().with_threshold(0.02, source="--fail-on-slowdown 2%")
    (wider,) = input_sentences(rows, rule=wider_rule, max_clock_mhz=1980.0)
    assert "threshold 2 % (--fail-on-slowdown 2%)" in wider
    (resolved,) = input_sentences(rows, rule=VerdictRule(threshold=0.0005), max_clock_mhz=1980.0)
    assert "runs 0.1 % slower than on Gaussian 0.1" in resolved


def test_cpu_timings_are_not_judged_unless_a_threshold_is_asked_for():
    # The README main job on the CPU once gave two repeats of +6.5 % and +7.4 % for one captured layer (paired):
    # a resolved change, but of the size a loaded host moves CPU timings by; a threshold asked for still rules.
    # (A third pair: two give one degree of freedom, which never judges.)
    rows = [{**_row("L15:gaussian:0.1", "sdpa-cpu", 1000.0 * f, None), "repeat": i}
            for i, f in enumerate((1.0, 1.02, 1.01))]
    rows += [{**_row("L15:captured", "sdpa-cpu", 1000.0 * f * g, None), "repeat": i}
             for i, (f, g) in enumerate(((1.0, 1.065), (1.02, 1.074), (1.01, 1.07)))]
    (default,) = input_sentences(rows, caveats=(CPU_CAVEAT,), design="interleaved")
    assert "is not judged against Gaussian 0.1: CPU timings move with the host's load" in default
    assert "no verdict drawn (default on a CPU)" in default and " runs " not in default
    (gated,) = input_sentences(rows, caveats=(CPU_CAVEAT,), design="interleaved",
                               rule=VerdictRule().with_threshold(0.02, source="--fail-on-slowdown 2%"))
    assert " runs 7.0 % slower than on Gaussian 0.1" in gated
    (gpu,) = input_sentences(rows, design="interleaved")
    assert " runs 7.0 % slower" in gpu and "threshold 0.5 % (default)" in gpu
