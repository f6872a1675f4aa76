"""The model-level error (`harness.capture.model_error`) on tiny models of the registry's architectures, on the
CPU: the attention hook, the per-layer runs that start at their layer, the stored run, what is refused. The
real SmolLM2 runs in tests/kernels/test_fp8_real_model.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from harness.capture import MODELS, SUFFIX_MODEL_TYPES, ModelErrorConfig, miniature, model_error
from harness.errors import CaptureError, ConfigError, UnsupportedInputError
from harness.kernels import Kernel, default_registry, reference_attention
from harness.results import read_rows

REG = default_registry()


def _config(model, text_file, tmp_path, **kw):
    base = dict(model=str(model), text=str(text_file), seq_len=48, documents=3, batch=2, layers=(0, 2),
                device="cpu", results_root=tmp_path / "results", command="test")
    return ModelErrorConfig(**{**base, **kw})


@pytest.mark.parametrize("kind", ["llama", "qwen3", "deepseek_v2"])
def test_a_run_from_a_layers_recorded_input_is_the_full_forward_bit_for_bit(model_dirs, kind):
    # What makes the per-layer sweep cheap must not change what it measures.
    from harness.capture._hook import register_attention
    from harness.capture._model_error import _Attention, _logits, _recorder
    from harness.capture._model_io import load_model
    from harness.capture._weights import ResolvedWeights

    weights = ResolvedWeights(folder=model_dirs[kind], gguf_file=None, origin="--model path")
    model = load_model(weights, dtype="float32", device="cpu")
    assert model.config.model_type in SUFFIX_MODEL_TYPES
    attention = _Attention(kind)
    register_attention(attention)
    try:
        decoder = model.base_model
        ids = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(0))
        seen: dict = {}
        hooks = [layer.register_forward_pre_hook(_recorder(seen, i)) for i, layer in enumerate(decoder.layers)]
        full = _logits(model, decoder, attention, ids=ids)
        for h in hooks:
            h.remove()
        assert sorted(seen) == list(range(len(decoder.layers))) and attention.calls == len(decoder.layers)
        for layer in range(len(decoder.layers)):
            assert torch.equal(_logits(model, decoder, attention, start=layer, hidden=seen[layer]), full)
        assert len(decoder.layers) == model.config.num_hidden_layers  # put back after each suffix run
        # The hook computes fp64 attention on what the model hands over, cast back to its dtype.
        assert attention.calls == len(decoder.layers) * (1 + (1 + len(decoder.layers)) / 2)
    finally:
        register_attention()


def test_rows_per_kernel_scope_and_document_and_the_run_row(model_dirs, text_file, tmp_path):
    result = model_error(_config(model_dirs["llama"], text_file, tmp_path), kernels=[REG.get("sdpa-cpu")],
                         floor=REG.get("reference-fp64"))
    rows = read_rows(result.path, "model_error")
    assert len(rows) == len(result.rows) == 2 * 3 * 3  # kernels x (every layer, layer 0, layer 2) x documents
    assert {(r["kernel"], r["role"]) for r in rows} == {("sdpa-cpu", "kernel"), ("reference-fp64", "floor")}
    assert {(r["scope"], r["layer"]) for r in rows} == {("all", None), ("layer", 0), ("layer", 2)}
    for r in rows:
        assert r["tokens"] == 48 == len(r["kl_nats"]) == len(r["top1_match"]) and r["kernel_dtype"] == "bfloat16"
        assert min(r["kl_nats"]) >= 0 and r["kl_mean_nats"] == pytest.approx(sum(r["kl_nats"]) / 48)
        assert r["top1_agreement"] == pytest.approx(sum(r["top1_match"]) / 48)
    # one text file is one document: its windows are consecutive parts of it
    assert [r["document_index"] for r in rows if r["scope"] == "all" and r["role"] == "floor"] == [0, 0, 0]
    info = read_rows(result.path, "runs")[0]
    cfg = json.loads(info["config_json"])
    assert info["status"] == "complete" and cfg["kind"] == "model_error" and cfg["head_dim_qk"] == 16
    assert cfg["provenance"]["text"]["unit"] == "consecutive windows of one text" and cfg["provenance"]["suffix_runs"]
    assert json.loads(info["kernel_sources_json"])["sdpa-cpu"]["source"] == "kernels_under_test.sdpa:sdpa_cpu"


def _broken(name="zeros"):
    def prepare(x):
        return lambda: torch.zeros_like(x.q[..., : x.v.shape[-1]])

    return Kernel(name=name, prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  source="tests.capture.test_model_error:_broken")


def test_a_broken_attention_is_far_above_the_floor(model_dirs, text_file, tmp_path):
    from harness.analysis import model_error_summary

    result = model_error(_config(model_dirs["llama"], text_file, tmp_path, layers=(1,)), kernels=[_broken()],
                         floor=REG.get("sdpa-cpu"))
    figures = {(f["kernel"], f["scope"]): f for f in model_error_summary(result.rows, resamples=200)}
    floor, bad = figures[("sdpa-cpu", "all")], figures[("zeros", "all")]
    assert bad["kl_vs_floor_lo"] > 100 and bad["top1_agreement"] < floor["top1_agreement"]
    assert figures[("zeros", "layer")]["kl_mean_nats"] < bad["kl_mean_nats"]


def test_d128_attention_with_random_weights_is_labelled(text_file, tmp_path):
    # No d=128 model weights exist here: the d=128 code path runs on a miniature with 128-dim heads.
    base = miniature(MODELS["llama-3.1-8b"])
    arch = {**base.architecture, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128}
    spec = dataclasses.replace(base, architecture=arch, heads_q=2, heads_kv=1, head_dim_qk=128, head_dim_v=128)
    cfg = ModelErrorConfig(model=spec, text=str(text_file), seq_len=32, documents=2, batch=2, layers=(1,),
                           device="cpu", random_weights=True, results_root=tmp_path / "results", command="test")
    seen = []

    def prepare(x):
        seen.append(x.shape.label())
        return REG.get("sdpa-cpu").prepare(x)

    spy = dataclasses.replace(REG.get("sdpa-cpu"), name="sdpa-spy", prepare=prepare)
    result = model_error(cfg, kernels=[spy], floor=REG.get("reference-fp64"))
    assert set(seen) == {"B2 H2/1 S32 d128 causal"}
    info = read_rows(result.path, "runs")[0]
    assert "RANDOM WEIGHTS" in info["notes"] and json.loads(info["config_json"])["random_weights"] is True
    assert json.loads(info["config_json"])["provenance"]["text"]["tokenizer"].startswith("none (random weights)")


def test_what_is_refused_before_the_model_loads(model_dirs, text_file, tmp_path):
    llama = model_dirs["llama"]
    with pytest.raises(UnsupportedInputError, match="head dims dqk=16"):
        model_error(_config(llama, text_file, tmp_path), kernels=[REG.get("triton-bf16")], floor=REG.get("sdpa-cpu"))
    with pytest.raises(ConfigError, match="--layer 7: .* has layers 0 to 2"):
        model_error(_config(llama, text_file, tmp_path, layers=(7,)), kernels=[], floor=REG.get("sdpa-cpu"))
    with pytest.raises(ConfigError, match="at least 2"):
        _config(llama, text_file, tmp_path, documents=1)
    with pytest.raises(CaptureError, match="--documents 500 asks for 500"):
        model_error(_config(llama, text_file, tmp_path, documents=500), kernels=[], floor=REG.get("sdpa-cpu"))
    assert not any((tmp_path / "results").glob("*/model_error"))  # nothing measured, no rows


def test_a_kernel_that_fails_is_its_row_and_the_others_are_measured(model_dirs, text_file, tmp_path):
    """Issue 41: a kernel that raises, calls sys.exit or returns a wrong shape inside the model's forward ended the
    whole run on main (a traceback, exit 3 from the CLI). Now each is that kernel's failure, named, and the floor
    is measured; the run is complete and says which kernels failed."""
    import sys

    def raising(x):
        raise RuntimeError("kernel exploded")

    def exiting(x):
        return lambda: sys.exit(3)

    def short(x):
        return lambda: x.q[:, :, :1]

    kernels = [Kernel(name=n, prepare=p, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}))
               for n, p in (("boom", raising), ("exits", exiting), ("short", short))]
    result = model_error(_config(model_dirs["llama"], text_file, tmp_path, layers=(1,)), kernels=kernels,
                         floor=REG.get("sdpa-cpu"))
    assert set(result.failures) == {"boom", "exits", "short"}
    assert "Kernel 'boom' (attention replaced in every layer) failed in layer 0 of" in result.failures["boom"]
    assert "it raised RuntimeError: kernel exploded (at test_model_error.py:" in result.failures["boom"]
    assert "it called sys.exit(3)" in result.failures["exits"]
    assert "it returned shape [2, 4, 1, 16]; the attention output of B2 H4/2 S48 d16 causal is [2, 4, 48, 16]" \
        in result.failures["short"]
    assert {r["kernel"] for r in result.rows} == {"sdpa-cpu"} and len(result.rows) == 2 * 3
    (run,) = (tmp_path / "results").iterdir()
    info = read_rows(run, "runs")[0]
    assert info["status"] == "complete" and info["status_detail"] == "3 kernel(s) failed: boom, exits, short"
    assert json.loads(info["config_json"])["provenance"]["failures"] == result.failures


def test_when_every_kernel_fails_the_run_is_failed(model_dirs, text_file, tmp_path):
    def raising(x):
        raise RuntimeError("kernel exploded")

    boom = Kernel(name="boom", prepare=raising, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}))
    result = model_error(_config(model_dirs["llama"], text_file, tmp_path, layers=(1,)), kernels=[], floor=boom)
    info = read_rows(result.path, "runs")[0]
    assert info["status"] == "failed" and info["status_detail"].startswith("nothing measured: every kernel failed")


def test_the_cli_reports_a_kernels_failure_as_its_row_and_a_user_error(model_dirs, text_file, tmp_path):
    """`bench error --model` with a plain SDPA function that takes no enable_gqa, on a model with fewer KV heads:
    exit 2 with the kernel's row and the way out, as the per-call `bench error` does (main: exit 3, internal)."""
    from typer.testing import CliRunner

    from harness.cli import app

    res = CliRunner().invoke(app, ["error", "--model", str(model_dirs["llama"]), "--text", str(text_file),
                                   "--device", "cpu", "--seq-len", "48", "--documents", "2", "--layer", "1",
                                   "-k", "tests.capture.model_error_kernels:no_gqa", "--results",
                                   str(tmp_path / "r")], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "failed (see below)" in res.output and "1 kernel(s) failed" in res.output
    assert "it raised RuntimeError: The size of tensor a (4) must match the size of tensor b (2)" in res.output
    assert "4 query heads and 2 KV heads" in " ".join(res.output.split())
    assert not list((tmp_path / "r").glob("bench-internal-error-*"))


def test_the_reference_is_fp64_attention_in_every_layer(model_dirs):
    from harness.capture._model_error import _Attention

    att = _Attention("tiny")
    q, k, v = (torch.randn(1, h, 8, 16) for h in (4, 2, 2))
    module = type("M", (), {"layer_idx": 0})()
    out, _ = att(module, q, k, v, None, scaling=0.25)
    want = reference_attention(q, k, v, scale=0.25, causal=True).to(torch.float32).transpose(1, 2)
    assert torch.equal(out, want)
    with pytest.raises(CaptureError, match="explicit mask"):
        att(module, q, k, v, torch.ones(1))


def test_a_stop_keeps_the_finished_documents_and_says_so(model_dirs, text_file, tmp_path):
    from harness.errors import RunStopped

    calls = {"n": 0}

    def prepare(x):
        calls["n"] += 1
        if calls["n"] > 4:  # past the first batch of documents: 3 layers of the every-layer scope, then layer 1
            raise RunStopped(15)
        return REG.get("sdpa-cpu").prepare(x)

    stopper = dataclasses.replace(REG.get("sdpa-cpu"), name="stopper", prepare=prepare)
    cfg = _config(model_dirs["llama"], text_file, tmp_path, documents=4, batch=2, layers=(1,))
    with pytest.raises(RunStopped):
        model_error(cfg, kernels=[], floor=stopper)
    (run,) = (tmp_path / "results").iterdir()
    info = read_rows(run, "runs")[0]
    assert info["status"] == "incomplete" and "stopped by SIGTERM" in info["status_detail"]
    rows = read_rows(run, "model_error")
    assert {r["document"] for r in rows} == {0, 1} and f"the {len(rows)} rows" in info["status_detail"]
