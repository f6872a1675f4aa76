"""The verdict and the slowdowns `bench compare --fail-on-slowdown` fails on: one follows the other.

A slowdown is a row whose verdict is `slower`, and the verdict judges at the gate's own threshold: a 5 % move
inside the noise must not fail the nightly job, a significant 0.4 % one must fail a 0.3 % gate (issue 35: the
hidden 0.5 % minimum once made every gate below it a 0.5 % gate) and pass a 0.5 % one.
"""

from __future__ import annotations

import pytest

from harness.analysis import (
    Comparison,
    ComparisonRow,
    Ratio,
    VerdictRule,
    compare_measurements,
    decompose,
    judge,
    parse_threshold,
)
from harness.errors import ConfigError
from harness.suite import verdict_rule


def _row(kernel: str, verdict: str, value: float) -> ComparisonRow:
    return ComparisonRow(
        kernel=kernel, input_a="a", input_b="b", shape="s", repeats_a=3, repeats_b=3, time_a_ns=1.0,
        time_b_ns=value, time=Ratio(value=value, low=value * 0.9, high=value * 1.1), cycles=None, clock=None,
        clock_source="none", clock_a_mhz=None, clock_b_mhz=None, power_a_w=None, power_b_w=None, limiter_a="none",
        limiter_b="none", verdict=verdict)


def test_slowdowns_are_the_rows_whose_verdict_is_slower():
    rows = (_row("noisy", "unresolved", 1.05), _row("slow", "slower", 1.05), _row("fast", "faster", 0.9),
            _row("few", "too few repeats", 1.5), _row("same", "same", 1.003))
    cmp = Comparison(name_a="A", name_b="B", rule=VerdictRule(), rows=rows)
    assert [r.kernel for r in cmp.slowdowns()] == ["slow"]
    assert [r.kernel for r in cmp.unresolved()] == ["noisy"]
    assert [r.kernel for r in cmp.open_rows()] == ["noisy", "few"]  # what a gate cannot pass
    aa = Comparison(name_a="A", name_b="B", rule=VerdictRule(), rows=rows, same_code="A and B are one run")
    assert aa.slowdowns() == ()  # an A/A check never fails a gate


def test_a_04_percent_slowdown_fails_a_03_gate_and_passes_a_05_gate():
    # Issue 35's H200 figures: B/A 1.0039 [1.0033, 1.0045] over 3 interleaved repeats.
    time = Ratio(value=1.0039, low=1.0033, high=1.0045, method="paired t", level=0.95, df=2.0)
    # At 0.5 % the change is real and shown to be under the gate; at 0.4 % the estimate is under it but the
    # interval reaches past it: the size is not resolved, so the gate cannot pass it either.
    for text, verdict in (("0.3%", "slower"), ("0.5%", "slower, within threshold"), ("0.4%", "unresolved"),
                          ("0.38%", "slower")):
        rule, threshold = verdict_rule(text)
        assert threshold == parse_threshold(text) and rule.threshold == threshold
        assert rule.threshold_source == f"--fail-on-slowdown {text}"
        assert judge(time, rule, n_a=3, n_b=3) == verdict, text
    # Through the rows: the same measurements, judged at each gate.
    base = [1.0, 1.0003, 0.9998]
    a, b = [{**_meas("k", t * 1e6), "repeat": i} for i, t in enumerate(base)], [
        {**_meas("k", t * 1.004e6), "repeat": i} for i, t in enumerate(base)]
    pl = pytest.importorskip("polars")
    for text, failed in (("0.3%", True), ("0.5%", False)):
        rule, _ = verdict_rule(text)
        cmp = compare_measurements(pl.DataFrame(a), pl.DataFrame(b), rule=rule, design="interleaved")
        assert bool(cmp.slowdowns()) is failed and cmp.rows[0].threshold == rule.threshold


def test_a_threshold_the_measurement_cannot_resolve_is_said_so():
    wide = Ratio(value=1.002, low=0.99, high=1.014, method="Welch t", level=0.95, df=4.0)
    rule, _ = verdict_rule("0.3%")
    assert judge(wide, rule, n_a=3, n_b=3) == "unresolved"
    assert judge(wide, verdict_rule("2%")[0], n_a=3, n_b=3) == "same"


def test_the_verdict_comes_from_the_interval_and_the_threshold():
    noisy_a, noisy_b = [1.0, 1.2, 0.9, 1.1], [1.05, 1.3, 0.95, 1.15]  # +5 %, but well inside the spread
    d = decompose(time_a=noisy_a, time_b=noisy_b)
    assert d.time.value > 1.04 and not d.time.excludes_one() and d.verdict == "unresolved"
    tight_a, tight_b = [1.0, 1.0001, 0.9999], [1.003, 1.0031, 1.0029]  # +0.3 %: significant, below 0.5 %
    d = decompose(time_a=tight_a, time_b=tight_b)
    assert d.time.excludes_one() and d.verdict == "slower, within threshold"
    d = decompose(time_a=tight_a, time_b=[1.006, 1.0061, 1.0059])
    assert d.verdict == "slower"
    assert decompose(time_a=[1.006, 1.0061, 1.0059], time_b=tight_a).verdict == "faster"
    assert decompose(time_a=tight_a, time_b=tight_b, rule=VerdictRule(threshold=0.002)).verdict == "slower"


