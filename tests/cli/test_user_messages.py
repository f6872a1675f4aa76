"""Issue 41's minor items, one test each (each fails on main, 941094e): what a user is told, and where. The kernel's
stdout under `--json -` is tests/runner/test_in_process.py's; SIGTERM under `bench commits` is
tests/commits/test_commits_callable.py's signal test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch.nn.functional as F
from typer.testing import CliRunner

from harness.cli import app
from harness.config import RunConfig, SustainedProtocol
from harness.errors import ConfigError, KernelError, ResultsError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec
from harness.kernels import KernelRegistry, adapt_callable
from harness.results import RunWriter, expand_run, read_run

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8)
SPEC = InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1")
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.05, chunk_s=0.02,
                                settle_trend_window_s=0.05, warmin_min_s=0.02, warmin_cap_s=0.1, repeats=1)


def _sdpa(inputs):
    return F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, is_causal=True, scale=inputs.scale,
                                          enable_gqa=True)


def test_an_output_on_another_device_is_named_not_torchs_meta_error():
    from harness.runner import check_kernel

    reg = KernelRegistry()

    @reg.kernel("elsewhere", dtypes={"float32"}, devices={"cpu"})
    def prepare(inputs):
        return lambda: _sdpa(inputs).to("meta")

    with pytest.raises(KernelError, match="its launch returned a tensor on meta; its inputs are on cpu"):
        check_kernel(reg.get("elsewhere"), SPEC, device="cpu")


def test_a_window_or_paged_refusal_of_a_plain_function_names_the_keyword_that_would_take_it():
    def attn(q, k, v, is_causal=True, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)

    kernel = adapt_callable(attn, name="attn")
    for shape, keyword in ((AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=8, window=16),
                            "a `window` (or FlashAttention's `window_size`) keyword"),
                           (AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=8, page_size=16),
                            "a `page_table` keyword")):
        with pytest.raises(UnsupportedInputError, match=re.escape(f"A plain function takes it by naming {keyword}")):
            kernel.check_supports(dtype="float32", head_dim_qk=8, head_dim_v=8, causal=True, device_kind="cpu",
                                  shape=shape)


def test_an_error_paragraph_prints_brackets_as_text(capsys):
    """`bench commits` refusing a bundled kernel printed "declares no  in pyproject.toml": rich took the TOML table
    name for markup and dropped it."""
    import typer

    from harness.cli.common_args import fail

    with pytest.raises(typer.Exit):
        fail(ConfigError('the tree declares no [project.entry-points."harness.kernels"] in pyproject.toml'))
    assert '[project.entry-points."harness.kernels"] in pyproject.toml' in capsys.readouterr().err


def test_a_floor_that_cannot_be_used_is_refused_naming_floor():
    res = CliRunner().invoke(app, ["error", "--model", "smollm2-135m", "--device", "cpu", "--floor", "no-such-kernel"],
                             env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "--floor 'no-such-kernel'" in res.output, res.output


def test_a_bad_sustained_device_is_refused_naming_sustained_device():
    from harness.pytest_plugin import _device

    config = type("C", (), {"getoption": staticmethod(lambda name: "gpu7")})()
    with pytest.raises(ConfigError, match=r"^--sustained-device 'gpu7': use cpu, cuda:N"):
        _device(config)


def test_each_gate_call_names_its_own_stage(tmp_path):
    """A kernel that raises on its third call (the gate's check on inputs changed in place) was said to fail in
    stage "gate (first call)"."""
    from harness.runner import run_sustained

    reg = KernelRegistry()

    @reg.kernel("third", dtypes={"float32"}, devices={"cpu"})
    def prepare(inputs):
        calls = [0]

        def launch():
            calls[0] += 1
            if calls[0] == 3:
                raise RuntimeError("the third call")
            return _sdpa(inputs)

        return launch

    config = RunConfig(kernels=("third",), inputs=(SPEC,), device="cpu", protocol=PROTO, results_dir=tmp_path,
                       telemetry="none")
    (row,) = run_sustained(config, registry=reg).measurements
    assert "raised in stage gate (third call): RuntimeError: the third call" in row["error"], row["error"]


def test_l2_cold_on_a_shape_too_small_is_refused_before_the_run(tmp_path):
    """main: the run started, each kernel failed in its set-up for timing, and the run exited 4 (blamed on them)."""
    from harness.runner import run_sustained

    tiny = InputSpec(shape=AttentionShape(batch=1, heads_q=1, heads_kv=1, seq_len=4, head_dim_qk=4), dtype="float32")
    config = RunConfig(kernels=("sdpa-cpu",), inputs=(tiny,), device="cpu", telemetry="none", results_dir=tmp_path,
                       protocol=SustainedProtocol.quick(l2="cold"))
    with pytest.raises(ConfigError, match=r"--l2 cold: input gaussian:\S+ \(B1 H1/1 S4 d4 causal, float32\) holds .* "
                                          r"Nothing was run"):
        run_sustained(config)
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_json_path_is_refused_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["sustained", "-k", "sdpa-cpu", "--device", "cpu", "--quick", "--results",
                                   str(tmp_path / "r"), "--json", "/proc/no/such.json"], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "--json /proc/no/such.json: its folder cannot be made" in res.output, res.output
    assert not (tmp_path / "r").exists()
    res = CliRunner().invoke(app, ["sustained", "-k", "sdpa-cpu", "--device", "cpu", "--quick", "--results",
                                   str(tmp_path / "r"), "--csv", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "that is a folder" in res.output, res.output


def _tiny_run(root: Path, run_id: str, *, measurements: int = 2) -> Path:
    w = RunWriter(root, run_id)
    w.write_run({"status": "running", "protocol_json": "{}"})
    for i in range(measurements):
        mid = f"c0-k-r{i}"
        w.append_measurement(measurement={"measurement_id": mid, "config_index": 0, "input_label": "gaussian:1",
                                          "kernel": "k", "repeat": i, "status": "ok", "time_ns": 1e6 + i},
                             chunks=[{"measurement_id": mid, "chunk_index": 0, "phase": "window", "time_ns": 1e6}],
                             samples=[], probes=[])
    w.finish("complete")
    return w.path


def test_merge_names_the_damaged_input_and_leaves_no_half_written_out(tmp_path):
    from harness.multigpu import merge_runs

    a, b = _tiny_run(tmp_path, "20261204-100000-a-aaaaaa"), _tiny_run(tmp_path, "20261204-100000-b-bbbbbb")
    expand_run(b)  # its parts, as a run killed before it ended keeps them
    (b / "chunks" / "part-00001.parquet").write_bytes(b"not parquet")
    out = tmp_path / "merged"
    with pytest.raises(ResultsError, match=f"Results file {b}/chunks/part-00001.parquet cannot be read"):
        merge_runs([a, b], out=out)
    assert not out.exists()


def test_a_damaged_part_leaves_out_one_measurement_and_a_missing_part_is_named(tmp_path):
    from harness.errors import ResultsWarning

    run = _tiny_run(tmp_path, "20261204-100000-r-cccccc", measurements=3)
    expand_run(run)  # its parts, as a run killed before it ended keeps them
    (run / "chunks" / "part-00001.parquet").write_bytes(b"cut short")
    (run / "samples" / "part-00002.parquet").unlink()
    with pytest.warns(ResultsWarning) as seen:
        loaded = read_run(run)
    texts = " ".join(str(w.message) for w in seen)
    assert "chunks/part-00001.parquet cannot be read as Parquet" in texts and "It is left out" in texts
    assert f"{run / 'samples'}: part-00002.parquet missing" in texts
    assert loaded.measurements.height == 3 and loaded.chunks.height == 2


def test_a_run_that_timed_nothing_prints_no_empty_figures_tables():
    from harness.report import sustained_tables

    failed = [{"config_index": 0, "input_label": "gaussian:1", "kernel": "k", "repeats": 0, "unsettled": 0,
               "errors": ["Kernel 'k' failed the correctness gate"]}]
    (only,) = sustained_tables(failed, title="r")
    assert only.title == "r: not timed"


def test_one_repeat_has_no_range():
    from harness.analysis import aggregate_repeats
    from harness.report import sustained_tables

    rows = [{"config_index": 0, "input_label": "gaussian:1", "kernel": "k", "repeat": 0, "status": "ok",
             "time_ns": 2e6}]
    (agg,) = aggregate_repeats(rows)
    assert agg["time_range_frac"] is None
    clock = sustained_tables([agg], title="r")[0]
    assert clock.rows[0][clock.columns.index("range")] == "-"


def test_a_name_shared_by_two_runs_of_the_same_second_is_refused_not_picked(tmp_path):
    from harness.results import resolve_run

    for run_id in ("20261204-100000-base-aaaaaa", "20261204-100000-base-bbbbbb"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "runs.parquet").write_bytes(b"")
    with pytest.raises(ResultsError, match="'base' names 2 runs started in the same second"):
        resolve_run("base", results=tmp_path)
    (tmp_path / "20261204-100001-base-cccccc").mkdir()
    (tmp_path / "20261204-100001-base-cccccc" / "runs.parquet").write_bytes(b"")
    assert resolve_run("base", results=tmp_path).name == "20261204-100001-base-cccccc"  # a newer one is clear
