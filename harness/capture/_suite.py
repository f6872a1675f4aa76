"""The inputs of `bench sustained --model`: captured layers, each followed by its controls."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness.capture._capture import ensure_capture
from harness.capture._config import parse_layers
from harness.capture._device import choose_capture_device
from harness.capture._load import capture_spec
from harness.capture._models import resolve_model

__all__ = ["MainJob", "default_layers", "main_job_defaults", "model_input_specs"]


def default_layers(num_layers: int) -> tuple[int, ...]:
    """An early and a middle layer: attention changes character with depth (sinks grow in deep layers)."""
    return tuple(sorted({max(1, num_layers // 10), num_layers // 2}))


@dataclass(frozen=True, kw_only=True)
class MainJob:
    """What `bench sustained --model M` captures and times by default on one kind of device."""

    layers: tuple[int, ...]
    seq_len: int
    windows: int  # text windows stacked along the batch of each captured input (and its controls)
    why: str


def main_job_defaults(model: str, device: str) -> MainJob:
    """The main job's capture defaults: on a GPU one middle layer at S = 8192 with the registry's
    `gpu_windows` stacked along the batch, so one launch is long enough for the card to reach its power
    limiter (the effect the main job exists to show) and the job stays near two minutes; on a CPU an early
    and a middle layer at S = 1024, one window (a dry run: CPU timings are not sustained-clock figures).

    >>> main_job_defaults("smollm2-135m", "cuda:0").windows, main_job_defaults("smollm2-135m", "cpu").windows
    (6, 1)
    """
    spec = resolve_model(model)
    if device.partition(":")[0] == "cpu":
        return MainJob(layers=default_layers(spec.num_layers), seq_len=min(1024, spec.max_positions), windows=1,
                       why="CPU: a dry run at a short length")
    return MainJob(
        layers=(spec.num_layers // 2,), seq_len=min(8192, spec.max_positions), windows=spec.gpu_windows,
        why=f"GPU: {spec.gpu_windows} text window(s) of layer {spec.num_layers // 2} stacked along the batch, so a "
            f"launch lasts long enough to reach the power limiter (registry gpu_windows)",
    )


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
    spec = resolve_model(model)
    layers = parse_layers(layers) if layers else default_layers(spec.num_layers)
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
