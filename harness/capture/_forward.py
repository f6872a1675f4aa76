"""A model's own forward pass, with its attention swappable: what `bench in-model` times.

`open_forward` loads the model (its weights, or its published architecture with seeded random weights), takes
B windows x S tokens of the capture text exactly as `bench capture` takes them (so layer L's q, k, v here are the
capture's), and runs one reference pass with the model's own attention (torch SDPA through transformers, as the
capture hook does) that records every layer's q, k, v. Those are the layers' calibration inputs: each kernel is
prepared and gated on them (`harness.capture._bind`).

Prefill: one forward pass over the B x S tokens, no KV cache, the LM head on the last position only (what a
serving prefill computes). Decode (`seq_len_q` N < S): the first S - N tokens of each window are read into a
static KV cache of S slots once; each timed call is one step of the last N tokens at positions S - N .. S - 1
(teacher-forced: the text's tokens, not the model's guesses), which rewrites the same N cache slots with the same
values, so every step sees the same cache and the step can be repeated and captured in a CUDA graph. Each layer's
attention then gets q [B, Hq, N, d] and the whole cache k, v [B, Hkv, S, d] with the causal mask aligned to the
end of the cache (checked once on the reference step; the kernels compute exactly that mask).

The attention function (`_Swap`) is registered with transformers' AttentionInterface under the capture hook's
name; with no kernel bound it is the model's own SDPA.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from harness.capture._device import default_capture_dtype, torch_device_name
from harness.capture._hook import _passthrough, register_attention
from harness.capture._model_io import build_random, load_model, load_tokenizer, parse_gguf_once, quiet_transformers
from harness.capture._models import check_config, resolve_model
from harness.capture._text import byte_windows, load_text, token_windows
from harness.capture._weights import resolve_weights
from harness.errors import CaptureError, ConfigError
from harness.inputs import AttentionShape

__all__ = ["ModelForward", "open_forward", "KERNEL_DTYPE"]

KERNEL_DTYPE = "bfloat16"  # what kernels get in a model, as in `bench error --model` (their dtype when served)


class _Swap:
    """The attention function of every layer: the bound kernel's launch for that layer, or the model's SDPA.

    With `marks` set (a list), device marks bracket each call: before the copy of q, k, v into the layer's
    buffers, before the kernel, after it, and after the kernel's refresh() where it has one (`BoundForward.marked`)."""

    def __init__(self, model_name: str, *, decode: bool) -> None:
        self.model = model_name
        self.decode = decode
        self.bound = None  # a BoundForward, or None: the model's own attention
        self.record: dict | None = None  # layer -> (q, k, v, scale) during the reference pass
        self.calls: list[int] = []  # layer of each call while `count` is on (tests: the swap reaches every layer)
        self.count = False
        self.marks: list | None = None
        self.mark = None

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        layer = module.layer_idx
        if self.count:
            self.calls.append(layer)
        if self.record is not None:
            return self._reference(module, query, key, value, attention_mask, **kwargs)
        bound = self.bound
        if bound is None:
            return _passthrough(module, query, key, value, attention_mask, **kwargs)
        slot = bound.slots[layer]
        marks = self.marks
        if marks is not None:
            a = self.mark()
        x = slot.inputs
        x.q.copy_(query)
        if not slot.shares_kv:  # decode with a bf16 cache: the kernel reads the cache itself, nothing to copy
            x.k.copy_(key)
            x.v.copy_(value)
        if marks is not None:
            b = self.mark()
        r = None
        if slot.refresh is not None:
            slot.refresh()
            # a mark of its own only where there is a refresh: the kernels without one pay no extra event
            r = self.mark() if marks is not None else None
        out = slot.launch()
        if marks is not None:
            marks.append((layer, a, b, r, self.mark()))
        return out.to(query.dtype).transpose(1, 2), None

    def _reference(self, module, query, key, value, attention_mask, **kwargs):
        import torch

        layer = module.layer_idx
        if attention_mask is not None and not (self.decode and _bottom_right_causal(attention_mask, query, key)):
            raise CaptureError(
                f"Layer {layer} ({type(module).__name__}) of {self.model} attends with an explicit mask (a sliding "
                f"window, padding or a non-causal pattern); in-model timing swaps plain causal attention only. Use a "
                f"sequence no longer than the model's sliding window, or another model.")
        scale = kwargs.get("scaling")
        scale = float(scale) if scale is not None else query.shape[-1] ** -0.5
        dt = getattr(torch, KERNEL_DTYPE)
        self.record[layer] = tuple(t.detach().to(dt).contiguous().clone() for t in (query, key, value)) + (scale,)
        return _passthrough(module, query, key, value, attention_mask, **kwargs)


