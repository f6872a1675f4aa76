"""`bench compare` in words: the sentence of each row, every warning, and what each sentence must name."""

from __future__ import annotations

import dataclasses
import json
from statistics import NormalDist
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import typer
from h200_runs import COMMITS_BASE, COMMITS_HEAD, FIXTURES
from typer.testing import CliRunner

from harness.analysis import (
    VerdictRule,
    compare_runs,
    comparison_warnings,
    explain_comparison,
    is_full_protocol,
    row_sentence,
    t_quantile,
)
from harness.analysis._tdist import t_quantiles
from harness.results import read_run

QUICK = FIXTURES / "h200" / "20261130-063427-smollm2-gate-612c47"
SMOLLM2 = FIXTURES / "h200" / "20261130-043801-smollm2-217172"


def _three(run):
    """The run with a third repeat, the geometric mean of its two (time, clocks, power): every geometric mean and
    so every ratio stays what the fixture measured, and a Welch interval gets the 2 degrees of freedom a verdict
    needs (the fixture's two repeats a side give it one: no verdict, `test_two_repeats_give_no_usable_interval`)."""
    m = run.measurements
    geo = lambda col: float(np.exp(np.log(np.array(m[col].to_list(), dtype=float)).mean()))
    third = m.head(1).with_columns(
        pl.lit(2).cast(m["repeat"].dtype).alias("repeat"),
        *[pl.lit(geo(c)).cast(m[c].dtype).alias(c) for c in ("time_ns", "inband_clock_mhz", "sm_clock_mhz", "power_w")])
    return _with(run, measurements=pl.concat([m, third]))


@pytest.fixture(scope="module")
def commits():
    return _three(read_run(COMMITS_BASE)), _three(read_run(COMMITS_HEAD))


def _with(run, path=None, measurements=None, **info):
    return SimpleNamespace(info={**run.info, **info}, measurements=run.measurements if measurements is None
                           else measurements, path=path or run.path)


def test_commits_sentence_is_computed_from_the_rows(commits):
    a, b = commits
    cmp = compare_runs(a, b)
    ex = explain_comparison(cmp, a, b)
    (s,) = ex.sentences
    row = cmp.rows[0]
    # The figures come from the row: time 0.7032, cycles 0.6527, clock 1605/1729 MHz.
    assert f"B is {(1 - row.time.value) * 100:.1f} % faster" in s
    assert "29.7 % faster" in s and "34.7 % fewer cycles, part given back by a 7.2 % lower clock" in s
    assert "(B reached the power cap)" in s
    assert "A: 1729 MHz in-band, 599 W, no limiter; B: 1605 MHz in-band, 692 W, power cap 100%" in s
    assert "NVML" not in s  # one clock basis in the row
    assert ex.basis.startswith("Clock basis: in-band")
    assert ex.warnings == ("A and B are separate runs: every interval includes a between-run cv of 0.5 % (default "
                           "for a GPU), so the smallest threshold this comparison can call same is 1.2 %.",)


def test_sentence_directions_follow_the_factors(commits):
    a, b = commits
    row = compare_runs(a, b).rows[0]
    swapped = compare_runs(b, a).rows[0]  # B/A flipped: slower, more cycles, partly offset by a higher clock
    s = row_sentence(swapped)
    assert "B is 42.2 % slower" in s and "53.2 % more cycles, partly offset by a 7.7 % higher clock" in s
    assert "(A was at the power cap)" in s
    same_clock = dataclasses.replace(row, clock=dataclasses.replace(row.clock, value=1.0))
    assert "34.7 % fewer cycles (B" in row_sentence(same_clock)


def test_same_run_warns(commits):
    a, _ = commits
    w = comparison_warnings(a, a)
    assert len(w) == 1 and w[0].startswith("A and B are the same run")
    copy = _with(a, path=COMMITS_HEAD)  # another directory holding the same run id still is the same run
    assert comparison_warnings(a, copy)[0].startswith("A and B are the same run")


def test_protocol_difference_warns_and_names_quick():
    full, quick = read_run(SMOLLM2), read_run(QUICK)
    (w,) = [x for x in comparison_warnings(full, quick) if x.startswith("protocols differ")]
    assert "A full, B quick/loosened" in w and "settle_chunk_tol 0.003 vs 0.05" in w
    assert is_full_protocol(json.loads(full.info["protocol_json"]))
    assert not is_full_protocol(json.loads(quick.info["protocol_json"]))
    assert not is_full_protocol(None)


