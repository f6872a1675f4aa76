"""`bench compare` through Typer: exit 1 on a slowdown beyond the threshold, 2 on bad input, 0 otherwise."""

import pytest
import typer
from h200_runs import RUN_A, RUN_B, SMOLLM2
from typer.testing import CliRunner

from harness.cli.analysis import compare

app = typer.Typer()
app.command()(compare)
app.command("noop")(lambda: None)  # two commands, so Typer keeps the subcommand name as in `bench compare`
PAIR = ["--pair-inputs", "gaussian:0.1=gaussian:1"]


def invoke(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)], env={"COLUMNS": "220"})


@pytest.mark.parametrize("threshold, code", [("0.5%", 1), ("2%", 0)])
def test_exit_code_follows_the_threshold(threshold, code, tmp_path):
    md = tmp_path / "cmp.md"
    r = invoke(RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", threshold, "--md", md)
    assert r.exit_code == code, r.output
    text = md.read_text()
    assert "| sdpa-cudnn | gaussian:0.1 | gaussian:1 |" in text
    if code:
        assert "slower beyond 0.5%: sdpa-cudnn on gaussian:1 +1.02%; sdpa-flash on gaussian:1 +0.93%" in r.output
        assert "**FAIL**: 2 slowdown(s) beyond 0.5%" in text
    else:
        assert "**PASS**: no slowdown beyond 2.0%." in text


def test_without_threshold_a_slowdown_is_reported_not_failed():
    r = invoke(RUN_A, RUN_B, *PAIR)
    assert r.exit_code == 0 and "slower" in r.output and "1.0102 [1.0075, 1.0129]" in r.output


@pytest.mark.parametrize("args, message", [
    ((RUN_A, SMOLLM2, "--pair-inputs", "gaussian:0.1=L15:gaussian:0.1"), "shapes differ"),
    ((RUN_A, RUN_B), "share no input label"),
    ((RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", "two"), "is not a percentage"),
    ((RUN_A, RUN_A.parent), "is not a run directory"),
])
def test_bad_input_exits_2_with_one_paragraph(args, message):
    r = invoke(*args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_burst_command_on_cpu(tmp_path):
    from harness.cli.analysis import burst

    app2 = typer.Typer()
    app2.command()(burst)
    app2.command("noop")(lambda: None)
    r = CliRunner().invoke(app2, [
        "burst", "--device", "cpu", "--kernel", "sdpa-cpu", "--seq-len", "64", "--heads", "2", "--head-dim", "16",
        "--dtype", "float32", "--warmup", "3", "--timed", "5", "--repeats", "1", "--idle-s", "0", "--telemetry", "none",
        "--results", str(tmp_path)], env={"COLUMNS": "220"})
    assert r.exit_code == 0, r.output
    assert "Burst: kernel-only time" in r.output and "aten::scaled_dot_product_attention" in r.output
    assert len(list(tmp_path.glob("*/measurements/part-*.parquet"))) == 1
