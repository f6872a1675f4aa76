from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.errors import UnsupportedInputError

__all__ = ["Kernel", "Launch"]

Launch = Callable[[], Any]
"""A zero-argument closure that launches the kernel once and returns its output tensor."""


def _short(dtype: str) -> str:
    """The name --dtype takes (`bf16` for `bfloat16`), as users type it."""
    from harness.inputs import DTYPES

    return min((a for a, n in DTYPES.items() if n == dtype), key=len, default=dtype)


def _always_available(device_kind: str) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """One attention implementation, declared once.

    `prepare(inputs)` returns the launch closure. `availability(device_kind)` returns None when the
    kernel can run on that kind of device, else a sentence saying what is missing ("needs CUDA sm_90",
    "triton not installed"). `head_dims` is None for any, else the allowed (dqk, dv) pairs.
    `graph_safe` says whether launches may be captured into a CUDA graph. `workloads` names what it computes
    beyond dense self-attention (`harness.inputs.FEATURES`: "decode", "window", "paged", "varlen"); a shape that
    asks for another is refused with the flag that asked for it.
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
        from harness.inputs import DTYPES, FEATURES

        # Stored by torch's names, whichever the kernel declared ("bf16" or "bfloat16"): the run's dtype is
        # canonicalized the same way, so a kernel declared with short names supports what it says it does.
        unknown = sorted(d for d in self.dtypes if d not in DTYPES)
        if unknown:
            raise ValueError(f"kernel {self.name!r} declares unknown dtypes {unknown}; known: "
                             f"{', '.join(sorted(set(DTYPES)))}")
        object.__setattr__(self, "dtypes", frozenset(DTYPES[d] for d in self.dtypes))
        object.__setattr__(self, "workloads", frozenset(self.workloads))
        unknown = sorted(self.workloads - set(FEATURES))
        if unknown:
            raise ValueError(f"kernel {self.name!r} declares unknown workloads {unknown}; known: {sorted(FEATURES)}")

    def unavailable_reason(self, device_kind: str) -> str | None:
        if device_kind not in self.devices:
            return f"runs on {', '.join(sorted(self.devices))}, not {device_kind}"
        return self.availability(device_kind)

    def check_supports(self, *, dtype: str, head_dim_qk: int, head_dim_v: int, causal: bool, device_kind: str,
                       shape=None) -> None:
        """Raise `UnsupportedInputError` saying exactly what this kernel does not support (`shape`: the
        workload's features too)."""
        from harness.inputs import DTYPES, FEATURES

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
        missing = sorted(shape.features() - self.workloads) if shape is not None else []
        if missing:
            # A plain function declares a workload by naming its keyword: say which one would.
            keywords = {"window": "a `window` (or FlashAttention's `window_size`) keyword",
                        "paged": "a `page_table` keyword (and `kv_lens` or `cache_seqlens`)",
                        "varlen": "a `cu_seqlens_q` keyword (with `cu_seqlens_k` and `max_seqlen_q`/`max_seqlen_k`)"}
            named = [keywords[f] for f in missing if f in keywords]
            how = (f" A plain function takes it by naming {' and '.join(named)} in its signature; the harness then "
                   f"passes it." if self.extra.get("callable") and named else "")
            raise UnsupportedInputError(
                f"Kernel {self.name!r} does not compute {'; '.join(FEATURES[f] for f in missing)}"
                + (f"; it takes {', '.join(sorted(self.workloads))}" if self.workloads else
                   "; it computes dense self-attention only") +
                f".{how} The bundled sdpa-kvcache and triton-splitkv (and reference-fp64) take every workload.")
        reason = self.unavailable_reason(device_kind)
        if reason:
            raise UnsupportedInputError(f"Kernel {self.name!r} cannot run here: {reason}.")