def _bottom_right_causal(mask, query, key) -> bool:
    """Whether a decode step's mask lets query i see exactly keys 0 .. S_kv - S_q + i in every batch row."""
    import torch

    s_q, s_kv = query.shape[-2], key.shape[-2]
    allowed = mask if mask.dtype == torch.bool else mask == 0
    want = torch.arange(s_kv, device=mask.device)[None, :] <= torch.arange(s_q, device=mask.device)[:, None] + s_kv - s_q
    return bool((allowed == want).all())


@dataclass(kw_only=True)
class ModelForward:
    """A loaded model, its token windows and the reference pass's q, k, v of every layer (`open_forward`)."""

    spec: Any  # ModelSpec
    model: Any
    device: str  # the torch device
    dtype: str  # of the model's own computation
    ids: Any  # [B, S] token ids
    seq_len_q: int  # S_q: S (prefill) or N (decode)
    seq_len_kv: int  # S
    random_weights: bool
    weights: str  # where the weights came from, or "random weights (seed N)"
    text: dict  # the text's provenance
    calibration: dict = field(default_factory=dict)  # layer -> (q, k, v, scale) of the reference pass, bf16
    swap: _Swap | None = None
    _step: Any = None  # decode: the step closure's state (cache, ids, positions)

    @property
    def phase(self) -> str:
        return "decode" if self.seq_len_q < self.seq_len_kv else "prefill"

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(sorted(self.calibration))

    def shape(self):
        """The attention shape every layer's call has (B, Hq, Hkv, S_q, S_kv, dqk, dv, causal)."""
        q, k, v, _ = self.calibration[self.layers[0]]
        return AttentionShape(batch=q.shape[0], heads_q=q.shape[1], heads_kv=k.shape[1], seq_len=q.shape[2],
                              seq_len_kv=k.shape[2], head_dim_qk=q.shape[3], head_dim_v=v.shape[3], causal=True)

    def label(self) -> str:
        """How tables name this workload: model, phase, B x S (S_q against S_kv for decode), random weights."""
        tokens = (f"B{self.ids.shape[0]} S{self.seq_len_kv}" if self.phase == "prefill"
                  else f"B{self.ids.shape[0]} Sq{self.seq_len_q} Skv{self.seq_len_kv}")
        return f"{self.spec.name} {self.phase} {tokens}" + (" RANDOM-WEIGHTS" if self.random_weights else "")

    def cache_kv(self, layer: int):
        """Decode: the static cache's own k, v tensors of `layer` when a kernel can read them in place (bf16,
        contiguous): copying the cache every step would cost as much as attending over it. None otherwise."""
        import torch

        if self._step is None:
            return None
        k, v = self._step[0].layers[layer].keys, self._step[0].layers[layer].values
        ok = all(t.dtype == getattr(torch, KERNEL_DTYPE) and t.is_contiguous() for t in (k, v))
        return (k, v) if ok else None

    def run(self):
        """One forward pass (prefill) or decode step with whatever attention is bound; returns the last position's
        logits [B, 1, V]."""
        import torch

        with torch.inference_mode():
            if self._step is None:
                return self.model(input_ids=self.ids, use_cache=False, logits_to_keep=1).logits
            cache, ids, positions, prompt, name = self._step
            for layer in cache.layers:  # back to the prompt: the step rewrites the same slots each time
                layer.cumulative_length.fill_(prompt)
            return self.model(input_ids=ids, **{name: cache}, use_cache=True, logits_to_keep=1,
                              position_ids=positions).logits

    def close(self) -> None:
        """Give the attention name back to plain SDPA and drop the model."""
        register_attention()
        self.model = None
        self.calibration = {}
        self._step = None