@pytest.mark.parametrize("field,value,start", [
    ("device_name", "NVIDIA H100", "devices differ: NVIDIA H200 vs NVIDIA H100"),
    ("pci_bus_id", "00000000:00:07.0", "same model, different GPU: PCI 00000000:00:06.0 vs 00000000:00:07.0"),
    ("driver", "575.1", "driver or runtime differs: 580.159.04"),
    ("runtime", "cuda 12.8", "driver or runtime differs"),
    ("harness_version", "0.9", "versions differ: harness version"),
    ("git_commit", "abc", "versions differ: harness git"),
])
def test_each_provenance_difference_warns(commits, field, value, start):
    a, b = commits
    assert comparison_warnings(a, b) == []
    (w,) = comparison_warnings(a, _with(b, **{field: value}))
    assert w.startswith(start)


def test_software_version_difference_warns(commits):
    a, b = commits
    versions = {**json.loads(b.info["versions_json"]), "triton": "3.7.0"}
    (w,) = comparison_warnings(a, _with(b, versions_json=json.dumps(versions)))
    assert w == "versions differ: triton 3.6.0 vs 3.7.0."


def test_shape_difference_warns(commits):
    a, b = commits
    other = b.measurements.with_columns(pl.lit(8192).cast(pl.Int32).alias("seq_len"))
    (w,) = comparison_warnings(a, _with(b, measurements=other))
    # B's rows keep S_kv 16384 (schema v5): 8192 queries against 16384 keys, and the text says so
    assert w.startswith("shapes differ: A has B=1 H=32/32 S=16384") and "S_q=8192 S_kv=16384" in w


def test_t_quantile_matches_tables():
    # Student's t tables: 12.706 (df 1), 4.303 (df 2), 2.042 (df 30); 0.95 one-sided at df 5: 2.015.
    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=2e-3)
    assert t_quantile(0.975, 2) == pytest.approx(4.303, abs=2e-3)
    assert t_quantile(0.975, 30) == pytest.approx(2.042, abs=2e-3)
    assert t_quantile(0.95, 5) == pytest.approx(2.015, abs=2e-3)


def test_t_quantile_is_a_python_float_whatever_asked_it_first():
    # A numpy scalar equals and hashes as its float: it once filled the cache with a numpy result that later plain
    # calls got back (the module's doctest then printed np.float64(4.3027), depending on test order)
    first = t_quantile(np.float64(0.99), np.float64(7.0))
    assert type(first) is float and type(t_quantile(0.99, 7.0)) is float and t_quantile(0.99, 7) == first


def test_t_quantiles_of_many_comparisons_are_the_exact_quantiles():
    # Past 64 degrees of freedom at once (a simulation's comparisons) they come from an interpolant in 1/df: within
    # 1e-7 of the exact quantile from df 1 to 1e6 (past 1e7 `t_quantile` itself errs by 1e-8 to 3e-7), and the
    # normal quantile at df = infinity.
    df = np.concatenate([np.linspace(1.0, 3.0, 101), np.geomspace(1.0, 1e6, 400)])
    for p in (0.95, 0.975, 0.995):
        got = t_quantiles(p, df)
        exact = np.array([t_quantile(p, float(d)) for d in df])
        assert np.max(np.abs(got / exact - 1)) < 1e-7, p
        assert t_quantiles(p, np.full(65, np.inf))[0] == pytest.approx(NormalDist().inv_cdf(p), rel=1e-7)
    assert t_quantiles(0.975, [2.0]) == pytest.approx(t_quantile(0.975, 2.0), rel=1e-15)  # a few: exact


def test_the_sentence_names_estimator_interval_threshold_and_resolution(commits):
    a, b = commits
    row = compare_runs(a, b).rows[0]
    (s,) = explain_comparison(compare_runs(a, b), a, b).sentences
    assert (f"Time B/A {row.time.value:.4f} [{row.time.low:.4f}, {row.time.high:.4f}]: ratio of geometric means "
            f"over 3+3 repeats, 95 % Welch t + between-run interval, equivalence interval [{row.time.eq_low:.4f}, "
            f"{row.time.eq_high:.4f}], smallest change it could call {row.time.resolution * 100:.2g} %, threshold "
            f"0.5 % (default)") in s
    gated = compare_runs(a, b, rule=VerdictRule().with_threshold(0.4, source="--fail-on-slowdown 40%"))
    (g,) = explain_comparison(gated, a, b).sentences
    assert "B is 29.7 % faster, within the 40 % threshold" in g and "threshold 40 % (--fail-on-slowdown 40%)" in g


