"""Random-weight captures of the registered architectures: the full-size path on miniatures, labelled in the
manifest, and refused as timing inputs unless allowed."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.capture import (
    MODELS,
    CaptureConfig,
    capture,
    capture_spec,
    list_captures,
    load_capture,
    miniature,
    model_input_specs,
)
from harness.errors import ConfigError, InputError
from harness.inputs import make_inputs

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

FULL_SIZE = ("mistral-7b", "qwen3-8b", "deepseek-v2-lite")


@pytest.fixture(scope="module")
def random_captures(tmp_path_factory, text_file_module):
    root = tmp_path_factory.mktemp("random")
    return root, {name: capture(CaptureConfig(model=miniature(MODELS[name]), layers=(0, 2), seq_len=48,
                                              text=str(text_file_module), root=root, random_weights=True, seed=3))
                  for name in FULL_SIZE}


@pytest.fixture(scope="module")
def text_file_module(tmp_path_factory):
    from capture_tiny import TEXT

    path = tmp_path_factory.mktemp("text") / "prose.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_miniatures_keep_the_architecture():
    from harness.capture._models import architecture_config

    for name in FULL_SIZE:
        full, mini = architecture_config(MODELS[name]), architecture_config(miniature(MODELS[name]))
        assert type(full) is type(mini) and full.model_type == mini.model_type
        assert _rope(full) == _rope(mini), "the RoPE scaling (which sets DeepSeek's softmax scale) is kept"
    mla = miniature(MODELS["deepseek-v2-lite"])
    assert (mla.attention_kind, mla.heads_q, mla.heads_kv, mla.head_dim_qk, mla.head_dim_v) == ("mla", 4, 4, 24, 16)
    assert miniature(MODELS["qwen3-8b"]).qk_norm and miniature(MODELS["mistral-7b"]).heads_kv == 1


def _rope(config):
    return {k: v for k, v in dict(getattr(config, "rope_parameters", None) or {}).items()}


@pytest.mark.parametrize("name", FULL_SIZE)
def test_random_capture_passes_the_self_check_and_says_random(random_captures, name):
    root, results = random_captures
    result = results[name]
    assert result.random_weights and result.weights_origin == "random"
    assert result.directory.parent.name == f"{name}-mini-random-seed3"
    manifest = json.loads(result.manifest.read_text())
    assert manifest["random_weights"] is True and "mean nothing" in manifest["warning"]
    identity = manifest["model"]["weights"]["identity"]
    assert identity["seed"] == 3 and identity["architecture"]["model_type"] == MODELS[name].architecture["model_type"]
    assert manifest["text"]["tokenizer"].startswith("none (random weights)")
    spec = miniature(MODELS[name])
    for layer in result.layers:
        assert layer.self_check_max_abs_diff <= layer.tolerance
        assert layer.shapes["q"] == [1, spec.heads_q, 48, spec.head_dim_qk]
        assert layer.shapes["v"] == [1, spec.heads_kv, 48, spec.head_dim_v]


def test_mla_capture_is_post_rope_with_the_yarn_scale(random_captures):
    """The hook sees MLA's q and k after RoPE, concatenated nope|rope (dqk 24) with dv 16, and the softmax
    scale carries yarn's mscale: (0.1 * 0.707 * ln 40 + 1)^2 / sqrt(24)."""
    import math

    _, results = random_captures
    layer = results["deepseek-v2-lite"].layers[0]
    assert layer.scale == pytest.approx((0.1 * 0.707 * math.log(40) + 1) ** 2 / math.sqrt(24), rel=1e-6)
    x = load_capture(layer.path)
    # RoPE rotates only the last 8 dims of k, and k's rope part is shared by all heads (MQA-style).
    k = x.k.float()
    assert torch.equal(k[0, 0, :, 16:], k[0, 3, :, 16:]) and not torch.equal(k[0, 0, :, :16], k[0, 3, :, :16])


def test_same_seed_same_capture(random_captures, text_file_module, tmp_path):
    _, results = random_captures
    again = capture(CaptureConfig(model=miniature(MODELS["mistral-7b"]), layers=(0,), seq_len=48,
                                  text=str(text_file_module), root=tmp_path, random_weights=True, seed=3))
    assert torch.equal(load_capture(again.layers[0].path).q, load_capture(results["mistral-7b"].layers[0].path).q)


def test_random_capture_is_refused_as_a_timing_input(random_captures):
    _, results = random_captures
    path = results["qwen3-8b"].layers[1].path
    with pytest.raises(InputError) as err:
        capture_spec(path)
    assert "random weights" in str(err.value) and "--allow-random-weights" in str(err.value)
    allowed = capture_spec(path, allow_random_weights=True)
    assert allowed.source.endswith("?random-weights=allowed")
    x = make_inputs(allowed, device="cpu")
    assert torch.equal(x.q, load_capture(path).q)
    plain = dataclasses.replace(allowed, source=f"capture:{path}")  # a spec that lost the permission
    with pytest.raises(InputError, match="refused as a timing input"):
        make_inputs(plain, device="cpu")


def test_model_input_specs_refuse_random_unless_allowed(random_captures, text_file_module):
    root, _ = random_captures
    common = dict(layers=(2,), seq_len=48, text=str(text_file_module), root=root, random_weights=True, seed=3,
                  controls=("gaussian:0.1",))
    model = miniature(MODELS["mistral-7b"])
    with pytest.raises(InputError, match="random weights"):
        model_input_specs(model, **common)
    specs = model_input_specs(model, allow_random_weights=True, **common)
    assert [s.label for s in specs] == ["L02:captured", "L02:gaussian:0.1"]


def test_listing_marks_random_weights(random_captures):
    root, _ = random_captures
    infos = list_captures(root, verify=True)
    assert infos and all(i.random_weights and i.status == "ok" for i in infos)


def test_random_weights_and_weights_exclude_each_other(tmp_path):
    with pytest.raises(ConfigError, match="drop --weights"):
        CaptureConfig(model="mistral-7b", random_weights=True, weights=tmp_path)
