"""Default kernels follow the workload: dense self-attention gets the device's SDPA back-ends; a decode, paged,
windowed or varlen shape the bundled kernels that compute it (sdpa-kvcache, triton-splitkv where it runs,
triton-mla for MLA's latent cache), and `bench sustained` prints which it chose and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.inputs import AttentionShape
from harness.suite import default_kernels, kernel_specs, workload_kernels

DECODE = AttentionShape(batch=2, heads_q=8, heads_kv=2, seq_len=2, seq_len_kv=1024, head_dim_qk=64, page_size=16)
DENSE = AttentionShape(batch=1, heads_q=8, heads_kv=2, seq_len=256, head_dim_qk=64)
MLA = AttentionShape(batch=2, heads_q=16, heads_kv=1, seq_len=1, seq_len_kv=256, head_dim_qk=576, head_dim_v=512,
                     latent_kv=True)


@pytest.fixture
def no_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_dense_self_attention_keeps_the_sdpa_back_ends(no_interpreter):
    assert default_kernels("cpu", [DENSE]) == ("sdpa-cpu",) == default_kernels("cpu")
    assert default_kernels("cuda:0", [DENSE]) == ("sdpa-cudnn", "sdpa-flash")


SPLITKV = ("sdpa-kvcache", "triton-splitkv")


@pytest.mark.parametrize("shape, kind, cuda", [
    (DECODE, "decode, paged", SPLITKV),
    # windowed self-attention: 256 queries a sequence is prefill, not a split-KV decode
    (AttentionShape(batch=1, heads_q=8, heads_kv=2, seq_len=256, head_dim_qk=64, window=64), "window",
     ("sdpa-kvcache",)),
    (AttentionShape(batch=1, heads_q=8, heads_kv=2, seq_len=4, seq_len_kv=256, head_dim_qk=64, window=64),
     "decode, window", SPLITKV),
    (AttentionShape(batch=2, heads_q=8, heads_kv=2, seq_len=4, seq_len_kv=64, head_dim_qk=64, kv_lens=(64, 9)),
     "decode, varlen", SPLITKV),
])
def test_a_serving_workload_gets_the_kernels_that_compute_it(no_interpreter, shape, kind, cuda):
    pytest.importorskip("triton")
    assert workload_kernels("cpu", [shape]) == (("sdpa-kvcache",), f"the bundled kernels that compute a {kind} "
                                                                    f"workload on cpu")
    assert default_kernels("cuda:0", [shape]) == cuda
    assert default_kernels("rocm:0", [shape]) == ("sdpa-kvcache",)  # triton-splitkv is not built for ROCm


def test_triton_kernels_only_where_they_run(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the CPU runs Triton only in its interpreter
    assert default_kernels("cpu", [DECODE]) == ("sdpa-kvcache", "triton-splitkv")
    monkeypatch.delenv("TRITON_INTERPRET")
    long_q = AttentionShape(batch=1, heads_q=8, heads_kv=2, seq_len=64, seq_len_kv=1024, head_dim_qk=64)
    assert default_kernels("cuda:0", [long_q]) == ("sdpa-kvcache",)  # more than 16 queries: not a split-KV decode
    odd = AttentionShape(batch=1, heads_q=8, heads_kv=2, seq_len=1, seq_len_kv=1024, head_dim_qk=96)
    assert default_kernels("cuda:0", [odd]) == ("sdpa-kvcache",)  # head dim 96: not a power of two
    assert default_kernels("cuda:0", [MLA]) == ("triton-mla", "sdpa-kvcache")
    # a run of several shapes gets the kernels that compute every one: 256 dense queries are no split-KV decode
    assert default_kernels("cuda:0", [DENSE, DECODE]) == ("sdpa-kvcache",)
    assert kernel_specs(["my:attn"], device="cuda:0", shapes=[DECODE]) == ("my:attn",)  # named kernels win


PEAKS = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "20261204-200846-round2-peaks-2af2a0"


def test_bench_sustained_times_a_decode_shape_with_the_default_kernels_and_says_so(no_interpreter, tmp_path):
    """The issue's command, refused before ("Kernel 'sdpa-cpu' does not compute S_q < S_kv"), now runs; with --peaks
    the run keeps those roofs and its table sets GB/s against the read roof."""
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.profiling import read_trace_table
    from harness.results import read_rows

    args = ["sustained", "--device", "cpu", "--seq-len-q", "2", "--seq-len-kv", "64", "--page-size", "16", "--batch",
            "2", "--heads", "4", "--heads-kv", "2", "--head-dim", "16", "-i", "gaussian:1", "--quick", "--repeats", "1",
            "--window-s", "0.1", "--warmin-cap-s", "0.3", "--telemetry", "none", "--results", str(tmp_path / "r")]
    res = CliRunner().invoke(app, [*args, "--peaks", str(PEAKS)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert ("kernels: sdpa-kvcache (the bundled kernels that compute a decode, paged workload on cpu; name others "
            "with -k)") in text
    run = next((tmp_path / "r").iterdir())
    (row,) = read_rows(run, "measurements")
    assert row["kernel"] == "sdpa-kvcache" and row["status"] in ("ok", "unsettled")
    assert "% of read roof" in text and "of the measured read-stream (4608 GB/s at 1585 MHz)" in text
    assert {r["run_id"] for r in read_trace_table(run, "peaks")} == {run.name}  # the roofs are the run's now
    # a folder without peaks is refused by the flag, before anything runs
    res = CliRunner().invoke(app, [*args, "--peaks", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and f"--peaks {tmp_path}: no peaks table there" in " ".join(res.output.split())
    assert len(list((tmp_path / "r").iterdir())) == 1


def test_bench_error_takes_the_same_defaults_for_a_decode_shape(no_interpreter, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    res = CliRunner().invoke(app, ["error", "--device", "cpu", "--seq-len-q", "1", "--seq-len-kv", "48", "--page-size",
                                   "16", "--batch", "2", "--heads", "4", "--heads-kv", "2", "--head-dim", "16", "-i",
                                   "gaussian:1"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "sdpa-kvcache" in res.output and "sdpa-cpu" not in res.output
