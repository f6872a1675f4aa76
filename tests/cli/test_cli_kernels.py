"""`bench error` and `bench repro` on the CPU: numbers, the JSON rows, exit codes and messages."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.workers.forked_run import run as forked_run

SMALL = ["--device", "cpu", "--seq-len", "48", "--heads", "2", "--head-dim", "16", "--dtype", "fp32"]
PLUGIN = "cli_plugin_kernels"


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())  # rich wraps; compare words, not line breaks


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Plugin kernels loaded by `module:function` stay in the process-wide registry: give each test its own."""
    from harness.kernels import _registry

    monkeypatch.setattr(_registry, "_default", None)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A module of test kernels, importable as `cli_plugin_kernels:<name>`."""
    (tmp_path / f"{PLUGIN}.py").write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F

        from harness.kernels import Kernel, KernelRegistry
        from harness.kernels._error import emulate_p_attention, kernel_reference_inputs

        registry = KernelRegistry()


        @registry.kernel("flaky-every-3", dtypes={"float32"}, devices={"cpu"})
        def flaky(inputs):
            # every third launch moves one element by one ulp: 'nondeterministic', deterministically
            calls = {"n": 0}
            base = inputs.q.sum(-1)

            def launch():
                calls["n"] += 1
                out = base.clone()
                if calls["n"] % 3 == 0:
                    out[0, 0, 0] = torch.nextafter(out[0, 0, 0], torch.tensor(float("inf")))
                return out

            return launch


        @registry.kernel("picky", dtypes={"float32"}, devices={"cpu"})
        def picky(inputs):
            if inputs.source == "gaussian:1":
                raise RuntimeError("picky refuses std 1")
            return lambda: F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, is_causal=inputs.shape.causal,
                                                          scale=inputs.scale)


        def _fake_fp8(inputs):
            # an 'FP8 kernel' whose output is its own P emulation rounded to bf16
            q, k, v = kernel_reference_inputs(FAKE_FP8, inputs)
            out = emulate_p_attention(q, k, v, scale=inputs.scale, causal=inputs.shape.causal, p_mode="exact")
            out = out.to(torch.bfloat16)
            return lambda: out


        FAKE_FP8 = Kernel(
            name="fake-fp8-exact", prepare=_fake_fp8, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
            extra={"quant": "e4m3-pow2", "p_mode": "exact", "p_block": 64, "reads_inputs_at_launch": False},
            source="cli_plugin_kernels:FAKE_FP8",
        )
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, PLUGIN, raising=False)
    yield PLUGIN
    sys.modules.pop(PLUGIN, None)


def test_commands_are_registered():
    code, out = bench("--help")
    assert code == 0 and "error" in out and "repro" in out


def test_error_of_sdpa_and_the_reference_with_json_rows(tmp_path):
    path = tmp_path / "sub" / "error.json"
    code, out = bench("error", *SMALL, "-k", "sdpa-cpu", "-k", "reference-fp64", "--json", str(path))
    assert code == 0, out
    assert "error vs fp64: gaussian:0.1" in out and "error vs fp64: gaussian:1" in out
    assert "sdpa-cpu" in out and "reference-fp64" in out and f"rows: {path}" in out
    rows = json.loads(path.read_text())
    assert [(r["kernel"], r["input"]) for r in rows] == [
        ("sdpa-cpu", "gaussian:0.1"), ("reference-fp64", "gaussian:0.1"),
        ("sdpa-cpu", "gaussian:1"), ("reference-fp64", "gaussian:1"),
    ]
    for r in rows:
        assert r["error"] is None and r["shape"] == "B1 H2/2 S48 d16 causal" and r["dtype"] == "fp32"
        assert r["reference"] == "the fp32 inputs" and r["p_mode"] is None
        assert all(r[f"{s}_{m}"] is None for s in ("input", "p", "kernel", "vs_unquantized") for m in ("rel_rms", "max_abs"))
        if r["kernel"] == "sdpa-cpu":
            assert 0 < r["rel_rms"] < 1e-5 and 0 < r["max_abs"] < 1e-5  # fp32 vs fp64: a few ulp
        else:
            assert r["rel_rms"] < 1e-14 and r["max_abs"] < 1e-14  # the reference itself
    assert f"{rows[0]['rel_rms']:.3g}" in out
    assert sorted(p.name for p in path.parent.iterdir()) == ["error.json"]  # no temporary file left behind


def test_error_by_stage_for_an_fp8_kernel(tmp_path, plugin):
    path = tmp_path / "fp8.json"
    code, out = bench("error", *SMALL[:-2], "--dtype", "bf16", "-i", "gaussian:1", "-k", f"{plugin}:FAKE_FP8",
                      "-k", "sdpa-cpu", "--json", str(path))
    assert code == 0, out
    assert "input term" in out and "P term" in out and "kernel term" in out
    fp8, sdpa = json.loads(path.read_text())
    assert fp8["kernel"] == "fake-fp8-exact" and fp8["p_mode"] == "exact"
    assert fp8["reference"] == "e4m3-pow2 quantized inputs"
    for stage in ("input", "p", "kernel"):
        assert 0 < fp8[f"{stage}_rel_rms"] < 0.2 and 0 < fp8[f"{stage}_max_abs"] < 1, stage
        assert f"{fp8[f'{stage}_rel_rms']:.3g}" in out
    assert fp8["kernel_rel_rms"] < 2.0**-8  # the fake kernel adds only its bf16 output rounding
    assert fp8["vs_unquantized_rel_rms"] > fp8["rel_rms"]  # quantizing q, k, v costs on top
    assert sdpa["kernel"] == "sdpa-cpu" and sdpa["input_rel_rms"] is None and sdpa["vs_unquantized_rel_rms"] is None


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_error_of_the_triton_kernels_in_the_interpreter(tmp_path):
    # A process of its own: TRITON_INTERPRET must be set before triton is first imported. Unpatched, the
    # interpreter multiplied bf16's raw bits (triton-bf16 printed rel. RMS 2.1e9) and could not run the
    # inline PTX of triton-fp8-exact (InterpreterError); the kernels correct it themselves
    # (kernels_under_test/_triton_interpreter.py), so their errors here are the kernels' own.
    path = tmp_path / "triton.json"
    args = ["error", "--device", "cpu", "--seq-len", "64", "--heads", "2", "--head-dim", "64", "-i", "gaussian:1",
            "-k", "triton-fp8-lean,triton-fp8-exact,triton-bf16", "--json", str(path)]
    env = {**os.environ, "TRITON_INTERPRET": "1", "COLUMNS": "200"}
    proc = forked_run([sys.executable, "-m", "harness", *args], env=env, timeout=300)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "0-dimensional" in out:
        pytest.skip("this triton's interpreter cannot take a loop bound from tl.program_id (fixed in triton 3.9)")
    assert proc.returncode == 0, out
    rows = {r["kernel"]: r for r in json.loads(path.read_text())}
    assert all(r["error"] is None for r in rows.values()), out
    for name, mode in (("triton-fp8-lean", "lean"), ("triton-fp8-exact", "exact")):
        row = rows[name]
        assert row["p_mode"] == mode
        assert all(math.isfinite(row[f"{s}_rel_rms"]) and row[f"{s}_rel_rms"] > 0 for s in ("input", "p", "kernel"))
        assert row["rel_rms"] < 0.0316  # within the gate's 30 dB
    assert rows["triton-fp8-exact"]["p_rel_rms"] < rows["triton-fp8-lean"]["p_rel_rms"]  # exact rounding vs the chord
    assert 0 < rows["triton-bf16"]["rel_rms"] < 0.01  # bf16 rounding, not the raw-bits product
    assert "input term" in out and "triton-fp8-exact" in out


def test_repro_of_a_deterministic_cpu_kernel(tmp_path):
    path = tmp_path / "repro.json"
    code, out = bench("repro", *SMALL, "-k", "sdpa-cpu", "--launches", "6", "--json", str(path))
    assert code == 0, out
    assert "reproducibility" in out and "not bitwise reproducible" not in out
    rows = json.loads(path.read_text())
    assert [(r["input"], r["interfere"]) for r in rows] == [
        ("gaussian:0.1", "none"), ("gaussian:0.1", "gemm"), ("gaussian:1", "none"), ("gaussian:1", "gemm"),
    ]
    for r in rows:
        assert r["launches"] == 6 and r["differing"] == 0 and r["first_differing"] is None
        assert r["max_abs_diff"] == 0.0 and r["reproducible"] is True and r["error"] is None


def test_repro_counts_differing_launches_and_fails_only_when_asked(tmp_path, plugin):
    args = ["repro", *SMALL, "-i", "gaussian:1", "-k", f"{plugin}:flaky", "--launches", "7", "--interfere", "none"]
    path = tmp_path / "flaky.json"
    code, out = bench(*args, "--json", str(path))
    assert code == 0, out
    (row,) = json.loads(path.read_text())
    # the closure's calls 3 and 6 are launches 2 and 5
    assert row["kernel"] == "flaky-every-3" and row["differing"] == 2 and row["first_differing"] == 2
    assert 0 < row["max_abs_diff"] < 1e-5 and row["reproducible"] is False
    assert "1 of 1 runs not bitwise reproducible" in out
    code, out = bench(*args, "--fail-on-diff")
    assert code == 1, out
    code, out = bench("repro", *SMALL, "-k", "sdpa-cpu", "--launches", "3", "--fail-on-diff")
    assert code == 0, out


def test_a_kernel_failing_on_one_input_does_not_stop_the_others(tmp_path, plugin):
    path = tmp_path / "error.json"
    code, out = bench("error", *SMALL, "-k", f"{plugin}:picky", "-k", "sdpa-cpu", "--json", str(path))
    assert code == 2
    assert "picky on gaussian:1: RuntimeError: picky refuses std 1" in out
    assert "1 kernel x input pair(s) failed" in out
    rows = {(r["kernel"], r["input"]): r for r in json.loads(path.read_text())}
    assert len(rows) == 4 and rows[("picky", "gaussian:1")]["rel_rms"] is None
    assert rows[("picky", "gaussian:1")]["error"] == "RuntimeError: picky refuses std 1"
    assert all(r["error"] is None and r["rel_rms"] < 1e-5 for key, r in rows.items() if key != ("picky", "gaussian:1"))
    code, out = bench("repro", *SMALL, "-k", f"{plugin}:picky", "-k", "sdpa-cpu", "--launches", "3")
    assert code == 2 and "picky on gaussian:1: RuntimeError: picky refuses std 1" in out and "2 run(s) failed" in out


def test_non_finite_inputs_fail_that_input_only():
    code, out = bench("error", *SMALL, "-k", "sdpa-cpu", "-i", "constant:inf", "-i", "gaussian:1")
    assert code == 2
    assert "sdpa-cpu on constant:inf: Input q from 'constant:inf' holds" in out and "NaN or Inf" in out
    assert "error vs fp64: gaussian:1" in out


def test_unknown_kernel():
    for command in ("error", "repro"):
        code, out = bench(command, *SMALL, "-k", "flash9")
        assert code == 2, out
        assert "No kernel named 'flash9'. Known kernels:" in out and "sdpa-cpu" in out


def test_unsupported_head_dim_is_refused_before_anything_runs():
    code, out = bench("error", *SMALL[:-2], "--dtype", "bf16", "-k", "sdpa-cpu", "-k", "triton-bf16")
    assert code == 2, out
    assert "Kernel 'triton-bf16' does not support head dims dqk=16, dv=16; it supports 64, 128, 192/128." in out
    assert "error vs fp64" not in out  # nothing ran, not even sdpa-cpu


def test_bad_repro_options():
    code, out = bench("repro", *SMALL, "-k", "sdpa-cpu", "--interfere", "fft")
    assert code == 2 and "Unknown --interfere 'fft'" in out and "gemm" in out
    code, out = bench("repro", *SMALL, "-k", "sdpa-cpu", "--launches", "1")
    assert code == 2 and "--launches" in out


def test_unwritable_json_fails_before_any_launch(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, out = bench("error", *SMALL, "-k", "sdpa-cpu", "--json", str(blocker / "sub" / "e.json"))
    assert code == 2 and "Cannot write" in out and "error vs fp64" not in out


# bench error --model: the model-level error (the run itself is tested in tests/capture/test_model_error.py and,
# with the real SmolLM2, tests/kernels/test_fp8_real_model.py)


@pytest.mark.parametrize("extra, names", [
    (["--control", "gaussian:1"], "--control"),
    (["--heads", "4"], "--heads"),
    (["--windows", "2"], "--windows"),
])
def test_error_model_refuses_options_of_captured_inputs(extra, names):
    code, out = bench("error", "--model", "smollm2-135m", "--device", "cpu", *extra)
    assert code == 2 and f"{names} do(es) not apply to `bench error --model`" in out and "--per-call" in out


def test_error_model_options_need_a_model():
    code, out = bench("error", "--device", "cpu", "--documents", "3", "--floor", "sdpa-cpu")
    assert code == 2 and "--documents, --floor belong(s) to the model-level error: add --model NAME" in out


def test_error_model_refuses_synthetic_inputs_and_an_unknown_floor():
    code, out = bench("error", "--model", "smollm2-135m", "--device", "cpu", "-i", "gaussian:1")
    assert code == 2 and "Drop --input" in out
    code, out = bench("error", "--model", "smollm2-135m", "--device", "cpu", "--floor", "no-such-kernel")
    assert code == 2 and "no-such-kernel" in out


def test_the_floor_is_a_second_bf16_kernel_by_device():
    from harness.suite import model_error_kernels

    assert model_error_kernels([], device="cuda:0") == (("sdpa-flash",), "sdpa-cudnn")
    assert model_error_kernels(["sdpa-cudnn", "triton-fp8-lean"], device="cuda:0") == (
        ("sdpa-cudnn", "triton-fp8-lean"), "sdpa-flash")
    assert model_error_kernels(["triton-bf16"], device="cpu") == (("triton-bf16",), "sdpa-cpu")
    assert model_error_kernels(["sdpa-cpu"], device="cpu") == (("sdpa-cpu",), "reference-fp64")
    assert model_error_kernels(["x:y"], device="cpu", floor="triton-bf16") == (("x:y",), "triton-bf16")


def test_model_error_defaults_by_device():
    from harness.suite import CaptureArgs, ShapeArgs, model_error_config

    def cfg(device, **kw):
        return model_error_config(model="smollm2-135m", device=device, shape=ShapeArgs(**kw.pop("shape", {})),
                                  capture=CaptureArgs(model="smollm2-135m", **kw), documents=None, all_layers=True,
                                  results="r", name=None, command="c")

    gpu, cpu = cfg("cuda:0"), cfg("cpu")
    assert (gpu.seq_len, gpu.documents, gpu.batch, gpu.layers, gpu.dtype) == (1024, 24, 8, tuple(range(30)), "bfloat16")
    assert (cpu.seq_len, cpu.documents, cpu.batch, cpu.layers, cpu.dtype) == (128, 4, 4, (3, 15), "float32")
    assert cfg("cpu", layers=(7,), shape={"seq_len": 64}).layers == (7,) and cfg("cpu", shape={"seq_len": 64}).seq_len == 64
    assert cfg("cuda:0", shape={"seq_len": 99999}).seq_len == 8192  # the model's positions
    # a pass stacks at most 8192 tokens on a GPU (memory; rows are written per pass), and at least one document
    assert [cfg("cuda:0", shape={"seq_len": s}).batch for s in (512, 2048, 8192, 99999)] == [16, 4, 1, 1]
    assert cfg("cpu", shape={"seq_len": 64}).batch == 4  # never more documents than there are
