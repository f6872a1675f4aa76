"""One gate at every entry point (issue 39): no PASS on what it could not judge, nothing compared is no pass, an
A/A comparison never fails, and the texts that once came out broken read whole."""

from __future__ import annotations

import dataclasses

import pytest

from harness.analysis import (
    Comparison,
    ComparisonRow,
    Ratio,
    VerdictRule,
    gate_outcome,
    interval_text,
    row_sentence,
    rule_for,
)
from harness.errors import ExitCode
from harness.report import ReportTable, gate_figures, gate_line


def _row(kernel: str, verdict: str, value: float = 1.0, *, low: float | None = None, high: float | None = None,
         n: int = 5, caveats=()) -> ComparisonRow:
    low = value * 0.999 if low is None else low
    high = value * 1.001 if high is None else high
    return ComparisonRow(
        kernel=kernel, input_a="x", input_b="x", shape="", repeats_a=n, repeats_b=n, time_a_ns=1.0, time_b_ns=value,
        time=Ratio(value=value, low=low, high=high, method="paired t", level=0.95, df=float(n - 1)), cycles=None,
        clock=None, clock_source="none", clock_a_mhz=None, clock_b_mhz=None, power_a_w=None, power_b_w=None,
        limiter_a="none", limiter_b="none", verdict=verdict, design="interleaved", threshold=0.003, caveats=caveats)


def _cmp(*rows, same_code: str = "", rule=VerdictRule(threshold=0.003)) -> Comparison:
    return Comparison(name_a="A", name_b="B", rule=rule, rows=rows, same_code=same_code)


def test_a_slower_row_fails_with_exit_1():
    out = gate_outcome(_cmp(_row("k", "slower", 1.01), _row("j", "unresolved")), threshold=0.003)
    assert out.verdict == "fail" and out.exit_code == ExitCode.REGRESSION == 1
    assert out.line.startswith("FAIL: 1 slower beyond the 0.3 % (default) threshold: k on x +1.00%")
    assert "also not resolved: j on x" in out.line


def test_an_unresolved_row_is_no_pass_unless_the_team_says_so():
    cmp = _cmp(_row("k", "same"), _row("wide", "unresolved", 1.002, low=0.99, high=1.014))
    out = gate_outcome(cmp, threshold=0.003)
    assert out.verdict == "unresolved" and out.exit_code == ExitCode.UNRESOLVED == 6
    assert out.line.startswith("NOT RESOLVED: 1 of 2 compared could not be judged at the 0.3 % (default) threshold")
    assert "PASS" not in out.line and "1 same" in out.line
    relaxed = gate_outcome(cmp, threshold=0.003, unresolved="pass")
    assert relaxed.exit_code == 0 and relaxed.line.startswith("PASS (--unresolved pass): nothing slower found; NOT "
                                                              "RESOLVED: ")
    # gate_figures (the JSON) and gate_line (the printed line) are the same outcome
    assert gate_figures([cmp], threshold=0.003)["exit_code"] == 6 and gate_line(cmp, threshold=0.003) == out.line
    with pytest.raises(ValueError):
        gate_outcome(cmp, threshold=0.003, unresolved="maybe")


def test_too_few_repeats_is_not_a_pass_either():
    out = gate_outcome(_cmp(_row("k", "too few repeats", 0.68, low=0.0001, high=4675263.0284, n=2)), threshold=0.02)
    assert out.exit_code == 6
    # An absurd interval is named for what it is, not printed as figures.
    assert "k on x -32.00%, no usable interval (2 repeats): add repeats" in out.line
    assert "4675263" not in out.line


def test_nothing_compared_fails_whatever_unresolved_says():
    for policy in ("fail", "pass"):
        out = gate_outcome(_cmp(), threshold=0.02, unresolved=policy)
        assert out.verdict == "nothing compared" and out.exit_code == 6
        assert out.line.startswith("NOT RESOLVED: nothing was compared")


def test_a_comparison_of_the_same_code_never_fails_and_says_why():
    same = "main and main are the same commit: an A/A check of the noise, and no gate fails on it"
    for verdict in ("slower", "unresolved"):
        out = gate_outcome(_cmp(_row("k", verdict, 1.01), same_code=same), threshold=0.003)
        assert out.exit_code == 0 and out.line.startswith("PASS") and same in out.line


def test_within_threshold_changes_pass_and_are_called_real():
    out = gate_outcome(_cmp(_row("k", "slower, within threshold", 1.002)), threshold=0.003)
    assert out.exit_code == 0 and "1 slower, within threshold" in out.line and "real" in out.line


def test_no_gate_on_a_cpu_says_not_judged_without_a_broken_template():
    # Issue 39: "no gate (verdicts at the none (default on a CPU: not judged) threshold; ...)".
    rule = rule_for(VerdictRule(), ("CPU timings (not sustained-clock figures)",))
    line = gate_line(_cmp(_row("k", "not judged"), rule=rule), threshold=None)
    assert line == "no gate (no verdicts (default on a CPU); --fail-on-slowdown sets one)"
    assert rule.threshold_text == "none: not judged (default on a CPU)"
    assert gate_line(_cmp(_row("k", "same")), threshold=None) == ("no gate (verdicts at the 0.3 % (default) "
                                                                  "threshold; --fail-on-slowdown sets one)")


def test_an_unresolved_sentence_with_caveats_reads_whole():
    # Issue 39: "... more repeats (--until-ci) would [CPU timings ...]": no flag one entry point lacks, and the
    # sentence ends before its caveats begin.
    row = _row("k", "unresolved", 1.002, low=0.99, high=1.014, caveats=("CPU timings (not sustained-clock figures)",))
    s = row_sentence(row)
    assert "--until-ci" not in s
    assert "more repeats would resolve it [CPU timings (not sustained-clock figures)]" in s


def test_a_caption_ending_a_sentence_is_not_followed_by_a_semicolon():
    # Issue 39: "... no verdict with fewer than 2 repeats a side.; not shown, no value in any row: ...".
    t = ReportTable(title="t", columns=("k", "power W"), rows=(("a", "-"),), caption="Verdict: rules a side.", left=1)
    text = t.to_markdown()
    assert ".;" not in text and "a side. not shown, no value in any row: power W" in text
    plain = dataclasses.replace(t, caption="ms: medians")
    assert "ms: medians; not shown, no value in any row: power W" in plain.to_markdown()


def test_an_interval_wider_than_the_estimate_is_no_usable_interval():
    # Issue 39: "[0.0001, 4675263.0284]" and "smallest change it could call 123604282811 %".
    row = _row("k", "too few repeats", 0.68, low=0.0001, high=4675263.0284, n=2)
    text = interval_text(row)
    assert text.endswith("no usable interval (2 repeats): add repeats") and "%" not in text.split(":")[-1]
    assert not row.time.usable and Ratio(value=100.0, low=35.0, high=286.0).usable  # excludes 1: it says slower
