"""Reading captures back: as AttentionInputs, as an InputSpec source, and as a listing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.capture._format import MANIFEST, layer_entry, read_layer, read_manifest
from harness.errors import CaptureError, InputError
from harness.inputs import AttentionInputs, AttentionShape, InputSpec, torch_dtype

__all__ = ["CaptureInfo", "load_capture", "capture_shape", "capture_spec", "list_captures", "source_loader"]

_FP8 = {"fp8", "e4m3", "float8_e4m3fn"}
LOADER = "harness.capture:source_loader"  # what a capture's InputSpec names as its loader


@dataclass(frozen=True, kw_only=True)
class CaptureInfo:
    """One layer file of a capture, as listed from its manifest (no tensor is read)."""

    path: Path
    kind: str  # "capture" or "synthetic"
    model: str
    text: str
    layer: int
    seq_len: int
    batch: int
    shape: AttentionShape
    scale: float
    self_check_max_abs_diff: float | None
    bytes: int


def _shape(manifest: dict, entry: dict) -> AttentionShape:
    q, v = entry["shapes"]["q"], entry["shapes"]["v"]
    return AttentionShape(
        batch=q[0], heads_q=q[1], heads_kv=entry["shapes"]["k"][1], seq_len=q[2], head_dim_qk=q[3],
        head_dim_v=v[3], causal=bool(entry.get("causal", True)),
    )


def _entry(path: Path) -> tuple[dict, dict, int]:
    path = Path(path)
    manifest = read_manifest(path.parent)
    layer, entry = layer_entry(manifest, path.name, where=path.parent)
    return manifest, entry, layer


def capture_shape(path: str | Path) -> AttentionShape:
    """The attention shape of a capture file, from its manifest."""
    manifest, entry, _ = _entry(Path(path))
    return _shape(manifest, entry)


def capture_spec(path: str | Path, *, dtype: str = "bfloat16", seed: int = 0) -> InputSpec:
    """An InputSpec that loads this capture (shape and softmax scale from its manifest)."""
    manifest, entry, _ = _entry(Path(path))
    return InputSpec(shape=_shape(manifest, entry), dtype=dtype, source=f"capture:{path}", seed=seed,
                     scale=float(entry["scale"]), loader=LOADER)


def _provenance(manifest: dict, entry: dict, layer: int, path: Path) -> dict:
    keep = ("model", "rope", "text", "seq_len", "batch", "compute", "harness", "kind", "like", "dist", "seed")
    return {
        "capture": str(path),
        "layer": layer,
        "sha256": entry["sha256"],
        "self_check": entry.get("self_check"),
        "stats": entry.get("stats"),
        **{k: manifest[k] for k in keep if k in manifest},
    }


def load_capture(path: str | Path, *, device="cpu") -> AttentionInputs:
    """q, k, v of one capture file (bf16, as stored), checked against the manifest (sha256, shapes).

    >>> x = load_capture("captures/smollm2-135m/pydoc-S2048/layer03.safetensors")  # doctest: +SKIP
    >>> x.shape.label()  # doctest: +SKIP
    'B1 H9/3 S2048 d64 causal'
    """
    path = Path(path)
    tensors, manifest, entry, layer = read_layer(path, verify=True)
    return AttentionInputs(
        q=tensors["q"].to(device), k=tensors["k"].to(device), v=tensors["v"].to(device),
        shape=_shape(manifest, entry), dtype=entry.get("dtype", "bfloat16"), source=f"capture:{path}",
        scale=float(entry["scale"]), seed=manifest.get("seed"), provenance=_provenance(manifest, entry, layer, path),
    )


def source_loader(spec: InputSpec, device) -> AttentionInputs:
    """The loader a capture's InputSpec names (`LOADER`): reads `capture:PATH` on `device`."""
    from dataclasses import replace

    from harness.capture._fp8 import quantize_inputs_e4m3

    path = spec.source.partition(":")[2]
    if not path:
        raise InputError("Input source 'capture:' needs a path: capture:captures/MODEL/TEXT-S<seq>/layerNN.safetensors.")
    inputs = load_capture(path, device=device)
    if spec.shape != inputs.shape:
        raise InputError(
            f"The spec for {spec.source} says shape {spec.shape.label()}, but the capture holds "
            f"{inputs.shape.label()}. Build the spec with harness.capture.capture_spec(path), which reads the "
            f"shape from the manifest."
        )
    if spec.scale is not None:
        inputs = replace(inputs, scale=spec.scale)
    if spec.dtype in _FP8:
        return quantize_inputs_e4m3(inputs)
    dtype = torch_dtype(spec.dtype)
    if dtype != inputs.q.dtype:
        cast = {n: getattr(inputs, n).to(dtype) for n in ("q", "k", "v")}
        inputs = replace(inputs, **cast, dtype=spec.dtype)
    return inputs


def list_captures(root: str | Path = "captures") -> list[CaptureInfo]:
    """Every layer file listed by a manifest under `root` (captures/<model>/<dir>/manifest.json)."""
    root = Path(root)
    found = []
    for manifest_path in sorted(root.glob(f"*/*/{MANIFEST}")):
        try:
            manifest = read_manifest(manifest_path.parent)
        except CaptureError:
            continue  # a damaged directory is reported when it is loaded, not when listing
        for key, entry in sorted(manifest["layers"].items(), key=lambda kv: int(kv[0])):
            check = entry.get("self_check") or {}
            found.append(CaptureInfo(
                path=manifest_path.parent / entry["file"],
                kind=manifest.get("kind", "capture"),
                model=manifest.get("model", {}).get("name", manifest_path.parent.parent.name),
                text=manifest.get("text", {}).get("name", "?"),
                layer=int(key),
                seq_len=int(manifest.get("seq_len", entry["shapes"]["q"][2])),
                batch=int(manifest.get("batch", entry["shapes"]["q"][0])),
                shape=_shape(manifest, entry),
                scale=float(entry["scale"]),
                self_check_max_abs_diff=check.get("max_abs_diff"),
                bytes=int(entry.get("bytes", 0)),
            ))
    return found
