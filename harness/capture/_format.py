"""The captures/ format: captures/<model>/<text>-S<seq>/layer<NN>.safetensors + manifest.json.

Each layer file holds q, k, v (bf16, [B, H, S, d]). The manifest describes the directory: model
identity, text provenance, rope facts, and per layer its file's sha256, shapes, softmax scale,
self-check difference and statistics. Readers check every file against the manifest.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.capture._weights import sha256_file
from harness.errors import CaptureError
from harness.results import atomic_path

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "STORED_DTYPE",
    "capture_dir",
    "layer_file",
    "write_layer",
    "read_manifest",
    "write_manifest",
    "layer_entry",
    "read_layer",
    "recapture_command",
    "verify_layer",
]

FORMAT = "harness.capture"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STORED_DTYPE = "bfloat16"


def capture_dir(root: Path, model: str, text: str, seq_len: int, *, batch: int = 1, decode_steps: int = 0) -> Path:
    return Path(root) / model / (f"{text}-S{seq_len}" + (f"-decode{decode_steps}" if decode_steps else "")
                                 + (f"-B{batch}" if batch > 1 else ""))


def layer_file(layer: int) -> str:
    return f"layer{layer:02d}.safetensors"


def _atomic_write(path: Path, write) -> None:
    # An interrupted capture leaves the previous file intact.
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        write(tmp)


def write_layer(directory: Path, layer: int, tensors: dict[str, Any], *, metadata: dict[str, str]) -> dict:
    """Save q, k, v in bf16; return the manifest fields of the file (name, sha256, bytes, shapes, dtype)."""
    import torch
    from safetensors.torch import save_file

    stored = {name: t.to(torch.bfloat16).contiguous() for name, t in tensors.items()}
    path = Path(directory) / layer_file(layer)
    _atomic_write(path, lambda tmp: save_file(stored, str(tmp), metadata=metadata))
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        "dtype": STORED_DTYPE,
        "shapes": {name: list(t.shape) for name, t in stored.items()},
    }


def write_manifest(directory: Path, manifest: dict) -> Path:
    path = Path(directory) / MANIFEST
    text = _dumps(manifest) + "\n"
    _atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def _dumps(value: Any, indent: str = "") -> str:
    """JSON with one key per line but short lists (shapes, token ranges) kept on one line."""
    if isinstance(value, dict) and value:
        inner = indent + "  "
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) and v for v in value):
        if all(isinstance(v, list) and not any(isinstance(x, (dict, list)) for x in v) for v in value):
            return json.dumps(value)
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + _dumps(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value)


def read_manifest(directory: Path) -> dict:
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaptureError(
            f"{path} is missing: a capture directory needs the manifest written with its layer files. "
            f"Recapture with `bench capture` (copy the whole directory when moving captures)."
        ) from None
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{path} is not valid JSON ({exc}); the capture is damaged: recapture it.") from None
    if manifest.get("format") != FORMAT or not isinstance(manifest.get("layers"), dict):
        raise CaptureError(f"{path} is not a capture manifest (no format {FORMAT!r} and layers); recapture it.")
    if manifest.get("version", 0) > FORMAT_VERSION:
        raise CaptureError(
            f"{path} has format version {manifest['version']}, newer than this harness reads "
            f"({FORMAT_VERSION}); update the harness."
        )
    return manifest


def layer_entry(manifest: dict, file_name: str, *, where: Path) -> tuple[int, dict]:
    for key, entry in manifest["layers"].items():
        if entry.get("file") == file_name:
            return int(key), entry
    listed = ", ".join(e.get("file", "?") for e in manifest["layers"].values()) or "none"
    raise CaptureError(
        f"{where / file_name} is not listed in {where / MANIFEST} (it lists: {listed}). The file does not "
        f"belong to this capture; re-capture the layer with `bench capture ... --recapture` (which replaces it)."
    )


def read_layer(path: Path, *, verify: bool = True) -> tuple[dict[str, Any], dict, dict, int]:
    """Load one layer file checked against its manifest: (tensors, manifest, layer entry, layer)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise CaptureError(
            f"Capture file {path} does not exist. List captures with `bench capture --list` or make this one "
            f"with `bench capture --model M --layers N --seq-len S`."
        )
    manifest = read_manifest(path.parent)
    layer, entry = layer_entry(manifest, path.name, where=path.parent)
    if verify:
        digest = sha256_file(path)
        if digest != entry.get("sha256"):
            raise CaptureError(damaged_message(path, manifest, layer, expected=entry.get("sha256"), actual=digest))
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CaptureError(
            f"{path} is not a readable safetensors file ({exc}); nothing was overwritten. Re-capture it with "
            f"`{recapture_command(manifest, layer, path.parent)}`."
        ) from None
    for name in ("q", "k", "v"):
        if name not in tensors:
            raise CaptureError(f"{path} holds no tensor {name!r} (found {sorted(tensors)}); recapture the layer.")
        want = entry.get("shapes", {}).get(name)
        got = list(tensors[name].shape)
        if got != want:
            raise CaptureError(
                f"{path}: tensor {name} has shape {got}, but the manifest records {want}. The file and the "
                f"manifest come from different captures; recapture the layer."
            )
        if str(tensors[name].dtype).removeprefix("torch.") != entry.get("dtype", STORED_DTYPE):
            raise CaptureError(
                f"{path}: tensor {name} is {tensors[name].dtype}, the manifest says {entry.get('dtype')}; "
                f"recapture the layer."
            )
    return tensors, manifest, entry, layer


def recapture_command(manifest: dict, layer: int, directory: Path) -> str:
    """The `bench capture` command that makes this layer of this capture again, overwriting it."""
    model = manifest.get("model", {})
    text = manifest.get("text", {})
    parts = ["bench", "capture", "--model", str(model.get("argument") or model.get("name")), "--layers", str(layer),
             "--seq-len", str(manifest.get("seq_len")), "--text", str(text.get("argument") or text.get("name")),
             "--captures", str(Path(directory).parent.parent)]
    if int(manifest.get("batch") or 1) > 1:
        parts += ["--windows", str(manifest["batch"])]
    if (manifest.get("decode") or {}).get("steps"):
        parts += ["--decode-steps", str(manifest["decode"]["steps"])]
    if manifest.get("random_weights"):
        parts += ["--random-weights", "--seed", str(model.get("weights", {}).get("identity", {}).get("seed", 0))]
    return " ".join(shlex.quote(p) for p in parts + ["--recapture"])


def damaged_message(path: Path, manifest: dict, layer: int, *, expected: str | None, actual: str) -> str:
    return (
        f"{path} is damaged: its sha256 is {actual}, but its manifest records {expected} (the file changed "
        f"after capture, or was replaced or copied without its manifest). It is refused, and nothing was "
        f"re-captured or overwritten. Re-capture it with `{recapture_command(manifest, layer, Path(path).parent)}`."
    )


def verify_layer(path: Path) -> str | None:
    """None when the layer file matches its manifest (sha256, tensors, shapes), else why not (one paragraph)."""
    try:
        read_layer(Path(path), verify=True)
    except CaptureError as exc:
        return str(exc)
    return None
