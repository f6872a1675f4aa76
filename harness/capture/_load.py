"""Reading captures back: as AttentionInputs, as an InputSpec source, and as a listing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.capture._format import MANIFEST, layer_entry, read_layer, read_manifest, verify_layer
from harness.capture._fp8 import quantize_inputs_e4m3
from harness.errors import CaptureError, ConfigError, InputError
from harness.inputs import AttentionInputs, AttentionShape, InputSpec, paged_cache, torch_dtype

__all__ = ["CaptureInfo", "load_capture", "capture_shape", "capture_spec", "list_captures", "source_loader",
           "format_listing", "ALLOW_RANDOM"]

_FP8 = {"fp8", "e4m3", "float8_e4m3fn"}
LOADER = "harness.capture:source_loader"  # what a capture's InputSpec names as its loader
# Appended to a `capture:PATH` source to let a random-weight capture be timed: the permission then travels
# with the spec into the run's recorded config, where a reader sees it.
ALLOW_RANDOM = "?random-weights=allowed"


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
    random_weights: bool = False
    device: str | None = None  # of the forward pass that made it
    dtype: str | None = None
    status: str = "not verified"  # "ok", or why the file does not match its manifest


def _shape(manifest: dict, entry: dict) -> AttentionShape:
    q, v = entry["shapes"]["q"], entry["shapes"]["v"]
    return AttentionShape(
        batch=q[0], heads_q=q[1], heads_kv=entry["shapes"]["k"][1], seq_len=q[2], seq_len_kv=v[2], head_dim_qk=q[3],
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


def _is_random(manifest: dict) -> bool:
    if manifest.get("kind") == "synthetic":
        return False
    return bool(manifest.get("random_weights")) or manifest.get("model", {}).get("weights", {}).get("origin") == "random"


def _refuse_random(path: Path, manifest: dict) -> None:
    raise InputError(
        f"{path} was captured from a model with random weights ({manifest.get('model', {}).get('name')}, no "
        f"trained weights): its activations mean nothing about real attention, so it is refused as a timing "
        f"input. It checks the architecture and the hook only. Capture the model with its weights, or pass "
        f"--allow-random-weights to time it anyway (recorded with the run)."
    )


def capture_spec(path: str | Path, *, dtype: str = "bfloat16", seed: int = 0,
                 allow_random_weights: bool = False) -> InputSpec:
    """An InputSpec that loads this capture (shape and softmax scale from its manifest).

    A capture of random weights is refused unless `allow_random_weights`.
    """
    manifest, entry, _ = _entry(Path(path))
    source = f"capture:{path}"
    if _is_random(manifest):
        if not allow_random_weights:
            _refuse_random(Path(path), manifest)
        source += ALLOW_RANDOM
    return InputSpec(shape=_shape(manifest, entry), dtype=dtype, source=source, seed=seed,
                     scale=float(entry["scale"]), loader=LOADER)


def _provenance(manifest: dict, entry: dict, layer: int, path: Path) -> dict:
    keep = ("model", "rope", "text", "seq_len", "batch", "stacking", "compute", "harness", "kind", "like", "dist",
            "seed", "random_weights")
    return {
        "capture": str(path),
        "layer": layer,
        "sha256": entry["sha256"],
        "self_check": entry.get("self_check"),
        "stats": entry.get("stats"),
        **{k: manifest[k] for k in keep if k in manifest},
    }


def load_capture(path: str | Path, *, device="cpu", allow_random_weights: bool = True) -> AttentionInputs:
    """q, k, v of one capture file (bf16, as stored), checked against the manifest (sha256, shapes).

    >>> x = load_capture("captures/smollm2-135m/pydoc-S2048/layer03.safetensors")  # doctest: +SKIP
    >>> x.shape.label()  # doctest: +SKIP
    'B1 H9/3 S2048 d64 causal'
    """
    path = Path(path)
    tensors, manifest, entry, layer = read_layer(path, verify=True)
    if _is_random(manifest) and not allow_random_weights:
        _refuse_random(path, manifest)
    return AttentionInputs(
        q=tensors["q"].to(device), k=tensors["k"].to(device), v=tensors["v"].to(device),
        shape=_shape(manifest, entry), dtype=entry.get("dtype", "bfloat16"), source=f"capture:{path}",
        scale=float(entry["scale"]), seed=manifest.get("seed"), provenance=_provenance(manifest, entry, layer, path),
    )


def source_loader(spec: InputSpec, device) -> AttentionInputs:
    """The loader a capture's InputSpec names (`LOADER`): reads `capture:PATH` on `device`."""
    path = spec.source.partition(":")[2]
    allowed = path.endswith(ALLOW_RANDOM)
    path = path.removesuffix(ALLOW_RANDOM)
    if not path:
        raise InputError("Input source 'capture:' needs a path: capture:captures/MODEL/TEXT-S<seq>/layerNN.safetensors.")
    inputs = load_capture(path, device=device, allow_random_weights=allowed)
    if replace(spec.shape, page_size=None) != inputs.shape:
        raise InputError(
            f"The spec for {spec.source} says shape {spec.shape.label()}, but the capture holds "
            f"{inputs.shape.label()}. Build the spec with harness.capture.capture_spec(path), which reads the "
            f"shape from the manifest."
        )
    if spec.shape.paged:
        inputs = paged(inputs, spec)
    if spec.scale is not None:
        inputs = replace(inputs, scale=spec.scale)
    if spec.dtype in _FP8:
        return quantize_inputs_e4m3(inputs)
    dtype = torch_dtype(spec.dtype)
    if dtype != inputs.q.dtype:
        cast = {n: getattr(inputs, n).to(dtype) for n in ("q", "k", "v")}
        inputs = replace(inputs, **cast, dtype=spec.dtype)
    return inputs


