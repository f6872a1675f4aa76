"""Synthetic controls shaped like a capture: same shapes, dtype and softmax scale, other values."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import replace
from pathlib import Path

from harness.capture._format import FORMAT, FORMAT_VERSION, STORED_DTYPE, read_manifest, write_layer, write_manifest
from harness.capture._load import _entry, _shape
from harness.capture._recompute import recompute
from harness.errors import CaptureError, InputError
from harness.inputs import SYNTHETIC_SOURCES, AttentionInputs, InputSpec, make_inputs, synthesize, torch_dtype

__all__ = ["CONTROL_DISTS", "synthesize_like", "save_like"]

# A control is any synthetic source, or Gaussian noise with each tensor's own std (made here: it needs the capture).
CONTROL_DISTS = {**SYNTHETIC_SOURCES, "gaussian:matched": "normal, each of q, k, v with the std of the capture's tensor"}


def synthesize_like(capture_path: str | Path, dist: str = "gaussian:0.1", seed: int = 0, *, device="cpu"):
    """AttentionInputs with the capture's shapes, dtype and scale, drawn from `dist` (see CONTROL_DISTS).

    Apart from `gaussian:matched`, the values equal make_inputs(InputSpec(shape, source=dist, seed)).
    """
    path = Path(capture_path)
    manifest, entry, layer = _entry(path)
    shape = _shape(manifest, entry)
    dtype = entry.get("dtype", STORED_DTYPE)
    provenance = {"like": str(path), "like_sha256": entry["sha256"], "like_layer": layer, "dist": dist}
    if dist == "gaussian:matched":
        import torch

        stats = entry.get("stats") or {}
        stds = {n: stats.get(f"{n}_std") for n in ("q", "k", "v")}
        if None in stds.values():
            raise InputError(f"{path}: its manifest has no q/k/v std statistics, so gaussian:matched cannot match them.")
        g = torch.Generator().manual_seed(seed)
        shapes = {"q": shape.q_shape(), "k": shape.k_shape(), "v": shape.v_shape()}
        tensors = {
            n: synthesize(f"gaussian:{stds[n]!r}", shapes[n], dtype=torch_dtype(dtype), device=device, generator=g)
            for n in ("q", "k", "v")
        }
        inputs = AttentionInputs(**tensors, shape=shape, dtype=dtype, source=dist, scale=float(entry["scale"]), seed=seed)
        provenance["matched_std"] = stds
    else:
        if dist.partition(":")[0] not in {k.partition(":")[0] for k in SYNTHETIC_SOURCES}:
            known = "; ".join(f"{k}: {v}" for k, v in CONTROL_DISTS.items())
            raise InputError(f"Unknown control distribution {dist!r}. Use one of: {known}.")
        spec = InputSpec(shape=shape, dtype=dtype, source=dist, seed=seed, scale=float(entry["scale"]))
        inputs = make_inputs(spec, device=device)
    return replace(inputs, provenance=provenance)


def _slug(dist: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", dist).strip("-")


def save_like(capture_path: str | Path, *, dist: str = "gaussian:0.1", seed: int = 0) -> Path:
    """Write a control beside the capture (captures/<model>/<dir>.<dist>.seed<N>/layerNN.safetensors) with
    its own manifest and statistics, so it loads, lists and times like a capture. Returns its path."""
    path = Path(capture_path)
    manifest, entry, layer = _entry(path)
    inputs = synthesize_like(path, dist, seed)
    directory = path.parent.parent / f"{path.parent.name}.{_slug(dist)}.seed{seed}"
    _, stats = recompute(inputs.q.float(), inputs.k.float(), inputs.v.float(), scale=inputs.scale,
                         causal=inputs.shape.causal)
    try:
        out = read_manifest(directory)
    except CaptureError:
        out = None
    if out is None or out.get("kind") != "synthetic" or (out.get("dist"), out.get("seed")) != (dist, seed):
        out = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": "synthetic",
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "like": {"directory": str(path.parent)},
            "dist": dist,
            "seed": seed,
            "model": manifest.get("model"),
            "text": {"name": f"{dist} seed {seed}", "like": manifest.get("text", {}).get("name")},
            "seq_len": manifest.get("seq_len"),
            "batch": manifest.get("batch"),
            "stored_dtype": STORED_DTYPE,
            "layers": {},
        }
    meta = {"format": FORMAT, "kind": "synthetic", "dist": dist, "seed": str(seed), "layer": str(layer)}
    written = write_layer(directory, layer, {"q": inputs.q, "k": inputs.k, "v": inputs.v}, metadata=meta)
    out["layers"][str(layer)] = {
        **written, "layer": layer, "scale": inputs.scale, "causal": inputs.shape.causal,
        "like_sha256": entry["sha256"], "self_check": None, "stats": stats.as_dict(),
    }
    write_manifest(directory, out)
    return directory / written["file"]

