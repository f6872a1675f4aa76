"""A plain attention function as a Kernel: `my_attn(q, k, v, causal=True, scale=None)` timed as written.

The calling convention is declared, never guessed from the values:
- positional q, k, v; the causal flag through a keyword named `is_causal` or `causal`, the softmax scale
  through `scale` or `softmax_scale`, GQA through `enable_gqa`: each found in the signature. A function
  without a causal keyword is run as torch SDPA runs without `is_causal`: non-causal only (`--no-causal`);
  one that computes causal attention without being told declares it (`@convention(causal=True)`); the
  gate checks either claim. One without a scale keyword is only given inputs whose scale is the default
  1/sqrt(dqk).
- layout `bhsd` (torch SDPA's [B, H, S, d], the default) or `bshd` (flash-attn's [B, S, H, d]): from
  `@convention(layout=...)`, a spec suffix `module:fn@bshd`, or `bench ... --layout` (`with_options`).
- GQA: k, v with Hkv < Hq are passed as they are, unless the function declares it cannot take them
  (`@convention(gqa="expand")` or `@expand-gqa`): then prepare() repeats each KV head, untimed.
- FP8: `@fp8_inputs(...)` records the input quantization (e4m3, one power-of-two scale per tensor, as the
  bundled FP8 kernels declare it), so the gate compares against attention on the quantized inputs with
  the fp8 tolerance. `quantized_by="harness"` hands the function e4m3 tensors and `q_descale`,
  `k_descale`, `v_descale` floats; `"callable"` hands it the bf16 tensors and times its own quantization.
- serving workloads (README: "Workloads"): the function receives what it names of `page_table` [B, max_pages]
  int32, `kv_lens` (or `cache_seqlens`, FlashAttention's name, or `seqused_k`) [B] int32, `cu_seqlens_q` and
  `cu_seqlens_k` (or `cu_seqlens_kv`) [B + 1] int32, `max_seqlen_q` and `max_seqlen_k` (or `max_seqlen_kv`)
  ints, `window` (keys a query sees, or None) or `window_size` (FlashAttention's (left, right), (-1, -1) for
  none). Naming `page_table` declares it takes a paged cache, `cu_seqlens_q` packed sequences of different
  lengths, `window`/`window_size` a sliding window; any callable may be given S_q < S_kv, its causal mask
  expected aligned to the end of the cache (FlashAttention's convention: torch SDPA's is_causal is not, and
  the gate says so). Pages are [num_pages, page_size, Hkv, d] in either layout.
Decorators only record (an attribute on the function); nothing is imported or run.
>>> @convention(layout="bshd", causal=True)
... def attn(q, k, v, softmax_scale=None):
...     return q
>>> describe_convention(attn)
'attn(q, k, v, softmax_scale=...) layout bshd, causal only, GQA passed as is'
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.errors import ConfigError, KernelError, UnknownKernelError, UnsupportedInputError
from harness.kernels._kernel import Kernel

__all__ = ["SPEC_OPTIONS", "LAYOUTS", "CALLABLE_SIGNATURE", "convention", "fp8_inputs", "adapt_callable", "describe_convention",
           "split_spec", "with_options", "apply_options", "load_target", "CallableSpec"]

LAYOUTS = ("bhsd", "bshd")
_ATTR = "__harness_callable__"
_CAUSAL_KW = ("is_causal", "causal")
_SCALE_KW = ("scale", "softmax_scale")
_DESCALE_KW = ("q_descale", "k_descale", "v_descale")
# Workload keywords: what the function names of them it receives (module docstring), by the inputs' names.
_WORKLOAD_KW = {"page_table": "page_table", "kv_lens": "kv_lens", "cache_seqlens": "kv_lens", "seqused_k": "kv_lens",
                "cu_seqlens_q": "cu_seqlens_q", "cu_seqlens_k": "cu_seqlens_kv", "cu_seqlens_kv": "cu_seqlens_kv"}
_WORKLOAD_INTS = ("max_seqlen_q", "max_seqlen_k", "max_seqlen_kv", "window", "window_size")
_SPEC_OPTIONS = {"bhsd": ("layout", "bhsd"), "bshd": ("layout", "bshd"), "expand-gqa": ("gqa", "expand"),
                 "native-gqa": ("gqa", "native")}
SPEC_OPTIONS = tuple(_SPEC_OPTIONS)  # what may follow `@` in a callable spec

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

    @property
    def workloads(self) -> frozenset[str]:
        kws = set(self.workload_kw)
        return frozenset({"decode"} | ({"paged"} if "page_table" in kws else set())
                         | ({"varlen"} if "cu_seqlens_q" in kws else set())
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
    required += [p.name for p in positional[3:] if p.default is P.empty and p.name in known]  # only as keywords
    if required:
        raise _misfit(what, f"it requires parameter(s) {', '.join(required)} the harness cannot supply")
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
    return _Convention(layout=layout, gqa=declared.get("gqa", "native"), causal_kw=causal_kw,
                       fixed_causal=None if causal_kw else bool(fixed), implied_causal=implied, scale_kw=next((n for n in _SCALE_KW if n in keywords), None),
                       gqa_kw="enable_gqa" in keywords, fp8=fp8, params=tuple(p.name for p in params),
                       workload_kw=tuple(n for n in (*_WORKLOAD_KW, *_WORKLOAD_INTS) if n in keywords))


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
        q, k, v = inputs.q, inputs.k, inputs.v
        kwargs: dict[str, Any] = _workload_kwargs(c, inputs)
        if c.gqa == "expand" and s.heads_q != s.heads_kv:
            group = s.heads_q // s.heads_kv
            heads = 2 if s.paged else 1  # pages are [num_pages, page_size, Hkv, d]
            k, v = k.repeat_interleave(group, dim=heads), v.repeat_interleave(group, dim=heads)
        elif c.gqa_kw:
            kwargs["enable_gqa"] = s.heads_q != s.heads_kv
        if c.fp8 is not None and c.fp8["quantized_by"] == "harness":
            from harness.kernels._quant import quantize_e4m3_pow2

            (q, dq), (k, dk), (v, dv) = (quantize_e4m3_pow2(t) for t in (q, k, v))
            kwargs.update(q_descale=dq, k_descale=dk, v_descale=dv)
        if c.layout == "bshd":
            q = q.transpose(1, 2).contiguous()
            if not s.paged:
                k, v = (t.transpose(1, 2).contiguous() for t in (k, v))
        if c.causal_kw:
            kwargs[c.causal_kw] = s.causal
        elif c.fixed_causal != s.causal:
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
            return out.transpose(1, 2) if back else out

        with torch.no_grad():  # fail here, in setup, rather than inside a timed loop
            first = fn(q, k, v, **kwargs)
        if not isinstance(first, torch.Tensor):
            raise KernelError(f"Kernel {label!r} returned {type(first).__name__}, not the output tensor. "
                              f"{CALLABLE_SIGNATURE}")
        if back and first.dim() != 4:
            raise KernelError(f"Kernel {label!r} (layout bshd) returned a {first.dim()}-D tensor of shape "
                              f"{tuple(first.shape)}; a [B, S, H, dv] output is expected. {CALLABLE_SIGNATURE}")
        return launch

    fp8 = c.fp8
    if fp8 is not None and c.workloads - {"decode"}:
        raise ConfigError(f"Kernel {label!r} declares FP8 inputs and takes {', '.join(sorted(c.workloads - {'decode'}))}: "
                          f"the gate judges FP8 kernels on dense self-attention only.")
    extra: dict[str, Any] = {"callable": _source(fn), "layout": c.layout, "gqa": c.gqa,
                             "convention": describe_convention(fn, **options),
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


def _workload_kwargs(c: _Convention, inputs) -> dict[str, Any]:
    """The workload keywords the function names, from the inputs (None where the workload has none: a dense
    cache has no page table; `window_size` is FlashAttention's (left, right))."""
    s = inputs.shape
    out: dict[str, Any] = {}
    for kw in c.workload_kw:
        if kw in _WORKLOAD_KW:
            out[kw] = getattr(inputs, _WORKLOAD_KW[kw])
        elif kw == "max_seqlen_q":
            out[kw] = max(s.q_lengths())
        elif kw in ("max_seqlen_k", "max_seqlen_kv"):
            out[kw] = max(s.kv_lengths())
        elif kw == "window":
            out[kw] = s.window
        elif kw == "window_size":
            w = s.window
            out[kw] = (-1, -1) if w is None else (w - 1, 0 if s.causal else w - 1)
    return out


@dataclass(frozen=True, kw_only=True)
class CallableSpec:
    """`module:attr@opt,opt` or `path/to/file.py:attr@opt` split into its parts."""

    target: str  # module name or file path
    attr: str
    options: dict

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py") or "/" in self.target


def split_spec(spec: str) -> CallableSpec:
    """Split a kernel spec; options after `@` are `bhsd`, `bshd`, `expand-gqa`, `native-gqa`, comma-separated."""
    target, _, rest = spec.rpartition(":")
    attr, _, opts = rest.partition("@")
    if not target or not attr:
        raise KernelError(f"Kernel spec {spec!r} is not module:function or path/to/file.py:function.")
    options: dict = {}
    for token in filter(None, (t.strip() for t in opts.split(","))):
        if token not in _SPEC_OPTIONS:
            raise KernelError(f"Kernel spec {spec!r}: unknown option {token!r} after '@'; the options are "
                              f"{', '.join(_SPEC_OPTIONS)} (comma-separated), e.g. mykern:attn@bshd,expand-gqa.")
        key, value = _SPEC_OPTIONS[token]
        if key in options and options[key] != value:
            raise KernelError(f"Kernel spec {spec!r} gives two {key} options.")
        options[key] = value
    return CallableSpec(target=target, attr=attr, options=options)


def with_options(spec: str, *, layout: str | None = None, gqa: str | None = None) -> str:
    """`spec` with a layout/GQA option appended; refused for a registered name (it declares its own layout)."""
    if layout is None and gqa is None:
        return spec
    if layout is not None and layout not in LAYOUTS:
        raise ConfigError(f"--layout {layout!r}: the layouts are {', '.join(LAYOUTS)}.")
    if ":" not in spec:
        raise ConfigError(f"--layout/--gqa apply to plain callables named module:function or file.py:function; "
                          f"{spec!r} is a registered kernel, which declares its own layout. Drop the option or name "
                          f"a callable.")
    parts = split_spec(spec)
    head, _, tail = spec.rpartition(":")
    attr, _, opts = tail.partition("@")
    tokens = [t for t in opts.split(",") if t]
    if layout is not None and parts.options.get("layout", layout) != layout:
        raise ConfigError(f"--layout {layout} contradicts the spec {spec!r}.")
    if layout is not None and "layout" not in parts.options:
        tokens.append(layout)
    if gqa is not None and "gqa" not in parts.options:
        tokens.append(f"{gqa}-gqa")
    return f"{head}:{attr}@{','.join(tokens)}"


def apply_options(kernels, *, layout: str | None = None, gqa: str | None = None) -> tuple[str, ...]:
    """`bench ... -k A -k B --layout bshd`: the option on every module:function / file.py:function spec.

    Registered kernels in the same list keep their own layout (comparing your function with sdpa-cudnn is
    the usual case); an option with no callable spec to apply to is refused rather than ignored.
    """
    kernels = tuple(kernels)
    if layout is None and gqa is None:
        return kernels
    if not any(":" in k for k in kernels):
        flag = "--layout" if layout is not None else "--gqa"
        raise ConfigError(f"{flag} applies to plain callables named module:function or file.py:function, and none of "
                          f"the kernels ({', '.join(kernels) or 'the defaults'}) is one; registered kernels declare their "
                          f"own layout. Drop {flag} or name a callable with -k.")
    return tuple(with_options(k, layout=layout, gqa=gqa) if ":" in k else k for k in kernels)


def _load_file(path: Path):
    path = path.resolve()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == path:
            return module
    stem = path.stem
    if stem.isidentifier() and stem not in sys.modules:
        found = importlib.util.find_spec(stem)
        if found is not None and found.origin and Path(found.origin).resolve() == path:
            return importlib.import_module(stem)  # the file is that module on sys.path: import it as such
        free = found is None
    else:
        free = False
    # The file's own name when nothing else answers to it, so provenance reads `mykern:attn`; otherwise a
    # name derived from the path, so it can neither shadow nor be shadowed by an installed module.
    name = stem if free else (
        f"_bench_file_{stem if stem.isidentifier() else 'module'}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_target(spec: str, *, base_dir: Path | None = None):
    """(module, object, CallableSpec) that `spec` names; file paths are relative to `base_dir` (default cwd)."""
    parts = split_spec(spec)
    if parts.is_file:
        path = Path(parts.target)
        if not path.is_absolute():
            path = Path(base_dir or Path.cwd()) / path
        if not path.is_file():
            raise UnknownKernelError(f"Kernel spec {spec!r}: the file {path} does not exist. Give the path to a .py file "
                              f"(relative to {'the repository folder' if base_dir else 'the current directory'}).")
        what = f"file {str(path)!r}"
        load = lambda: _load_file(path)  # noqa: E731
    else:
        what = f"module {parts.target!r}"
        top = parts.target.partition(".")[0]
        here = Path(base_dir or Path.cwd())
        if top not in sys.modules and ((here / top).is_dir() or (here / f"{top}.py").is_file()) \
                and importlib.util.find_spec(top) is None:
            # A module in the current folder, as `python -m` would find it (a console script's sys.path
            # starts at the script's own folder instead).
            sys.path.insert(0, str(here))
        load = lambda: importlib.import_module(parts.target)  # noqa: E731
    try:
        module = load()
    except Exception as exc:
        raise UnknownKernelError(
            f"Kernel spec {spec!r}: importing {what} failed ({type(exc).__name__}: {exc}). Check that it is on "
            f"PYTHONPATH (or installed, or the path is right) and imports on its own."
        ) from None
    except SystemExit as exc:  # the module's own sys.exit: its error, never the exit status of the command
        code = "" if exc.code is None else repr(exc.code)
        raise UnknownKernelError(
            f"Kernel spec {spec!r}: importing it called sys.exit({code}). Check that it imports on its own "
            f"(python -c 'import ...'); nothing was run.") from None
    obj = module
    for piece in parts.attr.split("."):
        try:
            obj = getattr(obj, piece)
        except AttributeError:
            raise UnknownKernelError(f"Kernel spec {spec!r}: {what} has no attribute {parts.attr!r}.") from None
    return module, obj, parts
