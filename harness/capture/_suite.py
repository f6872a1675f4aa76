"""The inputs of `bench sustained --model`: captured layers, each followed by its controls."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.capture._capture import ensure_capture, parse_layers
from harness.capture._load import capture_spec
from harness.capture._models import resolve_model

__all__ = ["default_layers", "model_input_specs"]


def default_layers(num_layers: int) -> tuple[int, ...]:
    """An early and a middle layer: attention changes character with depth (sinks grow in deep layers)."""
    return tuple(sorted({max(1, num_layers // 10), num_layers // 2}))


def model_input_specs(
    model: str,
    *,
    layers=None,
    seq_len: int,
    text: str = "pydoc",
    weights: str | Path | None = None,
    root: str | Path = "captures",
    controls: tuple[str, ...] = ("gaussian:0.1",),
    dtype: str = "bfloat16",
    seed: int = 0,
    progress=None,
) -> tuple:
    """InputSpecs for each captured layer (capturing first where missing) and its same-shape controls.

    A control shares the capture's shape and softmax scale, so the only difference a kernel sees is the
    data: the comparison the harness exists for.
    """
    spec = resolve_model(model)
    layers = parse_layers(layers) if layers else default_layers(spec.num_layers)
    paths = ensure_capture(model, layers=layers, seq_len=seq_len, text=text, weights=weights, root=root,
                           progress=progress)
    out = []
    for layer, path in zip(layers, paths):
        tag = f"L{layer:02d}"
        captured = dataclasses.replace(capture_spec(path, dtype=dtype, seed=seed), name=f"{tag}:captured")
        out.append(captured)
        out.extend(dataclasses.replace(captured, source=c, name=f"{tag}:{c}", loader=None) for c in controls)
    return tuple(out)