def _meas(kernel, t, clock=1500.0, **kw):
    return {"kernel": kernel, "input_label": kw.pop("label", "x"), "time_ns": t, "sm_clock_mhz": clock,
            "inband_clock_mhz": None, "status": "ok", "power_w": 500.0, "batch": 1, "heads_q": 8, "heads_kv": 8,
            "seq_len": 1024, "head_dim_qk": 64, "head_dim_v": 64, "causal": True, "dtype": "bfloat16",
            "power_limited_frac": None, "thermal_limited_frac": None, "reason_names": None, **kw}


def test_rows_of_measurements_carry_the_decomposition_verdict():
    pl = pytest.importorskip("polars")
    a = pl.DataFrame([_meas("k", t) for t in (1000.0, 1001.0, 999.0)])
    b = pl.DataFrame([_meas("k", t, clock=1400.0) for t in (1100.0, 1101.0, 1099.0)])
    cmp = compare_measurements(a, b, name_a="A", name_b="B")
    (row,) = cmp.rows
    assert row.verdict == "slower" and row.time.value == pytest.approx(1.1, rel=1e-3)
    assert row.clock.value == pytest.approx(1500.0 / 1400.0)
    assert [r.kernel for r in cmp.slowdowns()] == ["k"]
    assert compare_measurements(a, b, rule=VerdictRule(threshold=0.2)).slowdowns() == ()


def test_threshold_parser():
    assert parse_threshold("2%") == pytest.approx(0.02)
    assert parse_threshold("0.02") == pytest.approx(0.02)
    with pytest.raises(ConfigError, match="--fail-on-slowdown"):
        parse_threshold("fast")


def test_every_verdict_is_one_of_the_published_names():
    import dataclasses

    from harness.analysis import VERDICTS

    base = [1.0, 1.0001, 0.9999]
    seen = {decompose(time_a=a, time_b=b).verdict for a, b in (
        (base, [x * 1.1 for x in base]), ([x * 1.1 for x in base], base), ([1.0, 1.2, 0.9], [1.0, 1.2, 0.95]),
        ([1.0], [2.0]), (base, base), (base, [x * 1.003 for x in base]), (base, [x * 0.997 for x in base]))}
    seen.add(decompose(time_a=[1.0, 1.01, 1.0], time_b=[2.0, 2.01, 2.0],
                       rule=dataclasses.replace(VerdictRule(), judged=False)).verdict)
    assert seen == set(VERDICTS) and len(VERDICTS) == 8


def test_shape_text_names_what_a_ratio_is_meaningful_within():
    from harness.analysis._compare import shape_text

    row = _meas("k", 1.0)
    assert shape_text(row) == "B=1 H=8/8 S=1024 d=64/64 causal bfloat16"
    assert shape_text({**row, "causal": False, "heads_kv": 2}).startswith("B=1 H=8/2 S=1024 d=64/64 non-causal ")


def test_burst_rows_aggregate_as_timed():
    from harness.analysis import BURST_STATUS, aggregate_measurements

    rows = [{**_meas("k", t, status=BURST_STATUS), "config_index": 0, "repeat": i, "launch_note": None}
            for i, t in enumerate((1000.0, 1010.0))]
    assert BURST_STATUS == "burst"  # the status runner/_burst.py writes
    (agg,) = aggregate_measurements(rows)
    assert agg["shape"].startswith("B=1 H=8/8") and agg["limiter"] != ""


def test_rule_defaults_and_bounds():
    r = VerdictRule()
    assert (r.level, r.threshold, r.threshold_source, r.min_repeats) == (0.95, 0.005, "default", 2)
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"^confidence level must be in \(0, 1\), got "):
            VerdictRule(level=level)
    assert VerdictRule(threshold=0.0).threshold == 0.0  # no minimum change is a valid rule
    with pytest.raises(ValueError, match="threshold >= 0"):
        VerdictRule(threshold=-0.1)
    assert r.threshold_text == "0.5 % (default)"
    assert verdict_rule(None) == (VerdictRule(), None)
    rule, threshold = verdict_rule(None, default="2%")
    assert threshold == 0.02 and rule.threshold_text == "2 % (--fail-on-slowdown default 2%)"


def test_comparison_records_defaults():
    import dataclasses

    cmp = Comparison(name_a="A", name_b="B", rule=VerdictRule(), rows=(_row("k", "same", 1.0),))
    assert cmp.unmatched == () and cmp.rows[0].note == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        cmp.name_a = "C"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cmp.rows[0].verdict = "slower"
    with pytest.raises(TypeError):
        Comparison("A", "B", VerdictRule(), ())