def test_an_unresolved_row_is_said_so_and_warned():
    a = read_run(COMMITS_BASE)
    t = a.measurements["time_ns"].to_list()
    base = a.measurements.with_columns(pl.Series("time_ns", [t[0], t[0] * 1.008]))
    slow = a.measurements.with_columns(pl.Series("time_ns", [t[0] * 1.011, t[0] * 1.019]))
    ra = _with(a, measurements=base, run_id="ra")
    rb = _with(a, measurements=slow, run_id="rb", path=COMMITS_HEAD)
    cmp = compare_runs(_three(ra), _three(rb))
    # Three repeats a side, about 1 % apart with 0.4 % spread: Welch cannot resolve 0.5 %.
    assert cmp.rows[0].verdict == "unresolved"
    ex = explain_comparison(cmp, ra, rb)
    assert ("not resolved (+1.10 %): whether it changed by the 0.5 % threshold cannot be told from noise; more "
            "repeats would resolve it") in ex.sentences[0]
    assert "--until-ci" not in ex.sentences[0]  # the sentence serves pytest too, which has no such flag
    assert any(w.startswith("1 of 1 row(s) not resolved at the 0.5 % (default) threshold") for w in ex.warnings)


def test_caveats_are_named_in_the_sentence(commits):
    a, b = commits
    cpu = _with(b, device_kind="cpu", device_name=a.info["device_name"])
    (s,) = explain_comparison(compare_runs(a, cpu), a, cpu).sentences
    # CPU timings without a threshold asked for: the ratio and interval, no verdict; with one, judged.
    assert "not judged (-29.68 %): CPU timings move with the host's load" in s and "no verdict drawn" in s
    gated = VerdictRule().with_threshold(0.05, source="--fail-on-slowdown 5%")
    (g,) = explain_comparison(compare_runs(a, cpu, rule=gated), a, cpu).sentences
    assert "B is 29.7 % faster, beyond the 5 % threshold [CPU timings (not sustained-clock figures)]" in g
    quick = _with(b, protocol_json=json.dumps({**json.loads(b.info["protocol_json"]), "settle_chunk_tol": 0.05}))
    (q,) = explain_comparison(compare_runs(a, quick), a, quick).sentences
    assert "[quick protocol (looser settle rule)]" in q


def test_one_repeat_gives_no_verdict(commits):
    a, b = commits
    one = lambda r, rid: _with(r, measurements=r.measurements.head(1), run_id=rid)
    ra, rb = one(a, "x"), one(b, "y")
    ex = explain_comparison(compare_runs(ra, rb), ra, rb)
    assert "no verdict" in ex.sentences[0] and "no usable interval (1+1 repeats): add repeats" in ex.sentences[0]


def test_two_repeats_give_no_usable_interval():
    # The fixture's two repeats a side: Welch's df is below 2, its interval spans a factor of ~1.2 either way;
    # the sentence says so instead of printing it as a verdict (issue 39: "[0.0001, 4675263.0284]").
    a, b = read_run(COMMITS_BASE), read_run(COMMITS_HEAD)
    row = compare_runs(a, b).rows[0]
    assert row.verdict == "too few repeats" and row.time.df < 2
    (s,) = explain_comparison(compare_runs(a, b), a, b).sentences
    assert "no verdict (-29.7 %; no usable interval (2+2 repeats): add repeats)" in s


def test_cli_prints_sentence_and_warning(commits):
    from harness.cli.analysis import compare

    app = typer.Typer()
    app.command()(compare)
    res = CliRunner().invoke(app, [str(COMMITS_BASE), str(COMMITS_HEAD)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert ("no verdict (-29.7 %; no usable interval (2+2 repeats): add repeats): 34.7 % fewer cycles, part given "
            "back by a 7.2 % lower clock (B reached the power cap)") in res.output
    res = CliRunner().invoke(app, [str(COMMITS_BASE), str(COMMITS_BASE), "--fail-on-slowdown", "0.1%"],
                             env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "WARNING: A and B are the same run" in res.output
    assert "PASS: nothing slower beyond the 0.1 % (--fail-on-slowdown 0.1%) threshold (1 compared: 1 same) (A and B " \
           "are the same run" in res.output
