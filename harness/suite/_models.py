"""The defaults of a model's captures: which layers, how many tokens and text windows on this device (`bench sustained
--model`, `bench in-model`, `bench error --model`), and the CaptureConfig of `bench capture`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.capture import DEFAULT_MODEL, DEFAULT_TEXT, CaptureConfig, resolve_model
from harness.suite._checks import check_seed
from harness.suite._devices import default_seq_len, device_kind
from harness.suite._shapes import DEFAULT_SEED

__all__ = ["CAPTURES_ROOT", "DEFAULT_TEXT", "MainJob", "default_layers", "main_job_defaults", "CAPTURE_DEVICE", "CAPTURE_SEQ_LEN", "CAPTURE_WINDOWS",
           "capture_config"]


# Where captures are read and written unless told otherwise: the capture library's own (runs: RESULTS_ROOT, from
# harness.config).
CAPTURES_ROOT = CaptureConfig.root


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


def main_job_defaults(model, device: str) -> MainJob:
    """The main job's capture defaults: on a GPU one middle layer at the captured-model S (`default_seq_len`, 8192)
    with the registry's `gpu_windows` stacked along the batch, so one launch is long enough for the card to reach its
    power limiter (the effect the main job exists to show) and the job stays near two minutes; on a CPU an early and
    a middle layer at the CPU's S (1024), one window (a dry run: CPU timings are not sustained-clock figures). S is
    cut to the model's context where that is shorter.

    >>> main_job_defaults("smollm2-135m", "cuda:0").windows, main_job_defaults("smollm2-135m", "cpu").windows
    (6, 1)
    """
    spec = resolve_model(model)
    seq_len = min(default_seq_len(device, model=True), spec.max_positions)
    if device_kind(device) == "cpu":
        return MainJob(layers=default_layers(spec.num_layers), seq_len=seq_len, windows=1,
                       why="CPU: a dry run at a short length")
    return MainJob(
        layers=(spec.num_layers // 2,), seq_len=seq_len, windows=spec.gpu_windows,
        why=f"GPU: {spec.gpu_windows} text window(s) of layer {spec.num_layers // 2} stacked along the batch, so a "
            f"launch lasts long enough to reach the power limiter (registry gpu_windows)",
    )


# `bench capture` on its own (not as part of a run): the capture library's own values, CaptureConfig's fields (the
# forward pass on the CPU unless --device says otherwise: a capture is data, the same wherever it was computed, and
# the CPU needs no GPU free; 2048 tokens of one window), read here and never retyped.
CAPTURE_DEVICE = CaptureConfig.device
CAPTURE_SEQ_LEN = CaptureConfig.seq_len
CAPTURE_WINDOWS = CaptureConfig.batch


def capture_config(*, model: str | None = None, layers=None, seq_len: int | None = None, windows: int | None = None,
                   decode_steps: int | None = None, text: str | None = None, weights: Path | None = None,
                   root: Path | None = None, dtype: str | None = None, device: str | None = None,
                   random_weights: bool = False, seed: int = DEFAULT_SEED, recapture: bool = False):
    """The CaptureConfig of `bench capture`, every option left out decided here: the registry's default model
    (harness.capture.DEFAULT_MODEL), its early and middle layer (`default_layers`), CAPTURE_SEQ_LEN tokens of
    DEFAULT_TEXT in CAPTURE_WINDOWS window(s) on CAPTURE_DEVICE, written under CAPTURES_ROOT."""
    model = DEFAULT_MODEL if model is None else model
    device = CAPTURE_DEVICE if device is None else device
    device_kind(device)
    if not layers:
        layers = default_layers(resolve_model(model).num_layers)
    return CaptureConfig(model=model, layers=layers, seq_len=CAPTURE_SEQ_LEN if seq_len is None else seq_len,
                         text=DEFAULT_TEXT if text is None else text, weights=weights,
                         root=CAPTURES_ROOT if root is None else root, dtype=dtype, device=device,
                         batch=CAPTURE_WINDOWS if windows is None else windows, random_weights=random_weights,
                         seed=check_seed(seed), recapture=recapture, decode_steps=decode_steps or 0)
