"""Captured activations: the post-RoPE q, k, v a real model's attention receives, saved for timing.

`capture` runs a model (from the registry, a local Hugging Face folder or a GGUF file) over a text
once (on the run's GPU in bf16, or the CPU in fp32; `choose_capture_device`), records the requested
layers through a transformers attention hook, checks each capture by recomputing that layer's
attention, and writes captures/<model>/<text>-S<seq>/layer<NN>.safetensors
plus manifest.json. `load_capture` reads one back as AttentionInputs; `synthesize_like` makes the
control of the same shape. A capture's InputSpec names `source_loader` as its loader, so harness.inputs
loads it without importing this package first. Importing it does nothing else (transformers is imported
only when a model is loaded).

>>> from harness.capture import MODELS, CaptureConfig
>>> MODELS["deepseek-v2-lite"].head_dim_qk, MODELS["deepseek-v2-lite"].head_dim_v
(192, 128)
>>> CaptureConfig(layers="15,3").layers
(3, 15)
"""

from harness.capture._bind import BoundForward, MarkedForward, bind as bind_forward
from harness.capture._capture import (
    CaptureResult,
    LayerResult,
    capture,
    capture_directory,
    ensure_capture,
)
from harness.capture._config import CaptureConfig, parse_layers
from harness.capture._controls import CONTROL_DISTS, save_like, synthesize_like
from harness.capture._device import choose_capture_device, default_capture_dtype
from harness.capture._estimate import CaptureEstimate, check_fits, estimate_capture
from harness.capture._format import recapture_command
from harness.capture._forward import ModelForward, open_forward
from harness.capture._fp8 import E4M3_MAX, e4m3_scale, quantize_e4m3_pow2, quantize_inputs_e4m3
from harness.capture._load import (
    CaptureInfo,
    capture_shape,
    capture_spec,
    format_listing,
    list_captures,
    load_capture,
    source_loader,
)
from harness.capture._model_error import SUFFIX_MODEL_TYPES, ModelErrorConfig, ModelErrorResult, model_error
from harness.capture._models import DEFAULT_MODEL, GPU_WINDOWS, MODELS, ModelSpec, miniature, resolve_model
from harness.capture._progress import capture_progress
from harness.capture._recompute import LayerStats
from harness.capture._suite import model_input_specs
from harness.capture._text import DEFAULT_TEXT, TEXT_SOURCES, document_windows, documents, load_text
from harness.capture._weights import ResolvedWeights, resolve_weights

__all__ = [
    "source_loader",
    "CaptureConfig",
    "CaptureResult",
    "LayerResult",
    "LayerStats",
    "CaptureInfo",
    "CaptureEstimate",
    "ModelSpec",
    "ResolvedWeights",
    "MODELS",
    "DEFAULT_MODEL",
    "GPU_WINDOWS",
    "TEXT_SOURCES",
    "DEFAULT_TEXT",
    "CONTROL_DISTS",
    "E4M3_MAX",
    "capture",
    "capture_directory",
    "check_fits",
    "choose_capture_device",
    "default_capture_dtype",
    "ensure_capture",
    "estimate_capture",
    "format_listing",
    "miniature",
    "recapture_command",
    "parse_layers",
    "capture_progress",
    "model_input_specs",
    "load_capture",
    "capture_shape",
    "capture_spec",
    "list_captures",
    "synthesize_like",
    "save_like",
    "quantize_e4m3_pow2",
    "quantize_inputs_e4m3",
    "e4m3_scale",
    "resolve_model",
    "resolve_weights",
    "load_text",
    "documents",
    "document_windows",
    "ModelErrorConfig",
    "ModelErrorResult",
    "SUFFIX_MODEL_TYPES",
    "model_error",
    "ModelForward",
    "BoundForward",
    "MarkedForward",
    "open_forward",
    "bind_forward",
]
