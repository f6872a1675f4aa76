"""The inputs of `bench sustained --model`: captured layers, each followed by its controls (which layers, S and
windows by default is harness.suite's `main_job_defaults`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.capture._capture import ensure_capture
from harness.capture._config import parse_layers
from harness.capture._device import choose_capture_device
from harness.capture._load import capture_spec
from harness.capture._text import DEFAULT_TEXT

__all__ = ["model_input_specs"]


def model_input_specs(
    model: str,
    *,
    layers,
    seq_len: int,
    text: str = DEFAULT_TEXT,
    weights: str | Path | None = None,
    root: str | Path,
    controls: tuple[str, ...],
    dtype: str = "bfloat16",
    seed: int = 0,
    progress=None,
    device: str = "cpu",
    capture_device: str | None = None,
    capture_dtype: str | None = None,
    windows: int = 1,
    random_weights: bool = False,
    allow_random_weights: bool = False,
    recapture: bool = False,
    on_estimate=None,
    decode_steps: int = 0,
    page_size: int | None = None,
) -> tuple:
    """InputSpecs for each captured layer (capturing first where missing) and its same-shape controls.

    A control shares the capture's shape (windows included) and softmax scale, so the only difference a
    kernel sees is the data: the comparison the harness exists for. The capture runs on `capture_device`
    (None / "auto": the run's `device`), in `capture_dtype` (None: bf16 on a GPU, fp32 on the CPU).
    `on_estimate(CaptureEstimate)` is called before a capture loads anything. Random-weight captures
    are refused as inputs unless `allow_random_weights`. `decode_steps` N: a decode capture (`CaptureConfig`), S_q = N
    queries against the `seq_len` keys of the cache; `page_size`: its cache (and the controls') in shuffled pages.
    """
    layers = parse_layers(layers)
    paths = ensure_capture(model, layers=layers, seq_len=seq_len, text=text, weights=weights, root=root,
                           batch=windows, device=choose_capture_device(device, capture_device), dtype=capture_dtype,
                           random_weights=random_weights, seed=seed, recapture=recapture, progress=progress,
                           on_estimate=on_estimate, decode_steps=decode_steps)
    out = []
    for layer, path in zip(layers, paths):
        tag = f"L{layer:02d}"
        spec = capture_spec(path, dtype=dtype, seed=seed, allow_random_weights=allow_random_weights)
        captured = dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, page_size=page_size),
                                       name=f"{tag}:captured")
        out.append(captured)
        out.extend(dataclasses.replace(captured, source=c, name=f"{tag}:{c}", loader=None) for c in controls)
    return tuple(out)
