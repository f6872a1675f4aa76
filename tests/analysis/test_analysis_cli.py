"""`bench compare` through Typer: exit 1 on a slowdown beyond the threshold, 2 on bad input, 0 otherwise."""

import pytest
import typer
from h200_runs import RUN_A, RUN_B, SMOLLM2
from typer.testing import CliRunner

from harness.cli.analysis import compare
from harness.results._compact import merged_parts

app = typer.Typer()
app.command()(compare)
app.command("noop")(lambda: None)  # two commands, so Typer keeps the subcommand name as in `bench compare`
PAIR = ["--pair-inputs", "gaussian:0.1=gaussian:1"]
# RUN_A and RUN_B were split from one run (tests/fixtures/compare/README.md): no between-run variance between them.
ONE_RUN = ["--between-runs-cv", "0%"]


def invoke(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)], env={"COLUMNS": "220"})


@pytest.mark.parametrize("threshold, code", [("0.5%", 1), ("2%", 0)])
def test_exit_code_follows_the_threshold(threshold, code, tmp_path):
    md = tmp_path / "cmp.md"
    r = invoke(RUN_A, RUN_B, *PAIR, *ONE_RUN, "--fail-on-slowdown", threshold, "--md", md)
    assert r.exit_code == code, r.output
    text = md.read_text()
    assert "| sdpa-cudnn | gaussian:0.1 | gaussian:1 |" in text
    if code:
        assert ("FAIL: 2 slower beyond the 0.5 % (--fail-on-slowdown 0.5%) threshold: sdpa-cudnn on gaussian:1 "
                "+1.02% [+0.53%, +1.51%]; sdpa-flash on gaussian:1 +0.93% [+0.74%, +1.12%]") in r.output
        assert "**FAIL**: 2 slower beyond the 0.5 % (--fail-on-slowdown 0.5%) threshold" in text
    else:
        assert ("**PASS**: nothing slower beyond the 2 % (--fail-on-slowdown 2%) threshold (2 compared: 2 slower, "
                "within threshold; the within-threshold changes are real, and smaller than it)") in text


def test_separate_runs_cannot_pass_a_gate_below_their_floor(tmp_path):
    # The same two runs taken as separate runs (the default): a 0.5 % gate is below the 1.2 % that a 0.5 %
    # between-run cv supports, so the rows are not resolved: exit 6, never a pass and never a false FAIL.
    r = invoke(RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", "0.5%", "--json", tmp_path / "v.json")
    assert r.exit_code == 6, r.output
    assert "NOT RESOLVED: 2 of 2 compared could not be judged at the 0.5 % (--fail-on-slowdown 0.5%)" in r.output
    assert ("separate runs: every interval includes a between-run cv of 0.5 % (default for a GPU), so the smallest "
            "threshold they can call same is 1.2 % (tighter than this gate") in r.output
    import json

    verdict = json.loads((tmp_path / "v.json").read_text())["verdict"]
    assert verdict["verdict"] == "unresolved" and verdict["exit_code"] == 6 and len(verdict["unresolved"]) == 2
    passed = invoke(RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", "0.5%", "--unresolved", "pass")
    assert passed.exit_code == 0 and "PASS (--unresolved pass): nothing slower found; NOT RESOLVED: " in passed.output
    bad = invoke(RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", "0.5%", "--unresolved", "maybe")
    assert bad.exit_code == 2 and "--unresolved 'maybe': fail" in bad.output


def test_without_threshold_a_slowdown_is_reported_not_failed():
    r = invoke(RUN_A, RUN_B, *PAIR, *ONE_RUN)
    assert r.exit_code == 0 and "B is 1.0 % slower" in r.output and "1.0102 [1.0053, 1.0151]" in r.output
    assert "no gate (verdicts at the 0.5 % (default) threshold" in r.output


@pytest.mark.parametrize("args, message", [
    ((RUN_A, SMOLLM2, "--pair-inputs", "gaussian:0.1=L15:gaussian:0.1"), "shapes differ"),
    ((RUN_A, RUN_B), "share no input label"),
    ((RUN_A, RUN_B, *PAIR, "--fail-on-slowdown", "two"), "is not a percentage"),
    ((RUN_A, RUN_A.parent), "holds no run (no runs.parquet in it)"),
    ((RUN_A, "no-such-run"), "No run 'no-such-run': it is neither a run directory nor a run id or run name"),
    ((RUN_A,), "takes two runs, A then B (got 1)"),
    ((RUN_A, RUN_B, "--pair-kernels", "sdpa-cudnn=sdpa-flash"), "--pair-kernels compares two kernels of ONE run"),
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
    (run,) = tmp_path.glob("*/measurements")
    assert [f.name for f in run.iterdir()] == ["merged.parquet"] and len(merged_parts(run)) == 1  # merged at the end


def test_runs_are_found_by_name_or_id_under_results(tmp_path):
    import json
    import shutil

    shutil.copytree(RUN_A, tmp_path / "20261130-043508-base-aaaaaa")
    shutil.copytree(RUN_B, tmp_path / "20261130-050000-candidate-bbbbbb")
    r = invoke("base", "candidate", *PAIR, "--results", tmp_path, "--json", tmp_path / "cmp.json")
    assert r.exit_code == 0, r.output
    assert f"base: {tmp_path / '20261130-043508-base-aaaaaa'}" in r.output
    doc = json.loads((tmp_path / "cmp.json").read_text())
    assert [run["run_dir"] for run in doc["runs"]] == [str(tmp_path / "20261130-043508-base-aaaaaa"),
                                                      str(tmp_path / "20261130-050000-candidate-bbbbbb")]
    by_id = invoke(RUN_A.name, RUN_B.name, *PAIR, *ONE_RUN, "--results", RUN_A.parent)
    assert by_id.exit_code == 0 and "1.0102 [1.0053, 1.0151]" in by_id.output


def test_two_kernels_of_one_run_are_paired_by_repeat(tmp_path):
    import json

    r = invoke(SMOLLM2, "--pair-kernels", "sdpa-cudnn=sdpa-flash", "--json", tmp_path / "k.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "k.json").read_text())
    rows = doc["tables"]["kernels"]
    assert {(x["kernel"], x["kernel_b"], x["design"], x["interval_method"]) for x in rows} == {
        ("sdpa-cudnn", "sdpa-flash", "interleaved", "paired t")}
    assert all(x["verdict"] == "slower" and x["time_b_over_a"] > 1.5 for x in rows)  # flash is ~1.7x cuDNN's time
    assert "sdpa-flash vs sdpa-cudnn on L15:captured: B is " in r.output
    # Two kernels of one run are one run by design: no "A and B are the same run" warning beside the verdicts.
    assert "same run" not in r.output
    gated = invoke(SMOLLM2, "--pair-kernels", "sdpa-cudnn=sdpa-flash", "--fail-on-slowdown", "5%")
    assert gated.exit_code == 1 and "same run" not in gated.output and "FAIL: " in gated.output
    bad = invoke(SMOLLM2, "--pair-kernels", "sdpa-cudnn=nope")
    assert bad.exit_code == 2 and "timed no kernel 'nope'" in bad.output
