"""CPU runs set and record torch's thread count (`--threads`, default 1 on the CPU; on a GPU torch's own): in the
run's process and in every kernel's own process, in the protocol row and in the timing note."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.config import CPU_THREADS, RunConfig, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec
from harness.results import read_run

SPEC = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=32, head_dim_qk=8), dtype="float32",
                 source="gaussian:1")

SPY = '''import os
import torch
import torch.nn.functional as F

_seen = []


def attn(q, k, v):
    if not _seen:  # once per process: the thread count this kernel's process runs on
        _seen.append(torch.get_num_threads())
        with open(os.environ["THREADSPY"], "w") as f:
            f.write(str(_seen[0]))
    return F.scaled_dot_product_attention(q, k, v)
'''


def test_the_default_is_stated_one_thread_on_the_cpu_and_torchs_own_on_a_gpu():
    assert CPU_THREADS == 1
    assert RunConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu").protocol.threads == 1
    assert RunConfig(kernels=("sdpa-cudnn",), inputs=(SPEC,), device="cuda:0").protocol.threads is None
    given = SustainedProtocol(threads=3)
    assert RunConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", protocol=given).protocol.threads == 3
    with pytest.raises(ConfigError, match=r"--threads 0: a whole number of CPU threads, at least 1"):
        SustainedProtocol(threads=0)


def test_threads_0_is_refused_by_flag_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["sustained", "--device", "cpu", "--quick", "--threads", "0", "--results",
                                   str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "--threads 0" in " ".join(res.output.split())
    assert not list(tmp_path.iterdir())


def test_a_cpu_run_sets_its_threads_in_every_process_and_records_them(tmp_path, monkeypatch):
    import torch

    (tmp_path / "threadspy.py").write_text(SPY)
    monkeypatch.setenv("THREADSPY", str(tmp_path / "seen.txt"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what the child would get by inheritance; --threads must win
    monkeypatch.chdir(tmp_path)
    before = torch.get_num_threads()
    try:
        res = CliRunner().invoke(app, [
            "sustained", "--device", "cpu", "--quick", "--telemetry", "none", "--no-causal", "--threads", "2",
            "-k", "threadspy.py:attn", "-k", "sdpa-cpu", "-i", "gaussian:1", "--heads", "2", "--seq-len", "32",
            "--head-dim", "8", "--dtype", "fp32", "--repeats", "1", "--idle-s", "0", "--window-s", "0.1", "--warmin-cap-s", "0.3",
            "--results", str(tmp_path / "r")], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert torch.get_num_threads() == 2  # the run's own process (sdpa-cpu ran there)
    finally:
        torch.set_num_threads(before)
    assert (tmp_path / "seen.txt").read_text() == "2"  # the kernel's own process, though its OMP_NUM_THREADS is 1
    (run_dir,) = (tmp_path / "r").iterdir()
    info = read_run(run_dir).info
    assert json.loads(info["protocol_json"])["threads"] == 2
    assert info["timing_note"].endswith("; torch ran on 2 CPU threads (--threads)")
