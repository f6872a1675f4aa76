"""`bench slurm` and `bench merge` (through the `bench` app), and the multi-GPU rendering."""

from __future__ import annotations

import io
import json

from multigpu_helpers import write_run
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.multigpu_output import render_multi
from harness.cli.sustained import sustained_config_from_args as sustained_config
from harness.multigpu import merge_runs

A, B = "00000000:19:00.0", "00000000:3B:00.0"
SMALL = ["--device", "cpu", "--quick", "--seq-len", "32", "--heads", "2", "--head-dim", "8", "--dtype", "fp32"]


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_sustained_options_build_the_suite():
    config = sustained_config([*SMALL, "-k", "sdpa-cpu", "-i", "gaussian:1", "-i", "zeros", "--repeats", "5"])
    assert config.kernels == ("sdpa-cpu",) and [i.source for i in config.inputs] == ["gaussian:1", "zeros"]
    assert config.protocol.repeats == 5 and config.inputs[0].shape.seq_len == 32


def test_slurm_dry_run_prints_the_script_and_writes_the_job(tmp_path):
    code, out = bench("slurm", "--out", str(tmp_path / "job"), "--per", "gpu", "--tasks", "2", "--partition", "gpu",
                      "--", *SMALL, "-i", "gaussian:1", "-i", "zeros", "-i", "gaussian:0.1")
    assert code == 0, out
    assert out.startswith("#!/bin/bash\n") and "#SBATCH --array=0-1\n" in out and "#SBATCH --partition=gpu" in out
    assert f"--job {tmp_path / 'job' / 'job.json'}" in out
    job = json.loads((tmp_path / "job" / "job.json").read_text())
    assert job["tasks"] == [[0, 2], [1]] and job["mode"] == "shard"
    assert [i["source"] for i in job["config"]["inputs"]] == ["gaussian:1", "zeros", "gaussian:0.1"]
    assert (tmp_path / "job" / "bench.sbatch").read_text() in out


def test_slurm_bad_input(tmp_path):
    code, out = bench("slurm", "--out", str(tmp_path / "j1"), "--", *SMALL, "-i", "gaussian:1")
    assert code == 2 and "--per gpu needs --tasks N" in " ".join(out.split())
    code, out = bench("slurm", "--out", str(tmp_path / "j2"), "--per", "config", "--", *SMALL, "--heads-kv", "3")
    assert code == 2 and "Hq=2 is not a multiple of Hkv=3" in " ".join(out.split())
    code, out = bench("slurm", "--out", str(tmp_path / "j3"), "--per", "config", "--", "--no-such-option")
    assert code == 2 and "No such option: --no-such-option" in " ".join(out.split())
    code, out = bench("slurm", "--out", str(tmp_path / "j5"), "--per", "config", "--", *SMALL, "--gpus", "all")
    assert code == 2 and "--gpus cannot be given to each task" in " ".join(out.split())
    code, out = bench("slurm", "--out", str(tmp_path / "j4"), "--per", "gpu", "--tasks", "3", "--", *SMALL,
                      "-i", "gaussian:1")
    assert code == 2 and "3 workers for 1 configuration(s)" in " ".join(out.split())


def test_merge_command(tmp_path):
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [100, 101]})
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [104, 105]})
    code, out = bench("merge", str(a), str(b), "--out", str(tmp_path / "m"))
    words = " ".join(out.split())
    assert code == 0, out
    assert "(complete): GPUs" in words and "Spread between GPUs" in words and "3.90%" in words
    assert f"results: {tmp_path / 'm'}" in words
    code, out = bench("merge", str(a), "--out", str(tmp_path / "m"))
    assert code == 2 and "exists" in out


def test_render_of_a_sharded_run_at_a_fixed_width(tmp_path):
    from rich.console import Console

    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [100e3]}, config_indices=(0,), suite_size=2, mode="shard")
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [200e3]}, config_indices=(1,), suite_size=2, mode="shard",
                  status="running")
    result = merge_runs([a, b], out=tmp_path / "m")
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render_multi(result, console)
    rows = [x.replace("│", " ").split() for x in console.file.getvalue().splitlines()]
    assert ["00000000:19:00.0", "complete", "0", "1"] in rows
    assert rows[[r[:1] for r in rows].index(["00000000:3B:00.0"])][:4] == ["00000000:3B:00.0", "incomplete", "1", "1"]
    # sharded: one GPU per configuration, so the ordinary sustained tables, pooled
    # (the synthetic runs label each input by the worker's own index: in0 on both GPUs)
    assert [r[:3] for r in rows if r[:2] == ["in0", "k"]][:2] == [["in0", "k", "0.1000"], ["in0", "k", "0.2000"]]
