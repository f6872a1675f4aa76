from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.errors import UnsupportedInputError
from harness.inputs import DTYPES, FEATURES

__all__ = ["Kernel", "Launch", "MLA", "WORKLOADS"]

Launch = Callable[[], Any]
"""A zero-argument closure that launches the kernel once and returns its output tensor."""


def _short(dtype: str) -> str:
    """The name --dtype takes (`bf16` for `bfloat16`), as users type it."""
    return min((a for a, n in DTYPES.items() if n == dtype), key=len, default=dtype)


# Beyond the shape features (harness.inputs.FEATURES: decode, window, paged, varlen) a kernel declares whether it
# computes MLA's absorbed form, which a shape asks for with `latent_kv` (--mla): K is one latent KV head and V its
# first dv dims, a view of K. A kernel that computes MLA only declares extra={"latent_kv_only": True}.
MLA = ("mla", "MLA's absorbed form (--mla: one latent KV head read as K, its first dv dims as V)")
WORKLOADS = frozenset({"decode", "window", "paged", "varlen", MLA[0]})  # every workload a kernel may declare


def _always_available(device_kind: str) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """One attention implementation, declared once.

    `prepare(inputs)` returns the launch closure. `availability(device_kind)` returns None when the
    kernel can run on that kind of device, else a sentence saying what is missing ("needs CUDA sm_90",
    "triton not installed"). `head_dims` is None for any, else the allowed (dqk, dv) pairs.
    `graph_safe` says whether launches may be captured into a CUDA graph. `workloads` names what it computes
    beyond dense self-attention (`harness.inputs.FEATURES`: "decode", "window", "paged", "varlen"; and "mla", MLA's
    absorbed form); a shape that asks for another is refused with the flag that asked for it. `computes()` lists
    them for people (`bench list kernels`).
    """

    name: str
    prepare: Callable[[Any], Launch]
    dtypes: frozenset[str]
    devices: frozenset[str]
    head_dims: frozenset[tuple[int, int]] | None = None
    availability: Callable[[str], str | None] = _always_available
    description: str = ""
    graph_safe: bool = True
    causal_only: bool = False
    noncausal_only: bool = False  # a plain callable declared to compute non-causal attention only
    output_dtype: str | None = None  # None: same dtype as the inputs
    tolerance: str | None = None  # gate tolerance class: "bf16", "fp8", "fp32"; None picks from dtype
    source: str = ""  # module path, recorded with results
    extra: dict[str, Any] = field(default_factory=dict)
    workloads: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # Stored by torch's names, whichever the kernel declared ("bf16" or "bfloat16"): the run's dtype is
        # canonicalized the same way, so a kernel declared with short names supports what it says it does.
        unknown = sorted(d for d in self.dtypes if d not in DTYPES)
        if unknown:
            raise ValueError(f"kernel {self.name!r} declares unknown dtypes {unknown}; known: "
                             f"{', '.join(sorted(set(DTYPES)))}")
        object.__setattr__(self, "dtypes", frozenset(DTYPES[d] for d in self.dtypes))
        object.__setattr__(self, "workloads", frozenset(self.workloads))
        unknown = sorted(self.workloads - set(FEATURES) - {MLA[0]})
        if unknown:
            raise ValueError(f"kernel {self.name!r} declares unknown workloads {unknown}; known: "
                             f"{sorted({*FEATURES, MLA[0]})}")

    def computes(self) -> tuple[str, ...]:
        """What it computes, in a fixed order: dense (self-attention, S_q = S_kv; not for an MLA-only kernel),
        decode, paged, varlen, window, mla: as declared, and as `check_supports` enforces."""
        dense = () if self.extra.get("latent_kv_only") else ("dense",)
        return dense + tuple(w for w in ("decode", "paged", "varlen", "window", MLA[0]) if w in self.workloads)

    def unavailable_reason(self, device_kind: str) -> str | None:
        if device_kind not in self.devices:
            return f"runs on {', '.join(sorted(self.devices))}, not {device_kind}"
        return self.availability(device_kind)

    def check_supports(self, *, dtype: str, head_dim_qk: int, head_dim_v: int, causal: bool, device_kind: str,
                       shape=None) -> None:
        """Raise `UnsupportedInputError` saying exactly what this kernel does not support (`shape`: the
        workload's features too)."""
        canonical = DTYPES.get(dtype, dtype)
        if canonical not in self.dtypes:
            raise UnsupportedInputError(
                f"Kernel {self.name!r} does not support dtype {dtype!r}; it supports "
                f"{', '.join(_short(d) for d in sorted(self.dtypes))}. Pick one of those with --dtype, or another kernel."
            )
        if self.head_dims is not None and (head_dim_qk, head_dim_v) not in self.head_dims:
            dims = ", ".join(f"{a}/{b}" if a != b else str(a) for a, b in sorted(self.head_dims))
            raise UnsupportedInputError(
                f"Kernel {self.name!r} does not support head dims dqk={head_dim_qk}, dv={head_dim_v}; "
                f"it supports {dims}."
            )
        if self.causal_only and not causal:
            raise UnsupportedInputError(f"Kernel {self.name!r} supports causal attention only; drop --no-causal.")
        if self.noncausal_only and causal and self.extra.get("causal_mode") == "implied":
            raise UnsupportedInputError(
                f"Kernel {self.name!r} has no `is_causal` or `causal` keyword, so it is run as torch SDPA runs without "
                f"one: non-causal attention only, and these inputs are causal (the default). Pass --no-causal to time "
                f"it non-causal; to time it causal, give it an `is_causal=True` keyword that it honours, or, if it "
                f"masks without being told, declare `@harness.kernels.convention(causal=True)` (the gate checks it).")
        if self.noncausal_only and causal:
            raise UnsupportedInputError(f"Kernel {self.name!r} supports non-causal attention only; pass --no-causal.")
        if shape is not None and "paged" in self.extra.get("requires", ()) and not shape.paged:
            raise UnsupportedInputError(
                f"Kernel {self.name!r} needs a paged KV cache: it names a page table with no default of None, so "
                f"without one it would be called with page_table=None. Give --page-size P (e.g. --page-size 16); if it "
                f"also takes a dense cache, give that parameter the default None.")
        per_seq = self.extra.get("queries_per_sequence")
        if shape is not None and per_seq is not None and shape.seq_len != per_seq:
            raise UnsupportedInputError(
                f"Kernel {self.name!r} takes the decode layout ({self.extra.get('layout', 'decode')}: one query per "
                f"sequence, q [B, Hq, d] or [B, 1, Hq, d]); these inputs have {shape.seq_len} queries a sequence. Give "
                f"--seq-len-q 1 (and the cache with --seq-len-kv).")
        wanted = (shape.features() | ({MLA[0]} if shape.latent_kv else set())) if shape is not None else set()
        missing = sorted(wanted - self.workloads)
        if shape is not None and self.extra.get("latent_kv_only") and not shape.latent_kv:
            raise UnsupportedInputError(f"Kernel {self.name!r} computes MLA's absorbed form only; give --mla (one "
                                        f"latent KV head, V its first dv dims).")
        if missing:
            # A plain function declares a workload by naming its keyword: say which one would.
            keywords = {"window": "a `window` (or FlashAttention's `window_size`) keyword",
                        "paged": "a `page_table` keyword (and `kv_lens` or `cache_seqlens`)",
                        "varlen": "a `cu_seqlens_q` keyword (with `cu_seqlens_k` and `max_seqlen_q`/`max_seqlen_k`)"}
            named = [keywords[f] for f in missing if f in keywords]
            how = (f" A plain function takes it by naming {' and '.join(named)} in its signature; the harness then "
                   f"passes it." if self.extra.get("callable") and named else "")
            raise UnsupportedInputError(
                f"Kernel {self.name!r} does not compute {'; '.join(dict([MLA], **FEATURES)[f] for f in missing)}"
                + (f"; it takes {', '.join(sorted(self.workloads))}" if self.workloads else
                   "; it computes dense self-attention only") +
                f".{how} The bundled sdpa-kvcache (and reference-fp64) take every workload, triton-splitkv every one "
                f"but MLA, triton-mla MLA's (`bench list kernels` shows what each computes).")
        reason = self.unavailable_reason(device_kind)
        if reason:
            raise UnsupportedInputError(f"Kernel {self.name!r} cannot run here: {reason}.")
