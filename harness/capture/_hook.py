"""The hook: an attention function that records q, k, v exactly as a transformers model hands them over.

It is registered with `AttentionInterface` under one name and the model is loaded with
`attn_implementation=<that name>`, so every layer calls it with post-RoPE (and post-QK-norm) q, k, v.
It delegates to the stock sdpa function, so the model computes exactly what it would with sdpa.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from harness.errors import CaptureError

__all__ = ["ATTN_IMPLEMENTATION", "LayerRecord", "register_attention", "recording", "run_forward", "check_called"]

ATTN_IMPLEMENTATION = "harness_capture"


@dataclass(frozen=True, kw_only=True, eq=False)
class LayerRecord:
    """One layer's capture: q [B, Hq, S, dqk], k [B, Hkv, S, dqk], v [B, Hkv, S, dv] and the model's own
    attention output [B, Hq, S, dv], all contiguous fp32-or-model-dtype copies on the CPU."""

    layer: int
    q: Any
    k: Any
    v: Any
    out: Any
    scale: float
    causal: bool
    module: str  # the attention class, e.g. LlamaAttention
    qk_norm: bool  # the attention module normalizes q and k (Qwen3) before RoPE


class _StopForward(Exception):
    """Raised once the last requested layer is recorded: later layers cannot change what was captured."""


def _passthrough(module, query, key, value, attention_mask, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def register_attention(fn: Callable | None = None) -> None:
    """Register `fn` (default: plain sdpa) under ATTN_IMPLEMENTATION, with the sdpa mask under the same
    name: without the mask registration transformers builds no mask for the custom name and padded
    batches silently attend to padding."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, fn or _passthrough)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, sdpa_mask)


class _Recorder:
    def __init__(self, layers: Iterable[int], *, on_call: Callable[[int], None] | None, stop_early: bool):
        self.layers = frozenset(layers)
        self.records: dict[int, LayerRecord] = {}
        self.calls: list[int] = []
        self._on_call = on_call
        self._stop_early = stop_early

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        out, weights = _passthrough(module, query, key, value, attention_mask, **kwargs)
        layer = getattr(module, "layer_idx", None)
        self.calls.append(layer)
        if self._on_call is not None:
            self._on_call(layer)
        if layer in self.layers:
            if attention_mask is not None:
                # A mask means padding, a sliding window or a non-causal pattern: none of which the
                # captured (causal, unpadded) format can describe.
                raise CaptureError(
                    f"Layer {layer} ({type(module).__name__}) attends with an explicit mask (sliding window, "
                    f"padding or a non-causal pattern); captures hold plain causal attention only. Capture "
                    f"another layer, or a sequence no longer than the model's sliding window."
                )
            scale = kwargs.get("scaling")
            self.records[layer] = LayerRecord(
                layer=layer,
                q=_copy(query),
                k=_copy(key),
                v=_copy(value),
                # sdpa returns [B, S, H, dv]; store it head-major like q.
                out=_copy(out.transpose(1, 2)),
                scale=float(scale) if scale is not None else query.shape[-1] ** -0.5,
                causal=bool(kwargs.get("is_causal", getattr(module, "is_causal", True))),
                module=type(module).__name__,
                qk_norm=hasattr(module, "q_norm") and hasattr(module, "k_norm"),
            )
            if self._stop_early and self.layers <= self.records.keys():
                raise _StopForward
        return out, weights


def _copy(t):
    # The model hands over strided views (before the GQA repeat); a kernel needs contiguous tensors,
    # and moving each off the device as it arrives keeps device memory to one layer's worth.
    return t.detach().to("cpu", copy=True).contiguous()


@contextlib.contextmanager
def recording(layers: Iterable[int], *, on_call: Callable[[int], None] | None = None,
              stop_early: bool = True) -> Iterator[_Recorder]:
    """Record the given layers during the forward passes run inside the block."""
    recorder = _Recorder(layers, on_call=on_call, stop_early=stop_early)
    register_attention(recorder)
    try:
        yield recorder
    finally:
        register_attention()


def run_forward(model, input_ids, recorder: _Recorder) -> dict[int, LayerRecord]:
    """One forward pass of the decoder stack (no LM head: its logits would be the largest tensor of
    the pass), no KV cache. Returns the records; a requested layer that was never called is an error."""
    import torch

    decoder = getattr(model, "base_model", model)
    with torch.inference_mode():
        try:
            decoder(input_ids=input_ids.to(model.device), use_cache=False)
        except _StopForward:
            pass
    check_called(recorder.layers, recorder.records.keys(), recorder.calls)
    return recorder.records


def check_called(wanted, recorded, calls, *, when: str = "") -> None:
    """Refuse a capture in which a requested layer never called the attention interface (`when`: e.g. " while
    decoding")."""
    missing = sorted(set(wanted) - set(recorded))
    if missing:
        seen = sorted({c for c in calls if c is not None})
        raise CaptureError(
            f"Layers {missing} never called the attention interface{when} (layers seen: {seen or 'none'}). The "
            f"model's attention does not dispatch through transformers' AttentionInterface, so it cannot be "
            f"captured with this hook; use a model whose transformers implementation supports "
            f"attn_implementation='sdpa'."
        )
