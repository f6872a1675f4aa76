"""A plain attention function as a Kernel: `my_attn(q, k, v, causal=True, scale=None)` timed as written.

The calling convention is declared, never guessed from the values:
- positional q, k, v; the causal flag through a keyword named `is_causal` or `causal`, the softmax scale
  through `scale` or `softmax_scale`, GQA through `enable_gqa`: each found in the signature. A function
  without a causal keyword is run as torch SDPA runs without `is_causal`: non-causal only (`--no-causal`);
  one that computes causal attention without being told declares it (`@convention(causal=True)`); the
  gate checks either claim. One without a scale keyword is only given inputs whose scale is the default
  1/sqrt(dqk).
- layout `bhsd` (torch SDPA's [B, H, S, d], the default) or `bshd` (flash-attn's [B, S, H, d]): from
  `@convention(layout=...)`, a spec suffix `module:fn@bshd`, or `bench ... --layout` (`spec_with_options`).
- GQA: k, v with Hkv < Hq are passed as they are, unless the function declares it cannot take them
  (`@convention(gqa="expand")` or `@expand-gqa`): then prepare() repeats each KV head, untimed.
- FP8: `@fp8_inputs(...)` records the input quantization (e4m3, one power-of-two scale per tensor, as the
  bundled FP8 kernels declare it), so the gate compares against attention on the quantized inputs with
  the fp8 tolerance. `quantized_by="harness"` hands the function e4m3 tensors and `q_descale`,
  `k_descale`, `v_descale` floats; `"callable"` hands it the bf16 tensors and times its own quantization.
- serving workloads (docs/workloads.md, "Workloads"): the function receives what it names of `page_table` (or
  `block_table`, `block_tables`) [B, max_pages] int32, `kv_lens` (or `seq_lens`, vLLM's name, `cache_seqlens`,
  FlashAttention's, or `seqused_k`) [B] int32, `cu_seqlens_q` and `cu_seqlens_k` (or `cu_seqlens_kv`) [B + 1]
  int32, `max_seqlen_q` and `max_seqlen_k` (or `max_seqlen_kv`) ints, `window` (keys a query sees, or None) or
  `window_size` (FlashAttention's (left, right), (-1, -1) for none). Naming a page table declares it takes a
  paged cache (and, unless its default is None, that it needs one: without --page-size it is refused by that
  flag), `cu_seqlens_q` packed sequences of different lengths, `window`/`window_size` a sliding window; any
  callable may be given S_q < S_kv, its causal mask expected aligned to the end of the cache (FlashAttention's
  convention: torch SDPA's is_causal is not, and the gate says so). Pages are [num_pages, page_size, Hkv, d] in
  every layout.
- the decode layout of vLLM and FlashInfer (`layout="decode"`: q [B, Hq, d]; `"decode-bshd"`: q [B, 1, Hq, d];
  `_decode_layout`): one query per sequence, the cache paged or dense [B, S_kv, Hkv, d], the lengths by keyword
  (always given), the output in the same layout. Naming the lengths takes sequences of different lengths.
Decorators only record (an attribute on the function); nothing is imported or run.
>>> @convention(layout="bshd", causal=True)
... def attn(q, k, v, softmax_scale=None):
...     return q
>>> describe_convention(attn)
'attn(q, k, v, softmax_scale=...) layout bshd, causal only, GQA passed as is'
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable

from harness.errors import ConfigError, KernelError, UnsupportedInputError
from harness.kernels._callable_names import accepted_keywords, positional_workload_text
from harness.kernels._callable_spec import LAYOUTS
from harness.kernels._decode_layout import (
    DECODE_LAYOUTS,
    LENGTH_KW,
    PAGE_TABLE_KW,
    WORKLOAD_INTS,
    WORKLOAD_KW,
    decode_batch,
    workload_kwargs,
)
from harness.kernels._kernel import Kernel
from harness.kernels._quant import quantize_e4m3_pow2

__all__ = ["CALLABLE_SIGNATURE", "convention", "fp8_inputs", "adapt_callable", "describe_convention"]

_ATTR = "__harness_callable__"
_CAUSAL_KW = ("is_causal", "causal")
_SCALE_KW = ("scale", "softmax_scale")
_DESCALE_KW = ("q_descale", "k_descale", "v_descale")
_WORKLOAD_KW, _WORKLOAD_INTS = WORKLOAD_KW, WORKLOAD_INTS  # module docstring; `_decode_layout`

CALLABLE_SIGNATURE = (
    "A plain attention callable must look like `fn(q, k, v, *, is_causal=True, scale=None)` (torch SDPA's "
    "convention; `causal` and `softmax_scale` are accepted names too, `enable_gqa` is passed when present) and "
    "return the output tensor: q [B, Hq, S, dqk], k [B, Hkv, S, dqk], v [B, Hkv, S, dv] in, [B, Hq, S, dv] out. "
    "flash-attn's [B, S, H, d] layout is declared with `@harness.kernels.convention(layout=\"bshd\")`, a spec "
    "suffix `module:fn@bshd` or --layout bshd; a function that cannot take Hkv < Hq declares "
    "`convention(gqa=\"expand\")`; one without a causal keyword is run non-causal only (--no-causal) unless it "
    "declares `convention(causal=True)`; FP8 functions declare their input quantization with `@harness.kernels.fp8_inputs`."
)


def _record(fn, **values):
    if not callable(fn):
        raise TypeError(f"a harness.kernels decorator needs a callable, got {type(fn).__name__}")
    merged = {**getattr(fn, _ATTR, {}), **{k: v for k, v in values.items() if v is not None}}
    try:
        setattr(fn, _ATTR, merged)
    except AttributeError:  # a builtin or a slotted object: nowhere to record, so say so
        raise KernelError(f"Cannot record a calling convention on {fn!r}; wrap it in a def and decorate that.") from None
    return fn


def convention(*, layout: str | None = None, gqa: str | None = None, causal: bool | None = None,
               name: str | None = None, dtypes=None, devices=None, graph_safe: bool | None = None):
    """Decorator that records how the harness calls a plain attention function; returns it unchanged.

    `layout` "bhsd" or "bshd"; `gqa` "native" (k, v passed with Hkv < Hq) or "expand" (the harness
    repeats KV heads); `causal` fixes the one mode a function without a causal keyword computes;
    `name` the kernel name in tables when the function is passed as an object (a -k spec is named by the
    spec itself); `dtypes`/`devices` narrow what it is run on; `graph_safe=False`
    keeps its launches out of CUDA graphs.
    """
    if layout is not None and layout not in LAYOUTS:
        raise ConfigError(f"convention(layout={layout!r}): the layout is one of {', '.join(LAYOUTS)}.")
    if gqa is not None and gqa not in ("native", "expand"):
        raise ConfigError(f"convention(gqa={gqa!r}): gqa is 'native' (Hkv < Hq passed as is) or 'expand'.")
    return lambda fn: _record(fn, layout=layout, gqa=gqa, causal=causal, name=name, graph_safe=graph_safe,
                              dtypes=None if dtypes is None else frozenset(dtypes),
                              devices=None if devices is None else frozenset(devices))


def fp8_inputs(*, quant: str = "e4m3-pow2", quantized_by: str = "callable", p_mode: str | None = None,
               p_rel_error: float | None = None, **numerics):
    """Decorator that records an FP8 function's input quantization (as the bundled FP8 kernels declare it).

    `quant`: "e4m3-pow2" (e4m3, one power-of-two scale per tensor, `harness.kernels.quantize_e4m3_pow2`).
    `quantized_by`: "callable" (it gets bf16 q, k, v and quantizes them itself, inside the timed call) or
    "harness" (it gets e4m3 tensors and `q_descale`, `k_descale`, `v_descale` floats, quantized untimed).
    `p_mode`/`p_rel_error`: how P is rounded for the PV product, for `bench error` and the gate; with a
    p_mode of "exact" or "lean" the gate judges the function by these numerics, and `numerics` may name the
    rest of them (`p_scale` "block" or "row", `p_block`, `sigma`, `beta`, `mma_rel_error`; see
    `harness.kernels.Numerics`).
    """
    unknown = sorted(set(numerics) - _NUMERICS)
    if unknown:
        raise ConfigError(f"fp8_inputs({', '.join(unknown)}=...): not a declared numeric; the gate reads "
                          f"{', '.join(sorted(_NUMERICS))} (harness.kernels.Numerics).")
    if quant != "e4m3-pow2":
        raise ConfigError(f"fp8_inputs(quant={quant!r}): the one quantization the harness knows is 'e4m3-pow2'.")
    if quantized_by not in ("callable", "harness"):
        raise ConfigError(f"fp8_inputs(quantized_by={quantized_by!r}): 'callable' or 'harness'.")
    return lambda fn: _record(fn, fp8={"quant": quant, "quantized_by": quantized_by, "p_mode": p_mode,
                                       "p_rel_error": p_rel_error, **numerics})


_NUMERICS = frozenset({"p_scale", "p_block", "sigma", "beta", "mma_rel_error"})


@dataclass(frozen=True, kw_only=True)
class _Convention:
    layout: str
    gqa: str
    causal_kw: str | None
    fixed_causal: bool | None
    implied_causal: bool  # fixed_causal False because the signature has no causal keyword and nothing was declared
    scale_kw: str | None
    gqa_kw: bool
    fp8: dict | None
    params: tuple[str, ...]
    workload_kw: tuple[str, ...] = ()  # the workload keywords in its signature
    needs_pages: bool = False  # it names a page table without a default of None: a dense cache is refused

    @property
    def decode(self) -> bool:
        return self.layout in DECODE_LAYOUTS

    @property
    def workloads(self) -> frozenset[str]:
        kws = set(self.workload_kw)
        # sequences of different lengths: packed queries (cu_seqlens_q), or in the decode layout the lengths
        varlen = "cu_seqlens_q" in kws or (self.decode and bool(kws & set(LENGTH_KW)))
        # Dense, S_q < S_kv and MLA's latent cache (v a view of k) arrive as q, k, v alone; the gate judges each.
        return frozenset({"decode", "mla"} | ({"paged"} if kws & set(PAGE_TABLE_KW) else set())
                         | ({"varlen"} if varlen else set())
                         | ({"window"} if kws & {"window", "window_size"} else set()))


def _parameters(fn) -> list[inspect.Parameter] | None:
    F = sys.modules.get("torch.nn.functional")  # never imported here: if torch is not loaded, fn is not SDPA
    if F is not None and fn is getattr(F, "scaled_dot_product_attention", None):  # a builtin without a signature, known by heart
        P = inspect.Parameter
        return [P(n, P.POSITIONAL_OR_KEYWORD) for n in ("query", "key", "value")] + [
            P(n, P.KEYWORD_ONLY, default=d) for n, d in (("is_causal", False), ("scale", None), ("enable_gqa", False))]
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def _misfit(what: str, why: str) -> KernelError:
    return KernelError(f"{what} cannot be called as attention: {why}. {CALLABLE_SIGNATURE}")


def _convention(fn, what: str, options: dict) -> _Convention:
    declared = {**getattr(fn, _ATTR, {}), **options}
    params = _parameters(fn)
    if params is None:
        raise _misfit(what, "its signature cannot be read (a builtin?); wrap it in a def with named parameters")
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    if len(positional) < 3 and not any(p.kind is P.VAR_POSITIONAL for p in params):
        names = ", ".join(p.name for p in positional) or "none"
        raise _misfit(what, f"it takes {len(positional)} positional parameter(s) ({names}), not q, k, v")
    fp8 = declared.get("fp8")
    known = set(_CAUSAL_KW + _SCALE_KW + ("enable_gqa",) + tuple(_WORKLOAD_KW) + _WORKLOAD_INTS) | (
        set(_DESCALE_KW) if fp8 else set())
    required = [p.name for p in params[3:] if p.default is P.empty and p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)
                and p.name not in known]
    if required:
        raise _misfit(what, f"it requires parameter(s) {', '.join(required)}, which are not among the names the harness "
                            f"passes ({accepted_keywords()})")
    by_position = [p.name for p in positional[3:] if p.default is P.empty and p.name in known]  # passed only by name
    if by_position:
        raise KernelError(positional_workload_text(what, by_position, fn_name=getattr(fn, "__name__", "fn")))
    causal_kw = next((n for n in _CAUSAL_KW if n in keywords), None)
    fixed = declared.get("causal")
    # No keyword and nothing declared: what torch SDPA computes when is_causal is not passed. Not a guess the
    # numbers rest on: the gate compares it with non-causal attention, so a function that masks fails there.
    implied = causal_kw is None and fixed is None
    if fp8 and fp8["quantized_by"] == "harness":
        missing = [n for n in _DESCALE_KW if n not in keywords]
        if missing:
            raise _misfit(what, f"it is declared fp8_inputs(quantized_by='harness') but has no {', '.join(missing)} "
                                f"keyword(s) to receive the descales")
    layout = declared.get("layout", "bhsd")
    if layout not in LAYOUTS:
        raise ConfigError(f"{what}: layout {layout!r} is not one of {', '.join(LAYOUTS)}.")
    decode = layout in DECODE_LAYOUTS
    packed = sorted(keywords & {"cu_seqlens_q", "cu_seqlens_k", "cu_seqlens_kv"})
    if decode and packed:
        raise ConfigError(f"{what}: layout {layout} hands over one query per sequence (q [B, Hq, d]) and the lengths "
                          f"by keyword, so {', '.join(packed)} would mean nothing; drop them, or declare layout bhsd "
                          f"for packed sequences.")
    pages = next((p for p in params if p.name in PAGE_TABLE_KW), None)
    if decode:  # one query per sequence: causal and non-causal attention are the same call, so no mode is implied
        implied = False
    return _Convention(layout=layout, gqa=declared.get("gqa", "native"), causal_kw=causal_kw,
                       fixed_causal=None if causal_kw or (decode and fixed is None) else bool(fixed),
                       implied_causal=implied, scale_kw=next((n for n in _SCALE_KW if n in keywords), None),
                       gqa_kw="enable_gqa" in keywords, fp8=fp8, params=tuple(p.name for p in params),
                       workload_kw=tuple(n for n in (*_WORKLOAD_KW, *_WORKLOAD_INTS) if n in keywords),
                       needs_pages=pages is not None and pages.default is not None)


def describe_convention(fn, **options) -> str:
    """One line: how the harness will call `fn` (for `bench list`, errors and docs)."""
    c = _convention(fn, getattr(fn, "__qualname__", repr(fn)), options)
    kws = [k for k in (c.causal_kw, c.scale_kw) if k] + (["enable_gqa"] if c.gqa_kw else []) + list(c.workload_kw)
    call = f"{getattr(fn, '__name__', type(fn).__name__)}(q, k, v" + "".join(f", {k}=..." for k in kws) + ")"
    causal = "" if c.fixed_causal is None else (", causal only" if c.fixed_causal else
                                                ", non-causal only (no causal keyword)" if c.implied_causal else
                                                ", non-causal only")
    gqa = "GQA passed as is" if c.gqa == "native" else "GQA expanded by the harness"
    fp8 = f", fp8 inputs quantized by the {c.fp8['quantized_by']}" if c.fp8 else ""
    return f"{call} layout {c.layout}{causal}, {gqa}{fp8}"


def _source(fn) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


def adapt_callable(fn: Callable, *, name: str | None = None, options: dict | None = None) -> Kernel:
    """A `Kernel` whose prepare(inputs) returns the closure `lambda: fn(q, k, v, **keywords)`.

    The convention is read (and a misfit refused, naming the signature it must have) here, once;
    tensors in another layout, expanded KV heads and harness-side FP8 quantization are made in prepare(),
    so only the function's own call is timed (captured into the CUDA graph like any other kernel).
    """
    options = dict(options or {})
    label = name or getattr(fn, _ATTR, {}).get("name") or _source(fn)
    c = _convention(fn, f"Kernel {label!r} ({_source(fn)})", options)
    declared = {**getattr(fn, _ATTR, {}), **options}
    copies = c.layout != "bhsd" or c.gqa == "expand" or c.fp8 is not None

    def prepare(inputs):
        import torch

        s = inputs.shape
        if c.needs_pages and not s.paged:  # check_supports refuses this up front; a direct prepare() too
            raise UnsupportedInputError(_needs_pages_text(label))
        batch = decode_batch(inputs, layout=c.layout) if c.decode else None
        q, k, v = (batch.q, batch.k, batch.v) if batch is not None else (inputs.q, inputs.k, inputs.v)
        kwargs: dict[str, Any] = workload_kwargs(c.workload_kw, inputs, batch=batch)
        if c.gqa == "expand" and s.heads_q != s.heads_kv:
            group = s.heads_q // s.heads_kv
            heads = 2 if s.paged or c.decode else 1  # pages [num_pages, page_size, Hkv, d], decode [B, S, Hkv, d]
            k, v = k.repeat_interleave(group, dim=heads), v.repeat_interleave(group, dim=heads)
        elif c.gqa_kw:
            kwargs["enable_gqa"] = s.heads_q != s.heads_kv
        if c.fp8 is not None and c.fp8["quantized_by"] == "harness":
            (q, dq), (k, dk), (v, dv) = (quantize_e4m3_pow2(t) for t in (q, k, v))
            kwargs.update(q_descale=dq, k_descale=dk, v_descale=dv)
        if c.layout == "bshd":
            q = q.transpose(1, 2).contiguous()
            if not s.paged:
                k, v = (t.transpose(1, 2).contiguous() for t in (k, v))
        if c.causal_kw:
            kwargs[c.causal_kw] = s.causal
        elif c.fixed_causal is not None and c.fixed_causal != s.causal:
            raise UnsupportedInputError(f"Kernel {label!r} computes {'causal' if c.fixed_causal else 'non-causal'} "
                                        f"attention only ({'no causal keyword' if c.implied_causal else 'declared'}); "
                                        f"this input is {'causal' if s.causal else 'not causal'}.")
        if c.scale_kw:
            kwargs[c.scale_kw] = inputs.scale
        elif abs(inputs.scale - s.head_dim_qk ** -0.5) > 1e-9 * inputs.scale:
            raise UnsupportedInputError(f"Kernel {label!r} takes no `scale` keyword, so it can only be given the default "
                                        f"scale 1/sqrt({s.head_dim_qk}); this input's scale is {inputs.scale:g}.")
        back = c.layout == "bshd"

        def launch():
            out = fn(q, k, v, **kwargs)
            if batch is not None:
                return batch.to_output(out)
            return out.transpose(1, 2) if back else out

        with torch.no_grad():  # fail here, in setup, rather than inside a timed loop
            first = fn(q, k, v, **kwargs)
        if not isinstance(first, torch.Tensor):
            raise KernelError(f"Kernel {label!r} returned {type(first).__name__}, not the output tensor. "
                              f"{CALLABLE_SIGNATURE}")
        if back and first.dim() != 4:
            raise KernelError(f"Kernel {label!r} (layout bshd) returned a {first.dim()}-D tensor of shape "
                              f"{tuple(first.shape)}; a [B, S, H, dv] output is expected. {CALLABLE_SIGNATURE}")
        want = (s.batch, s.heads_q, s.head_dim_v) if c.layout == "decode" else (s.batch, 1, s.heads_q, s.head_dim_v)
        if batch is not None and tuple(first.shape) != want:
            raise KernelError(f"Kernel {label!r} (layout {c.layout}) returned shape {tuple(first.shape)}; {list(want)} "
                              f"is expected (one query per sequence). {CALLABLE_SIGNATURE}")
        return launch

    fp8 = c.fp8
    if fp8 is not None and c.decode:
        raise ConfigError(f"Kernel {label!r} declares FP8 inputs and the decode layout: the gate judges FP8 kernels on "
                          f"dense self-attention only.")
    if fp8 is not None and c.workloads - {"decode", "mla"}:
        raise ConfigError(f"Kernel {label!r} declares FP8 inputs and takes {', '.join(sorted(c.workloads - {'decode', 'mla'}))}: "
                          f"the gate judges FP8 kernels on dense self-attention only.")
    extra: dict[str, Any] = {"callable": _source(fn), "layout": c.layout, "gqa": c.gqa,
                             "convention": describe_convention(fn, **options),
                             # what the workload must have (Kernel.check_supports refuses it up front, by flag)
                             **({"requires": ["paged"]} if c.needs_pages else {}),
                             **({"queries_per_sequence": 1} if c.decode else {}),
                             **({"causal_mode": "implied"} if c.implied_causal else {}),
                             # copies made in prepare() do not follow in-place changes of inputs.q/k/v
                             "reads_inputs_at_launch": not copies}
    if fp8:
        extra["quant"] = fp8["quant"]
        extra.update({k: v for k, v in fp8.items() if k not in ("quant", "quantized_by") and v is not None})
    default_dtypes = {"bfloat16", "float16"} if fp8 else {"bfloat16", "float16", "float32", "float64"}
    doc = (getattr(fn, "__doc__", None) or "").strip().split("\n")[0]
    return Kernel(
        name=label, prepare=prepare, dtypes=frozenset(declared.get("dtypes") or default_dtypes),
        devices=frozenset(declared.get("devices") or {"cpu", "cuda", "rocm"}),
        graph_safe=declared.get("graph_safe", True), causal_only=c.fixed_causal is True,
        noncausal_only=c.fixed_causal is False, tolerance="fp8" if fp8 else None,
        output_dtype="bfloat16" if fp8 else None, source=_source(fn), description=doc or extra["convention"],
        extra=extra, workloads=frozenset() if fp8 else c.workloads,
    )


def _needs_pages_text(label: str) -> str:
    return (f"Kernel {label!r} names a page table with no default of None, so it needs a paged KV cache (without "
            f"one it would be called with page_table=None). Give --page-size P (e.g. --page-size 16); if it also takes "
            f"a dense cache, give that parameter the default None.")
