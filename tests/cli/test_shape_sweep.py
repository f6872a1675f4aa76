"""Shape flags of issue 33: decode, window, paging and varlen options, lists on every shape flag as a sweep
(the product of the values), refusals by flag, and what a run records of each workload."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError
from harness.suite import CaptureArgs, ShapeArgs, attention_shape, attention_shapes, input_specs

SMALL = ["--device", "cpu", "--quick", "--repeats", "1", "--heads", "4", "--heads-kv", "2", "--head-dim", "16",
         "--dtype", "fp32", "-i", "gaussian:1", "--telemetry", "none", "-k", "sdpa-kvcache", "--idle-s", "0",
         "--window-s", "0.1", "--warmin-cap-s", "0.3"]


def bench(*args):
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, " ".join(res.output.split())


def test_a_sweep_is_the_product_of_the_lists_each_point_labelled_by_what_varies():
    points = attention_shapes(ShapeArgs(seq_len_q=1, seq_len_kv=(256, 1024), page_size=(16, "none"), heads=4,
                                        heads_kv=2), device="cpu")
    assert [label for _, label in points] == ["Skv256 page16", "Skv256 page none", "Skv1024 page16",
                                              "Skv1024 page none"]
    assert [(s.seq_len, s.seq_len_kv, s.page_size) for s, _ in points] == [
        (1, 256, 16), (1, 256, None), (1, 1024, 16), (1, 1024, None)]
    specs = input_specs(sources=["gaussian:0.1", "zeros"], shape=ShapeArgs(batch=(1, 8)), capture=CaptureArgs(),
                        device="cpu")
    assert [s.label for s in specs] == ["gaussian:0.1 B1", "zeros B1", "gaussian:0.1 B8", "zeros B8"]
    # one point: the labels are the sources, as before sweeps existed
    assert [s.label for s in input_specs(sources=["zeros"], shape=ShapeArgs(batch=8), capture=CaptureArgs(),
                                         device="cpu")] == ["zeros"]


def test_seq_len_is_the_keys_and_seq_len_q_the_last_queries_of_each_sequence():
    s = attention_shape(ShapeArgs(seq_len_q=4, seq_len=4096), device="cpu")
    assert (s.seq_len, s.seq_len_kv) == (4, 4096) and s.features() == {"decode"}
    assert attention_shape(ShapeArgs(seq_len_q=1), device="cpu").seq_len_kv == 1024  # the device's default S
    with pytest.raises(ConfigError, match="--seq-len and --seq-len-kv both"):
        attention_shapes(ShapeArgs(seq_len=128, seq_len_kv=256), device="cpu")
    with pytest.raises(ConfigError, match=r"--seq-len-q <= --seq-len-kv.*sweep point Sq256 Skv128"):
        attention_shapes(ShapeArgs(seq_len_q=(1, 256), seq_len_kv=(128, 512)), device="cpu")
    with pytest.raises(ConfigError, match="--window 0"):
        attention_shapes(ShapeArgs(seq_len=64, window=(0, 8)), device="cpu")
    with pytest.raises(ConfigError, match="--batch none"):
        attention_shapes(ShapeArgs(batch=("none",)), device="cpu")
    with pytest.raises(ConfigError, match="takes one value of --seq-len-kv"):
        attention_shape(ShapeArgs(seq_len_kv=(128, 256)), device="cpu")


def test_varlen_lengths_are_drawn_with_the_seed_or_given_and_recorded_with_the_shape():
    a = attention_shape(ShapeArgs(batch=6, seq_len_q=1, seq_len_kv=100, varlen="uniform:0.5"), device="cpu", seed=3)
    b = attention_shape(ShapeArgs(batch=6, seq_len_q=1, seq_len_kv=100, varlen="uniform:0.5"), device="cpu", seed=3)
    c = attention_shape(ShapeArgs(batch=6, seq_len_q=1, seq_len_kv=100, varlen="uniform:0.5"), device="cpu", seed=4)
    assert a.kv_lens == b.kv_lens != c.kv_lens and all(50 <= n <= 100 for n in a.kv_lens)
    assert a.varlen == "uniform:0.5 seed 3" and "varlen uniform:0.5 seed 3" in a.label()
    given = attention_shape(ShapeArgs(batch=3, seq_len=64, varlen="lengths:64/10/33"), device="cpu")
    assert given.kv_lens == (64, 10, 33) and given.q_lengths() == (64, 10, 33)  # prefill: every token a query
    for form, match in (("lengths:1/2", "gives 2 lengths for --batch 3"), ("uniform:2", "0 < F <= 1"),
                        ("zipf", "not a length distribution")):
        with pytest.raises(ConfigError, match=match):
            attention_shape(ShapeArgs(batch=3, seq_len=64, varlen=form), device="cpu")


def test_the_cli_takes_lists_and_repeated_flags_alike_and_refuses_them_where_one_shape_is_run(tmp_path):
    from harness.cli.sustained import sustained_config_from_args

    one = sustained_config_from_args([*SMALL, "--seq-len", "32,64", "--results", str(tmp_path)])
    two = sustained_config_from_args([*SMALL, "--seq-len", "32", "--seq-len", "64", "--results", str(tmp_path)])
    assert [s.shape.seq_len for s in one.inputs] == [s.shape.seq_len for s in two.inputs] == [32, 64]
    code, out = bench("burst", "--device", "cpu", "--seq-len", "32,64", "-k", "sdpa-cpu", "--results", str(tmp_path))
    assert code == 2 and "takes one value of --seq-len" in out, out
    code, out = bench("sustained", *SMALL, "--seq-len", "32,abc", "--results", str(tmp_path))
    assert code == 2 and "'abc' is not an integer size" in out, out


def test_a_decode_sweep_runs_and_each_row_records_its_workload(tmp_path):
    from harness.results import read_rows

    code, out = bench("sustained", *SMALL, "--batch", "3", "--seq-len-q", "1", "--seq-len-kv", "32,64",
                      "--page-size", "8", "--varlen", "uniform:0.5", "--results", str(tmp_path), "--name", "sweep")
    assert code == 0, out
    run = next(tmp_path.iterdir())
    rows = read_rows(run, "measurements")
    assert [r["input_label"] for r in rows] == ["gaussian:1 Skv32", "gaussian:1 Skv64"]
    for r, s_kv in zip(rows, (32, 64)):
        assert (r["seq_len"], r["seq_len_kv"], r["page_size"], r["window"]) == (1, s_kv, 8, None)
        assert r["varlen"] == "uniform:0.5 seed 0" and len(r["kv_lens"]) == 3
        assert all(s_kv // 2 <= n <= s_kv for n in r["kv_lens"])
        shape = attention_shape(ShapeArgs(batch=3, heads=4, heads_kv=2, head_dim=16, seq_len_q=1, seq_len_kv=s_kv,
                                          page_size=8, varlen="uniform:0.5"), device="cpu")
        assert r["flops_per_launch"] == shape.flops and r["bytes_per_launch"] == shape.bytes_moved(item=4, out_item=4)
        assert r["status"] in ("ok", "unsettled") and r["time_ns"] > 0
