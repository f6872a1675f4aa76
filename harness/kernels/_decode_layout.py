"""How a kernel receives a serving workload: the workload keywords a plain function names, and the decode layout
of vLLM and FlashInfer (one query per sequence, per-sequence lengths) for plain functions and factories alike
(docs/workloads.md, "Workloads": the same for users).

The decode layout (`layout="decode"` or `"decode-bshd"`, `@decode` / `@decode-bshd` after a spec):
- q [B, Hq, d] (`decode`) or [B, 1, Hq, d] (`decode-bshd`): one query per sequence, a batch of sequences of any
  lengths (`--seq-len-q 1`, with `--varlen` for different lengths);
- the cache in pages [num_pages, page_size, Hkv, d] with a page table [B, max_pages] (`--page-size`), or dense
  [B, S_kv, Hkv, d] (FlashAttention's `k_cache`), padded to the longest sequence under varlen;
- the lengths [B] int32 always, by keyword (`seq_lens`, vLLM's; `cache_seqlens`, FlashAttention's; `kv_lens`,
  `seqused_k`): S_kv for every sequence when they are all alike;
- the output [B, Hq, dv] or [B, 1, Hq, dv].
Every copy into that layout is made in setup and never timed; the output is laid back as a view.

>>> from harness.inputs import AttentionShape, InputSpec, make_inputs
>>> shape = AttentionShape(batch=3, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=40, head_dim_qk=16,
...                        kv_lens=(40, 7, 19), page_size=8)
>>> d = decode_batch(make_inputs(InputSpec(shape=shape, dtype="float32", source="gaussian:1"), device="cpu"))
>>> tuple(d.q.shape), tuple(d.k.shape), d.seq_lens.tolist(), tuple(d.page_table.shape)  # 9 pages used + 1 spare
((3, 4, 16), (10, 8, 2, 16), [40, 7, 19], (3, 5))
>>> tuple(d.to_output(d.q).shape)  # laid back as the harness's packed output [1, Hq, total_q, dv]
(1, 4, 3, 16)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, UnsupportedInputError

__all__ = ["DECODE_LAYOUTS", "DecodeBatch", "LENGTH_KW", "PAGE_TABLE_KW", "WORKLOAD_INTS", "WORKLOAD_KW",
           "decode_batch", "workload_kwargs"]

DECODE_LAYOUTS = ("decode", "decode-bshd")
LENGTH_KW = ("seq_lens", "cache_seqlens", "kv_lens", "seqused_k")
PAGE_TABLE_KW = ("page_table", "block_table", "block_tables")
# Workload keywords: what a function names of them it receives, by the inputs' names.
WORKLOAD_KW = {**{k: "page_table" for k in PAGE_TABLE_KW}, **{k: "kv_lens" for k in LENGTH_KW},
               "cu_seqlens_q": "cu_seqlens_q", "cu_seqlens_k": "cu_seqlens_kv", "cu_seqlens_kv": "cu_seqlens_kv"}
WORKLOAD_INTS = ("max_seqlen_q", "max_seqlen_k", "max_seqlen_kv", "window", "window_size")


@dataclass(frozen=True, kw_only=True)
class DecodeBatch:
    """A decode workload in the decode layout (module docstring), made from `AttentionInputs` in setup."""

    q: Any  # [B, Hq, dqk] or [B, 1, Hq, dqk]
    k: Any  # pages [N, P, Hkv, dqk], or dense [B, S_kv, Hkv, dqk]
    v: Any  # as k, with dv
    seq_lens: Any  # [B] int32
    page_table: Any  # [B, max_pages] int32, None for a dense cache
    layout: str
    packed: bool  # the harness's output is packed [1, Hq, B, dv] (varlen), else [B, Hq, 1, dv]

    def to_output(self, out):
        """A function's output in the decode layout ([B, Hq, dv] or [B, 1, Hq, dv]) as the harness's output, a view."""
        per_seq = out if self.layout == "decode" else out[:, 0]  # [B, Hq, dv]
        if per_seq.dim() != 3:
            raise UnsupportedInputError(
                f"a kernel in layout {self.layout} returned shape {tuple(out.shape)}; it should return "
                f"{'[B, Hq, dv]' if self.layout == 'decode' else '[B, 1, Hq, dv]'}.")
        return per_seq.transpose(0, 1).unsqueeze(0) if self.packed else per_seq.unsqueeze(2)


def _check_decode_shape(shape, layout: str) -> None:
    if shape.seq_len != 1:
        raise UnsupportedInputError(
            f"layout {layout} holds one query per sequence (q {'[B, Hq, d]' if layout == 'decode' else '[B, 1, Hq, d]'}); "
            f"this input has {shape.seq_len} queries a sequence. Give --seq-len-q 1 (and --seq-len-kv for the cache).")


def decode_batch(inputs, *, layout: str = "decode") -> DecodeBatch:
    """The inputs in the decode layout (`layout` "decode": q [B, Hq, d]; "decode-bshd": q [B, 1, Hq, d]), for a
    factory's prepare(): copies made here, in setup (so the factory declares extra={"reads_inputs_at_launch":
    False}); `DecodeBatch.to_output` lays its kernel's output back."""
    import torch

    if layout not in DECODE_LAYOUTS:
        raise ConfigError(f"decode_batch(layout={layout!r}): one of {', '.join(DECODE_LAYOUTS)}.")
    s = inputs.shape
    _check_decode_shape(s, layout)
    q = inputs.q[0].transpose(0, 1) if s.packed else inputs.q[:, :, 0]  # [B, Hq, d]
    q = q.contiguous() if layout == "decode" else q.unsqueeze(1).contiguous()
    lens = s.kv_lengths()
    seq_lens = (inputs.kv_lens if inputs.kv_lens is not None
                else torch.tensor(lens, dtype=torch.int32, device=inputs.q.device))
    if s.paged:
        k, v = inputs.k, inputs.v
    elif s.packed:  # [1, Hkv, total, d] -> padded [B, S_kv, Hkv, d]
        starts = inputs.cu_seqlens_kv.tolist()

        def pad(t):
            out = t.new_zeros((s.batch, s.seq_len_kv, t.shape[1], t.shape[-1]))
            for b, n in enumerate(lens):
                out[b, :n] = t[0, :, starts[b]:starts[b] + n].transpose(0, 1)
            return out
        k = pad(inputs.k)
        v = k[..., :s.head_dim_v] if s.latent_kv else pad(inputs.v)
    else:  # [B, Hkv, S, d] -> [B, S, Hkv, d]
        k = inputs.k.transpose(1, 2).contiguous()
        v = k[..., :s.head_dim_v] if s.latent_kv else inputs.v.transpose(1, 2).contiguous()
    return DecodeBatch(q=q, k=k, v=v, seq_lens=seq_lens, page_table=inputs.page_table if s.paged else None,
                       layout=layout, packed=s.packed)


def workload_kwargs(workload_kw, inputs, *, batch: DecodeBatch | None = None) -> dict[str, Any]:
    """The workload keywords a function names (`workload_kw`), from the inputs (None where the workload has none: a
    dense cache has no page table; `window_size` is FlashAttention's (left, right)); from `batch` in the decode
    layout, whose lengths are always given."""
    s = inputs.shape
    out: dict[str, Any] = {}
    for kw in workload_kw:
        if kw in WORKLOAD_KW:
            source = WORKLOAD_KW[kw]
            if batch is not None and source in ("kv_lens", "page_table"):
                out[kw] = batch.seq_lens if source == "kv_lens" else batch.page_table
            else:
                out[kw] = getattr(inputs, source)
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
