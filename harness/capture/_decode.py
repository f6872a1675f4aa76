"""Decode captures: a model reads a prompt into its KV cache, then decodes greedily, one token a forward pass.

A decode capture of S tokens with N steps keeps, per layer, what attention received at those N steps: q
[B, Hq, N, dqk], the post-RoPE queries of the N tokens the model generated (positions S - N .. S - 1), and k,
v [B, Hkv, S, d], the cache as it stands after the last step (the S - N prompt tokens and the N generated
ones). With the causal mask aligned to the end of the cache (`AttentionShape`'s convention), one attention
call on them computes exactly the N decode steps: step i's query sees keys 0 .. S - N + i, the cache it had.
The model's own output at each step is kept for the self-check.
"""

from __future__ import annotations

import inspect
from typing import Callable, Iterable

from harness.capture._hook import LayerRecord, _copy, _passthrough, check_called, register_attention
from harness.errors import CaptureError

__all__ = ["DecodeRun", "run_decode"]


class _DecodeRecorder:
    """Records the chosen layers' q and outputs at every decode step, and their k, v at the last."""

    def __init__(self, layers: Iterable[int], on_call: Callable[[int], None] | None):
        self.layers = frozenset(layers)
        self.decoding = False
        self.last = False
        self.q: dict[int, list] = {layer: [] for layer in self.layers}
        self.out: dict[int, list] = {layer: [] for layer in self.layers}
        self.kv: dict[int, tuple] = {}
        self.meta: dict[int, dict] = {}
        self.calls: list[int] = []
        self._on_call = on_call

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        out, weights = _passthrough(module, query, key, value, attention_mask, **kwargs)
        layer = getattr(module, "layer_idx", None)
        self.calls.append(layer)
        if layer in self.layers and self.decoding:
            if attention_mask is not None and not bool(attention_mask.all() if attention_mask.dtype == _bool()
                                                       else (attention_mask == 0).all()):
                # One query per row against its whole cache sees every key; a mask that hides some means a
                # sliding window or padding, which the capture cannot describe.
                raise CaptureError(
                    f"Layer {layer} ({type(module).__name__}) decodes with a mask that hides part of its KV cache "
                    f"(a sliding window or padding); decode captures hold full causal attention only. Capture "
                    f"another layer, or a prompt no longer than the model's sliding window.")
            self.q[layer].append(_copy(query))
            self.out[layer].append(_copy(out.transpose(1, 2)))
            if self.last:
                self.kv[layer] = (_copy(key), _copy(value))
            scale = kwargs.get("scaling")
            self.meta[layer] = {"scale": float(scale) if scale is not None else query.shape[-1] ** -0.5,
                                "module": type(module).__name__,
                                "qk_norm": hasattr(module, "q_norm") and hasattr(module, "k_norm")}
        if self._on_call is not None and self.decoding:
            self._on_call(layer)
        return out, weights


def _bool():
    import torch

    return torch.bool


class DecodeRun:
    """What `run_decode` returns: a LayerRecord per layer and the generated token ids [B, N]."""

    def __init__(self, records: dict[int, LayerRecord], tokens):
        self.records = records
        self.tokens = tokens


def run_decode(model, prompt_ids, *, steps: int, layers: Iterable[int], on_call=None) -> DecodeRun:
    """Read `prompt_ids` [B, P] into the model's KV cache (transformers' DynamicCache), then decode `steps`
    tokens greedily (argmax of the next-token logits), recording `layers` at each step (see the module)."""
    import torch
    from transformers import DynamicCache

    recorder = _DecodeRecorder(layers, on_call)
    register_attention(recorder)
    tokens = []
    try:
        with torch.inference_mode():
            cache = DynamicCache(config=model.config)
            # transformers renames past_key_values to cache (5.24 warns about the old name); the cache object is
            # updated in place either way.
            name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
            ids = prompt_ids.to(model.device)
            result = model(input_ids=ids, **{name: cache}, use_cache=True, logits_to_keep=1)
            recorder.decoding = True
            for step in range(steps):
                token = result.logits[:, -1].argmax(dim=-1, keepdim=True)
                tokens.append(token.cpu())
                recorder.last = step == steps - 1
                result = model(input_ids=token, **{name: cache}, use_cache=True, logits_to_keep=1)
    finally:
        register_attention()
    check_called(recorder.layers, recorder.kv.keys(), recorder.calls, when=" while decoding")
    records = {}
    for layer in sorted(recorder.layers):
        k, v = recorder.kv[layer]
        meta = recorder.meta[layer]
        records[layer] = LayerRecord(
            layer=layer, q=torch.cat(recorder.q[layer], dim=2), k=k, v=v, out=torch.cat(recorder.out[layer], dim=2),
            scale=meta["scale"], causal=True, module=meta["module"], qk_norm=meta["qk_norm"])
    return DecodeRun(records, torch.cat(tokens, dim=1))
