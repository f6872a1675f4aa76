"""Issue 14, items 4-6: options are refused with their flag's name instead of silently replaced, options that do
nothing in their context are refused, input sources are checked before any run directory exists, and a gate
that compares nothing does not pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BASE = ["sustained", "--device", "cpu", "--quick", "-k", "sdpa-cpu", "--heads", "2", "--seq-len", "64",
        "--head-dim", "16", "--dtype", "fp32", "--telemetry", "none"]


def bench(*args):
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, " ".join(res.output.split())


@pytest.mark.parametrize("flag, value", [("--seq-len", "0"), ("--sample-period-ms", "0"), ("--heads-kv", "0"),
                                         ("--batch", "-1"), ("--window-s", "0"), ("--repeats", "0"),
                                         ("--launch-timeout-s", "0"), ("--idle-s", "-1")])
def test_zero_and_negative_values_are_refused_by_flag_not_replaced(tmp_path, flag, value):
    args = [a for a in BASE if a not in ("64",)] if flag == "--seq-len" else BASE
    if flag == "--seq-len":
        args = [*BASE[:BASE.index("--seq-len")], *BASE[BASE.index("--seq-len") + 2:]]
    code, out = bench(*args, flag, value, "--results", str(tmp_path / "r"))
    assert code == 2, out
    assert f"{flag} {value}" in out and "must be" in out and "Traceback" not in out
    assert not (tmp_path / "r").exists()  # refused before the run directory was made


def test_idle_zero_is_allowed(tmp_path):
    from harness.suite import sustained_protocol

    assert sustained_protocol(quick=True, idle_s=0).idle_before_kernel_s == 0


@pytest.mark.parametrize("extra, named", [(["--layer", "3"], "--layer"), (["--control", "zeros"], "--control"),
                                          (["--text", "pydoc"], "--text"), (["--windows", "2"], "--windows")])
def test_capture_options_without_a_model_are_refused(tmp_path, extra, named):
    code, out = bench(*BASE, *extra, "--results", str(tmp_path / "r"))
    assert code == 2 and named in out and "--model" in out, out
    assert not (tmp_path / "r").exists()


def test_shape_options_with_a_model_are_refused(tmp_path):
    from harness.errors import ConfigError
    from harness.suite import CaptureArgs, ShapeArgs, input_specs

    with pytest.raises(ConfigError, match="--heads.*take their shape from the model"):
        input_specs(sources=None, shape=ShapeArgs(heads=4), capture=CaptureArgs(model="smollm2-135m"), device="cpu")


def test_a_bad_input_source_is_refused_before_the_run_directory_exists(tmp_path):
    code, out = bench(*BASE, "-i", "foo", "--results", str(tmp_path / "r"))
    assert code == 2 and "--input 'foo' is not an input source" in out, out
    assert not (tmp_path / "r").exists()
    code, out = bench(*BASE, "-i", "gaussian:abc", "--results", str(tmp_path / "r"))
    assert code == 2 and "the standard deviation 'abc' is not a number" in out


def test_a_run_name_cannot_leave_the_results_directory(tmp_path):
    for name in ("../../../../tmp/x", "a/b", "a\nb", "x" * 300):
        code, out = bench(*BASE, "--name", name, "--results", str(tmp_path / "r"))
        assert code == 2, (name, out)
        assert "letters, digits" in out or "characters" in out
    assert not any(p.name == "x" for p in Path("/tmp").glob("x"))  # nothing written outside --results
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_compare_with_nothing_in_common_exits_2_and_names_every_unmatched_row(tmp_path):
    a = FIXTURES / "compare" / "20261130-043508-issue2-b7147a-A"
    b = FIXTURES / "compare" / "20261130-043508-issue2-b7147a-B"
    code, out = bench("compare", str(a), str(b), "--fail-on-slowdown", "2%")
    assert code == 2 and "share no input label" in out, out
    code, out = bench("compare", str(a), str(b), "--fail-on-slowdown", "2%", "--pair-inputs", "gaussian:0.1=gaussian:1")
    assert code in (0, 1, 6), out  # paired: compared, a verdict (6: not resolved at 2 % between separate runs)
    code, out = bench("compare", str(a), str(b), "--fail-on-slowdown", "2%", "--pair-inputs", "gaussian:0.1=absent")
    assert code == 2 and "has no timed input 'absent'" in out, out
    # The same input in both, but no kernel in common: every row is unmatched, and a gate on nothing fails.
    h200 = FIXTURES / "h200"
    callable_run, endings = h200 / "20261201-225311-commits-0-0dcbbc07-f96ce1", h200 / "20261201-225219-endings-ba792f"
    code, out = bench("compare", str(callable_run), str(endings), "--fail-on-slowdown", "2%")
    assert code == 2, out
    assert "Nothing to compare" in out and "attn.py:attn @ gaussian:0.1 (only in A" in out
    assert "sdpa-cudnn @ gaussian:0.1 (only in B" in out