def paged(inputs: AttentionInputs, spec: InputSpec) -> AttentionInputs:
    """A captured KV cache moved into shuffled pages of `spec.shape.page_size` tokens, the layout `make_inputs` gives
    a control of the same shape (page order and junk in unused slots drawn from the spec's seed)."""
    import torch
    if spec.shape.packed:
        raise InputError(f"{spec.source}: a capture holds one cache per batch row, not sequences of different "
                         f"lengths; drop --varlen for captured inputs.")
    laid = paged_cache(spec.shape, inputs.k, inputs.v, generator=torch.Generator().manual_seed(spec.seed))
    provenance = {**inputs.provenance, "paged": f"page size {spec.shape.page_size}, shuffled pages (seed {spec.seed})"}
    return replace(inputs, shape=spec.shape, provenance=provenance, **laid)


def list_captures(root: str | Path = "captures", *, verify: bool = False) -> list[CaptureInfo]:
    """Every layer file listed by a manifest under `root` (captures/<model>/<dir>/manifest.json).

    `verify` checks each file against its manifest (sha256, tensors, shapes) and says in `status` what
    does not match; a directory whose manifest cannot be read is listed as one row with layer -1.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--captures {root} is a file; --captures names the folder captures are read from and "
                          f"written to (default captures/). Pass a folder.")
    found = []
    for manifest_path in sorted(root.glob(f"*/*/{MANIFEST}")):
        try:
            manifest = read_manifest(manifest_path.parent)
        except CaptureError as exc:
            if verify:
                found.append(CaptureInfo(
                    path=manifest_path, kind="?", model=manifest_path.parent.parent.name, text="?", layer=-1,
                    seq_len=0, batch=0, shape=None, scale=float("nan"), self_check_max_abs_diff=None, bytes=0,
                    status=f"damaged manifest: {exc}",
                ))
            continue
        compute = manifest.get("compute", {})
        for key, entry in sorted(manifest["layers"].items(), key=lambda kv: int(kv[0])):
            check = entry.get("self_check") or {}
            path = manifest_path.parent / entry["file"]
            status = "not verified"
            if verify:
                problem = verify_layer(path) if path.exists() else f"missing: {path} is listed but not on disk"
                status = "ok" if problem is None else problem
            layer_compute = entry.get("compute") or compute
            found.append(CaptureInfo(
                path=path,
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
                random_weights=_is_random(manifest),
                device=layer_compute.get("device"),
                dtype=layer_compute.get("dtype"),
                status=status,
            ))
    return found


def format_listing(infos: list[CaptureInfo]) -> str:
    """A plain-text table of captures, columns as wide as their widest cell (nothing is cut in a pipe or
    a CI log), then one line per capture that did not verify, saying why."""
    header = ("status", "model", "text", "layer", "shape", "weights", "forward", "self-check", "MB", "path")
    rows = []
    for i in infos:
        ok = i.status in ("ok", "not verified")
        weights = "random" if i.random_weights else ("synthetic" if i.kind == "synthetic" else "trained")
        forward = f"{i.device} {i.dtype}" if i.device else "-"
        check = f"{i.self_check_max_abs_diff:.2g}" if i.self_check_max_abs_diff is not None else "-"
        rows.append((i.status if ok else "DAMAGED", i.model, i.text, str(i.layer) if i.layer >= 0 else "-",
                     i.shape.label() if i.shape else "-", weights, forward, check, f"{i.bytes / 1e6:.1f}", str(i.path)))
    if not rows:
        return "no captures found"
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in (header, *rows)]
    bad = [i for i in infos if i.status not in ("ok", "not verified")]
    lines += [""] * bool(bad) + [f"{i.path}: {i.status}" for i in bad]
    return "\n".join(lines)