def open_forward(*, model, text: str, weights=None, seq_len: int, seq_len_q: int | None = None, windows: int = 1,
                 device: str = "cpu", dtype: str | None = None, random_weights: bool = False, seed: int = 0,
                 progress=None) -> ModelForward:
    """Load the model, take its token windows and run the reference pass (see the module doc).

    `seq_len` is S (the KV cache's length when decoding), `seq_len_q` N < S makes each timed call a decode step of N
    tokens. `dtype` None: bf16 on a GPU, fp32 on the CPU (kernels get bf16 q, k, v either way)."""
    say = progress or (lambda text: None)
    spec = resolve_model(model)
    s_q = seq_len if seq_len_q is None else seq_len_q
    if not 1 <= s_q <= seq_len:
        raise ConfigError(f"--seq-len-q {s_q}: a decode step of N tokens against a cache of --seq-len-kv {seq_len} needs "
                          f"1 <= N < {seq_len} (N = {seq_len}, or no --seq-len-q, is the prefill).")
    if seq_len > spec.max_positions:
        raise CaptureError(f"--seq-len {seq_len} is beyond {spec.name}'s limit of {spec.max_positions} positions "
                           f"(max_position_embeddings). Use --seq-len {spec.max_positions} or less.")
    if random_weights and weights is not None:
        raise ConfigError("--random-weights builds the model without weights; drop --weights (or --random-weights).")
    device = torch_device_name(device)
    dtype = dtype or default_capture_dtype(device)
    source = load_text(text)
    swap = _Swap(spec.name, decode=s_q < seq_len)
    with quiet_transformers(), parse_gguf_once():
        if random_weights:
            say(f"building {spec.name} with random weights (seed {seed}) on {device}")
            ids, provenance = byte_windows(source, seq_len=seq_len, batch=windows)
            net = build_random(spec, dtype=dtype, device=device, seed=seed)
            where = f"random weights (seed {seed}, transformers' own initialisation)"
        else:
            found = resolve_weights(spec, weights=weights)
            say(f"loading {spec.name} from {found.where}")
            ids, provenance = token_windows(load_tokenizer(found), source, seq_len=seq_len, batch=windows)
            net = load_model(found, dtype=dtype, device=device)
            if spec.path is None:
                check_config(spec, net.config, where=found.where)
            where = found.where
    register_attention(swap)
    fwd = ModelForward(spec=spec, model=net, device=device, dtype=dtype, ids=ids.to(device), seq_len_q=s_q,
                       seq_len_kv=seq_len, random_weights=random_weights, weights=where, text=provenance, swap=swap)
    try:
        if s_q < seq_len:
            _open_cache(fwd, prompt=seq_len - s_q)
        say(f"reference pass ({fwd.label()}) with the model's own attention, recording every layer's q, k, v")
        swap.record = {}
        try:
            fwd.run()
            fwd.calibration = swap.record
        finally:
            swap.record = None
        missing = sorted(set(range(spec.num_layers)) - set(fwd.calibration))
        if missing:
            raise CaptureError(
                f"Layers {missing} of {spec.name} never called the attention interface, so a kernel cannot be swapped "
                f"into them; use a model whose transformers implementation supports attn_implementation='sdpa'.")
    except BaseException:
        fwd.close()
        raise
    return fwd


def _open_cache(fwd: ModelForward, *, prompt: int) -> None:
    """Read the first `prompt` tokens of each window into a static KV cache of S slots (the model's own attention),
    and keep what a step needs: the cache, the last N tokens and their positions."""
    import torch
    from transformers import StaticCache

    cache = StaticCache(config=fwd.model.config, max_cache_len=fwd.seq_len_kv)

    # transformers renames past_key_values to cache (5.24 warns about the old name); the cache is updated in place.
    name = "cache" if "cache" in inspect.signature(fwd.model.forward).parameters else "past_key_values"
    with torch.inference_mode():
        fwd.model(input_ids=fwd.ids[:, :prompt], **{name: cache}, use_cache=True, logits_to_keep=1)
    if not all(hasattr(layer, "cumulative_length") for layer in cache.layers):
        import transformers

        raise CaptureError(f"transformers {transformers.__version__}'s StaticCache keeps no per-layer write position "
                           f"(cumulative_length), so a decode step cannot be repeated on the same cache; in-model decode "
                           f"was written against transformers 5.25. The prefill (no --seq-len-q) does not need it.")
    positions = torch.arange(prompt, fwd.seq_len_kv, device=fwd.ids.device).unsqueeze(0).expand(fwd.ids.shape[0], -1)
    fwd._step = (cache, fwd.ids[:, prompt:].contiguous(), positions.contiguous(), prompt, name)

