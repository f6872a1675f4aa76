"""The manifest of a capture directory: what made the files (model, weights, text, forward pass, harness)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path

from harness.capture._config import CaptureConfig
from harness.capture._format import FORMAT, FORMAT_VERSION, STORED_DTYPE, layer_file, read_manifest
from harness.capture._hook import LayerRecord
from harness.capture._models import ModelSpec
from harness.capture._provenance import harness_provenance, software_versions
from harness.capture._weights import ResolvedWeights
from harness.errors import CaptureError

__all__ = ["RANDOM_WARNING", "random_weights_identity", "start_manifest"]

RANDOM_WARNING = ("random weights: these activations mean nothing about any trained model; they check the "
                  "architecture, the hook and the memory, and are refused as timing inputs unless explicitly allowed")


def random_weights_identity(spec: ModelSpec, config: CaptureConfig, device: str) -> ResolvedWeights:
    config_sha = hashlib.sha256(json.dumps(spec.architecture, sort_keys=True).encode()).hexdigest()
    return ResolvedWeights(
        folder=Path("."), gguf_file=None, origin="random",
        identity={"seed": config.seed, "init": "transformers' own initialisation (normal, std initializer_range), "
                  f"torch.manual_seed({config.seed}) on {device}", "architecture_sha256": config_sha,
                  "architecture": spec.architecture},
    )


def _identity(manifest: dict) -> tuple:
    model = manifest.get("model", {})
    # The forward pass's device and dtype are not part of it: a layer captured in bf16 on the GPU joins one
    # captured in fp32 on the CPU from the same weights and text; each layer entry records its own.
    return (model.get("name"), repr(model.get("weights", {}).get("identity")), manifest.get("text", {}).get("sha256"),
            manifest.get("seq_len"), manifest.get("batch"))


def start_manifest(directory: Path, spec: ModelSpec, weights: ResolvedWeights, config: CaptureConfig,
                    text_provenance: dict, records: dict[int, LayerRecord], compute: dict) -> dict:
    first = next(iter(records.values()))
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "random_weights": config.random_weights,
        **({"warning": RANDOM_WARNING} if config.random_weights else {}),
        "model": {
            "name": spec.name,
            "argument": config.model if isinstance(config.model, str) else spec.name,
            "hf_id": spec.hf_id,
            "attention_kind": spec.attention_kind,
            "heads_q": spec.heads_q,
            "heads_kv": spec.heads_kv,
            "head_dim_qk": spec.head_dim_qk,
            "head_dim_v": spec.head_dim_v,
            "num_layers": spec.num_layers,
            "max_positions": spec.max_positions,
            "qk_norm": spec.qk_norm or first.qk_norm,
            "weights": {"origin": weights.origin, "where": weights.where, "identity": weights.identity},
        },
        "rope": {
            "theta": spec.rope_theta,
            "scaling": spec.rope_scaling,
            "rotated_dims": spec.rope_head_dim or spec.head_dim_qk,
            "positions": f"0..{config.seq_len - 1} in every batch row",
            "captured": "after RoPE" + (" and QK-norm" if spec.qk_norm or first.qk_norm else ""),
        },
        "text": text_provenance,
        "seq_len": config.seq_len,
        "batch": config.batch,
        "stacking": {
            "windows": config.batch,
            "along": "batch",
            "rows": "batch row b holds text window b: special_prefix + the text tokens token_ranges[b]",
        },
        "compute": compute,
        "stored_dtype": STORED_DTYPE,
        "harness": harness_provenance(),
        "software": software_versions(),
        "layers": {},
    }
    try:
        old = read_manifest(directory)
    except CaptureError:
        return manifest
    if _identity(old) == _identity(manifest):
        # Same model, weights, text and length: add to the layers already captured here.
        manifest["layers"] = {k: v for k, v in old["layers"].items() if int(k) not in records}
    else:
        # Another capture under the same name (new weights, another Python's pydoc text): its layer files
        # no longer match what the manifest will describe, so they go.
        for key, entry in old["layers"].items():
            if int(key) not in records:
                (directory / entry.get("file", layer_file(int(key)))).unlink(missing_ok=True)
    return manifest
