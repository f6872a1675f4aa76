"""The model-level error of an attention kernel: the model run over real documents with its attention
replaced by the kernel, in every layer and in one layer at a time, against the same model with fp64
reference attention; per token, the KL divergence of the next-token distribution and whether the top-1
token agrees (`bench error --model`).

The reference run computes every layer's attention in fp64 (`harness.kernels.reference_attention` on the
q, k, v the model hands over, the output cast back to the model's dtype) and records each decoder layer's
input. A run with the kernel in layer L alone starts there, from the recorded input of layer L (layers
below it are the reference run's, bit for bit), so the per-layer sweep costs about half the forwards of
running every layer again. Kernels get the q, k, v in bf16 (their dtype in a served model); `floor` is a
second correct BF16 kernel, whose divergence from the reference is the noise floor a kernel is read
against. With `reference` a BF16 kernel instead (ZYFA's way, `--reference`), the reference model is the model
with that kernel's attention and the floor's divergence from it is the band of two correct BF16 kernels. Each
row also keeps dNLL per token: the text's next token's negative log-likelihood under the kernel's model minus
under the reference's. Rows (one per kernel x scope x document, every token's figures kept) go to the run's
`model_error` table; `harness.analysis.model_error_summary` bootstraps them over documents.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from harness.capture._device import default_capture_dtype, torch_device_name
from harness.capture._hook import register_attention
from harness.capture._model_error_run import finish_run, open_run
from harness.capture._model_io import (
    build_random,
    load_model,
    load_tokenizer,
    parse_gguf_once,
    quiet_transformers,
    release_device,
)
from harness.capture._models import resolve_model
from harness.capture._text import DEFAULT_TEXT, document_windows, load_text
from harness.capture._weights import resolve_weights
from harness.errors import CaptureError, ConfigError, UnsupportedInputError
from harness.inputs import AttentionInputs, AttentionShape
from harness.kernels import reference_attention

__all__ = ["ModelErrorConfig", "ModelErrorResult", "model_error", "SUFFIX_MODEL_TYPES"]

# Decoder stacks whose forward passes `inputs_embeds` to its layers unchanged and picks each layer's mask
# from the layer itself, so a run can start at layer L from that layer's recorded input (checked in the
# tests: the suffix run with reference attention reproduces the reference logits exactly).
SUFFIX_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "deepseek_v2"})
KERNEL_DTYPE = "bfloat16"


@dataclass(frozen=True, kw_only=True)
class ModelErrorConfig:
    """One model-error run: which model over which documents, which per-layer scopes, where it is written.

    `layers`: the layers replaced one at a time (each a scope of its own); `all_layers`: also the scope
    with the kernel in every layer. `batch`: documents per forward pass. `dtype` None: bf16 on a GPU, fp32
    on the CPU (the model's non-attention computation; kernels always get bf16 q, k, v).
    """

    model: object = "smollm2-135m"  # a registered name, a local path, or a ModelSpec
    text: str = DEFAULT_TEXT
    weights: Path | None = None
    seq_len: int = 1024
    documents: int = 24
    batch: int = 8
    layers: tuple[int, ...] = ()
    all_layers: bool = True
    device: str = "cpu"
    dtype: str | None = None
    random_weights: bool = False
    seed: int = 0
    reference: str = "fp64"  # the reference model's attention: "fp64", or the name of a BF16 kernel (ZYFA's band)
    results_root: Path = Path("results")
    run_name: str | None = None
    command: str = ""

    def __post_init__(self) -> None:
        for name in ("seq_len", "documents", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}.")
        if self.documents < 2:
            raise ConfigError(f"--documents {self.documents}: a bootstrap over documents needs at least 2.")
        if not self.layers and not self.all_layers:
            raise ConfigError("Nothing to replace: give --layer, or keep the scope with the kernel in every layer.")
        if self.dtype is None:
            object.__setattr__(self, "dtype", default_capture_dtype(self.device))
        object.__setattr__(self, "layers", tuple(sorted(set(self.layers))))


@dataclass(kw_only=True)
class ModelErrorResult:
    run_id: str
    path: Path
    info: dict
    rows: list[dict] = field(default_factory=list)  # the kernels that ran through; a failed kernel's are left out
    provenance: dict = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # kernel name -> why it failed (its row's text)


class KernelFailed(Exception):
    """A kernel failed inside the model's forward: that kernel's row, never the end of the run."""

    def __init__(self, kernel, layer: int, exc: BaseException | None, text: str = "") -> None:
        self.kernel, self.layer = kernel, layer
        if exc is not None:
            tb = traceback.extract_tb(exc.__traceback__)
            at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
            if isinstance(exc, SystemExit):
                text = f"called sys.exit({'' if exc.code is None else repr(exc.code)}){at}"
            else:
                text = f"raised {type(exc).__name__}: {exc}{at}"
        super().__init__(text)


class _Attention:
    """The attention function every layer calls: fp64 reference attention, or the planned kernel."""

    def __init__(self, spec_name: str, default=None):
        self.kernels: dict[int, object] = {}  # layer -> Kernel; other layers use the reference
        self.default = default  # the reference's kernel (None: fp64 reference attention)
        self.model = spec_name
        self.calls = 0

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        import torch

        if attention_mask is not None:
            raise CaptureError(
                f"Layer {module.layer_idx} of {self.model} attends with an explicit mask (sliding window, padding "
                f"or a non-causal pattern); the model error replaces plain causal attention only.")
        self.calls += 1
        scale = kwargs.get("scaling")
        scale = float(scale) if scale is not None else query.shape[-1] ** -0.5
        kernel = self.kernels.get(module.layer_idx, self.default)
        if kernel is None:
            out = reference_attention(query, key, value, scale=scale, causal=True, out_dtype=query.dtype)
        else:
            B, Hq, S, dqk = query.shape
            shape = AttentionShape(batch=B, heads_q=Hq, heads_kv=key.shape[1], seq_len=S, head_dim_qk=dqk,
                                   head_dim_v=value.shape[-1], causal=True)
            dt = getattr(torch, KERNEL_DTYPE)
            x = AttentionInputs(q=query.to(dt).contiguous(), k=key.to(dt).contiguous(), v=value.to(dt).contiguous(),
                                shape=shape, dtype=KERNEL_DTYPE, source=f"{self.model} layer {module.layer_idx}",
                                scale=scale)
            try:
                out = kernel.prepare(x)()
            except KeyboardInterrupt:  # Ctrl-C or a stop signal (RunStopped): the run's, not the kernel's
                raise
            except BaseException as exc:  # noqa: BLE001 - its error, sys.exit included, is its row
                raise KernelFailed(kernel, module.layer_idx, exc) from None
            if not isinstance(out, torch.Tensor) or tuple(out.shape) != (B, Hq, S, value.shape[-1]):
                got = f"shape {list(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
                raise KernelFailed(kernel, module.layer_idx, None,
                                   f"returned {got}; the attention output of {shape.label()} is "
                                   f"{[B, Hq, S, value.shape[-1]]}")
            out = out.to(query.dtype)
        return out.transpose(1, 2).contiguous(), None


def _check_kernels(kernels: Sequence, spec, device_kind: str, *, floor=None) -> None:
    for k in kernels:
        try:
            k.check_supports(dtype=KERNEL_DTYPE, head_dim_qk=spec.head_dim_qk, head_dim_v=spec.head_dim_v,
                             causal=True, device_kind=device_kind)
        except UnsupportedInputError as exc:
            if floor is not None and k is floor:  # name the flag that chose it
                raise UnsupportedInputError(f"--floor {k.name!r}: {exc} Pick another --floor.") from None
            raise


def _logits(model, decoder, attention: _Attention, *, ids=None, start: int = 0, hidden=None):
    """The LM head's logits of one forward: from the token ids, or from layer `start`'s recorded input."""
    import torch

    with torch.inference_mode():
        if hidden is None:
            out = decoder(input_ids=ids, use_cache=False)
        else:
            layers = decoder.layers
            decoder.layers = torch.nn.ModuleList(list(layers)[start:])
            try:
                out = decoder(inputs_embeds=hidden, use_cache=False)
            finally:
                decoder.layers = layers
        return model.lm_head(out.last_hidden_state).float()


# fp64 elements of one slice of the token figures (0.5 GiB a tensor): the whole of 8 documents of 8192 tokens over
# SmolLM2's 49152-token vocabulary is 24 GiB a tensor in fp64, four of them at once, and ran out of the H200's memory.
TOKEN_SLICE_ELEMENTS = 1 << 26


def _token_figures(ref_logits, logits, ids=None, *, slice_elements: int = TOKEN_SLICE_ELEMENTS):
    """Per token (all fp64): KL(reference || kernel) of the next-token distribution, top-1 agreement, and (with the
    token `ids`) dNLL: -log p_kernel(next token) + log p_reference(next token), for every position but the last.
    Computed over slices of positions of at most `slice_elements` logits each, so that memory stays flat."""
    import torch

    B, S, V = ref_logits.shape
    step = max(1, slice_elements // max(V, 1))
    kl = torch.empty(B, S, dtype=torch.float64)
    top1 = torch.empty(B, S, dtype=torch.bool)
    dnll = torch.empty(B, max(S - 1, 0), dtype=torch.float64)
    for b in range(B):
        for s0 in range(0, S, step):
            s1 = min(S, s0 + step)
            ref = torch.log_softmax(ref_logits[b, s0:s1].double(), -1)
            got = torch.log_softmax(logits[b, s0:s1].double(), -1)
            kl[b, s0:s1] = (ref.exp() * (ref - got)).sum(-1).clamp_min(0.0).cpu()  # >= 0 up to rounding
            top1[b, s0:s1] = (ref.argmax(-1) == got.argmax(-1)).cpu()
            last = min(s1, S - 1)  # the last position has no next token
            if ids is not None and last > s0:
                nxt = ids[b, s0 + 1:last + 1].to(ref.device).unsqueeze(-1)
                dnll[b, s0:last] = (ref[:last - s0].gather(-1, nxt) - got[:last - s0].gather(-1, nxt)).squeeze(-1).cpu()
            del ref, got
    if ids is None:
        return kl, top1
    return kl, top1, dnll


def model_error(config: ModelErrorConfig, *, kernels: Sequence, floor, reference=None,
                progress=None) -> ModelErrorResult:
    """Run the model-error measurement (see module doc) and write it as a run under `config.results_root`.

    `kernels`: the kernels under test; `floor`: the second correct BF16 kernel (its rows have role
    "floor"); `reference`: the BF16 kernel whose model the others are compared with (ZYFA's way: the floor's
    KL is then the band of two correct BF16 kernels), None for the model with fp64 attention.
    `progress(text)` is called before each step (None: silent). Every kernel is checked against
    the model's attention shape before the model is loaded."""

    say = progress or (lambda text: None)
    spec = resolve_model(config.model)
    bad = [layer for layer in config.layers if not 0 <= layer < spec.num_layers]
    if bad:
        raise ConfigError(f"--layer {', '.join(map(str, bad))}: {spec.name} has layers 0 to {spec.num_layers - 1}.")
    device = torch_device_name(config.device)
    kind = device.partition(":")[0]
    runs = [(floor, "floor")] + [(k, "kernel") for k in kernels if k.name != floor.name]
    _check_kernels([k for k, _ in runs] + ([reference] if reference is not None else []), spec, kind, floor=floor)
    if config.reference != ("fp64" if reference is None else reference.name):
        raise ConfigError(f"The run records reference {config.reference!r} but is given "
                          f"{'fp64 attention' if reference is None else reference.name}: build both from one --reference.")
    if reference is not None and reference.name == floor.name:
        raise ConfigError(f"--reference {reference.name} is also the floor: the band needs two different BF16 "
                          f"kernels. Give --floor another one.")
    source = load_text(config.text)
    run = open_run(config, spec, [k for k, _ in runs], device=device)
    t0 = time.perf_counter()
    rows: list[dict] = []
    failures: dict[str, str] = {}
    status, detail = "failed", "stopped before the first document batch"
    try:
        with quiet_transformers(), parse_gguf_once():
            say(f"loading {spec.name}")
            if config.random_weights:
                tokenizer, weights = None, None
                model = build_random(spec, dtype=config.dtype, device=device, seed=config.seed)
            else:
                weights = resolve_weights(spec, weights=config.weights)
                tokenizer = load_tokenizer(weights)
                model = load_model(weights, dtype=config.dtype, device=device)
        ids, text_provenance = document_windows(tokenizer, source, seq_len=config.seq_len, count=config.documents)
        attention = _Attention(spec.name, default=reference)
        register_attention(attention)
        decoder = getattr(model, "base_model", model)
        suffix = getattr(model.config, "model_type", "") in SUFFIX_MODEL_TYPES
        scopes = ([("all", None)] if config.all_layers else []) + [("layer", layer) for layer in config.layers]
        run.provenance.update(text=text_provenance, weights=getattr(weights, "where", "random weights"),
                              suffix_runs=suffix)
        for b0 in range(0, config.documents, config.batch):
            batch = ids[b0: b0 + config.batch].to(device)
            say(f"documents {b0 + 1}-{b0 + len(batch)} of {config.documents}: reference "
                f"({'fp64 attention' if reference is None else reference.name})")
            attention.kernels = {}
            inputs_of: dict[int, object] = {}
            hooks = [layer.register_forward_pre_hook(_recorder(inputs_of, i))
                     for i, layer in enumerate(decoder.layers)] if suffix and config.layers else []
            try:
                ref = _logits(model, decoder, attention, ids=batch)
            finally:
                for h in hooks:
                    h.remove()
            for kernel, role in runs:
                for scope, layer in scopes:
                    if kernel.name in failures:
                        break
                    where = 'every layer' if layer is None else f'layer {layer}'
                    say(f"documents {b0 + 1}-{b0 + len(batch)}: {kernel.name} in {where}")
                    attention.kernels = ({i: kernel for i in range(spec.num_layers)} if layer is None
                                         else {layer: kernel})
                    try:
                        if layer is not None and suffix:
                            logits = _logits(model, decoder, attention, start=layer, hidden=inputs_of[layer])
                        else:
                            logits = _logits(model, decoder, attention, ids=batch)
                    except KernelFailed as exc:
                        gqa = (f" {spec.name} has {spec.heads_q} query heads and {spec.heads_kv} KV heads: a function "
                               f"that needs as many KV heads as query heads says so with @expand-gqa (or --gqa "
                               f"expand), one that takes fewer with an enable_gqa keyword."
                               if spec.heads_q != spec.heads_kv and "size of tensor" in str(exc) else "")
                        failures[kernel.name] = (
                            f"Kernel {kernel.name!r} (attention replaced in {where}) failed in layer {exc.layer} of "
                            f"{spec.name} on documents {b0 + 1}-{b0 + len(batch)}: it {exc}.{gqa} It is not measured; "
                            f"the other kernels went on.")
                        say(failures[kernel.name])
                        break
                    kl, top1, dnll = _token_figures(ref, logits, batch)
                    for j in range(len(batch)):
                        rows.append(_row(kernel, role, scope, layer, b0 + j, text_provenance["documents"][b0 + j],
                                         kl[j], top1[j], config, dnll=dnll[j]))
            run.write(rows[len(run.written_rows):])
            del ref, inputs_of
        run.provenance["failures"] = failures
        measured = {r["kernel"] for r in rows} - set(failures)
        if not measured:
            status, detail = "failed", f"nothing measured: every kernel failed ({'; '.join(failures.values())})"
        else:
            status = "complete"
            detail = f"{len(failures)} kernel(s) failed: {', '.join(failures)}" if failures else ""
        register_attention()
        del model
        release_device(device)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal the caller turned into RunStopped
        name = getattr(exc, "signal_name", "SIGINT (Ctrl-C)")
        status, detail = "incomplete", f"stopped by {name}; the {len(run.written_rows)} rows of finished documents are kept"
        raise
    except BaseException as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run.provenance["seconds"] = round(time.perf_counter() - t0, 1)
        finish_run(run, status, detail)
    return ModelErrorResult(run_id=run.run_id, path=run.path, info=run.info, provenance=run.provenance,
                            rows=[r for r in rows if r["kernel"] not in failures], failures=failures)


def _recorder(into: dict, index: int):
    """A forward pre-hook keeping decoder layer `index`'s input hidden states (its first argument)."""

    def hook(module, args):
        into[index] = args[0].detach()

    return hook


def _row(kernel, role, scope, layer, doc, meta, kl, top1, config, *, dnll) -> dict:
    import torch

    kl = kl.to(torch.float32)  # what the table keeps (results schema), so rows in memory and on disk agree
    dnll = dnll.to(torch.float32)
    n = int(kl.numel())
    return {
        "kernel": kernel.name, "kernel_source": kernel.source, "role": role, "scope": scope, "layer": layer,
        "document": doc, "document_index": meta["index"], "document_title": meta["title"], "tokens": n,
        "kl_mean_nats": float(kl.double().mean()) if n else None, "kl_max_nats": float(kl.max()) if n else None,
        "top1_agreement": float(top1.double().mean()) if n else None, "kl_nats": kl.tolist(),
        "top1_match": top1.tolist(), "kernel_dtype": KERNEL_DTYPE, "seq_len": config.seq_len,
        "reference": config.reference, "dnll_mean_nats": float(dnll.double().mean()) if dnll.numel() else None,
        "dnll_nats": dnll.tolist(),
    }
