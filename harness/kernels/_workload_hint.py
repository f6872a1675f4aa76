"""The hint of a failed gate on a serving workload: which common mistake reproduces the kernel's output.

A decode, paged, varlen or windowed kernel that fails the gate has, most of the time, left out one part of the
workload. Each candidate below is that mistake's own fp64 reference, computed on the same inputs; the first one the
kernel's output matches (by the gate's own comparison) is named as the likely cause, with its fix:
- lengths ignored: every sequence read to S_kv (the pages the table holds past its length, or the zeros a padded
  dense cache holds there) instead of to its own length;
- pages unshuffled: the pool read as if sequence b's pages were laid out in order (as the `wrong page` mutant of
  tests/kernels/mla_cases.py does), instead of through the page table;
- window ignored: every key before the query seen, not the last W;
- causal mask aligned to the start (torch SDPA's is_causal) instead of to the end of the cache: only where a
  sequence has more than one query and fewer queries than keys; at S_q = 1 the alignment cannot matter.
Nothing matching, the hint names what was checked. Dense self-attention is `_layout.layout_hint`'s.
"""

from __future__ import annotations

import dataclasses

from harness.inputs import sequences
from harness.kernels._reference import reference_attention, workload_reference

__all__ = ["workload_hint"]


def _reference(inputs, **shape_changes):
    shape = dataclasses.replace(inputs.shape, **shape_changes)
    return workload_reference(dataclasses.replace(inputs, shape=shape))


def _lengths(inputs, lengths: tuple[int, ...]):
    """Each sequence read to `lengths` through its row of the page table (the table's spare entries included)."""
    s = inputs.shape
    if s.kv_lens is None or lengths == s.kv_lens or tuple(min(s.seq_len, n) for n in lengths) != s.q_lengths():
        return None
    return _reference(inputs, kv_lens=lengths, seq_len_kv=max(s.seq_len_kv, *lengths))


def _lengths_to_whole_pages(inputs):
    """Each sequence read to the end of its last page."""
    s = inputs.shape
    if not s.paged or s.kv_lens is None:
        return None
    return _lengths(inputs, tuple(-(-n // s.page_size) * s.page_size for n in s.kv_lens))


def _lengths_padded_with_zeros(inputs):
    """Every sequence read to S_kv in a dense cache padded with zeros past its length (`decode_batch`'s layout)."""
    import torch

    s = inputs.shape
    if s.kv_lens is None or s.paged or s.q_lengths() != (s.seq_len,) * s.batch:
        return None
    out = torch.empty(s.out_shape(), dtype=torch.float64, device=inputs.q.device)
    for seq in sequences(inputs):
        pad = s.seq_len_kv - seq.k.shape[2]
        k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (seq.k, seq.v))
        out[seq.rows] = reference_attention(seq.q, k, v, scale=inputs.scale, causal=s.causal, window=s.window)
    return out


def _pages_in_order(inputs, *, packed: bool):
    """The pool read as if each sequence's pages followed each other: b * max_pages + j, or (`packed`) right after
    the previous sequence's pages."""
    import torch

    s = inputs.shape
    if not s.paged:
        return None
    used = s.pages_per_sequence()
    starts = [sum(used[:b]) for b in range(s.batch)] if packed else [b * s.max_pages for b in range(s.batch)]
    table = [[min(start + j, s.num_pages - 1) for j in range(s.max_pages)] for start in starts]
    order = torch.tensor(table, dtype=inputs.page_table.dtype, device=inputs.page_table.device)
    if torch.equal(order, inputs.page_table):
        return None
    return workload_reference(dataclasses.replace(inputs, page_table=order))


def _causal_from_the_start(inputs):
    """The causal mask of torch SDPA's is_causal: query i sees keys 0..i, not the keys up to S_kv - S_q + i."""
    import torch

    s = inputs.shape
    pairs = list(zip(s.q_lengths(), s.kv_lengths()))
    if not s.causal or not any(1 < q < kv for q, kv in pairs):
        return None
    out = torch.empty(s.out_shape(), dtype=torch.float64, device=inputs.q.device)
    for seq, (lq, _) in zip(sequences(inputs), pairs):
        out[seq.rows] = reference_attention(seq.q, seq.k[:, :, :lq], seq.v[:, :, :lq], scale=inputs.scale,
                                            causal=True, window=s.window)
    return out


def workload_hint(kernel, inputs, out, compare) -> str:
    """A sentence naming the mistake whose reference `out` matches (`compare(out, ref).passed`), else one naming
    what was checked; "" for dense self-attention or an output of the wrong shape."""
    import torch

    s = inputs.shape
    if not s.features() or not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(s.out_shape()):
        return ""
    lens = "`kv_lens` (`seq_lens`, `cache_seqlens`, `seqused_k`)"
    candidates = [
        ("lengths ignored", lambda x: _lengths(x, (s.seq_len_kv,) * s.batch), "it ignores the sequence lengths: its "
         f"output is attention over all S_kv = {s.seq_len_kv} keys of every sequence, the pages past each length "
         f"included. Stop each sequence at its own length, {lens}"),
        ("lengths ignored", _lengths_to_whole_pages, "it ignores the sequence lengths: its output is attention over "
         f"whole pages, the slots past each sequence's length in its last page included. Stop each sequence at its own "
         f"length, {lens}"),
        ("lengths ignored", _lengths_padded_with_zeros, "it ignores the sequence lengths: its output is attention over "
         f"all S_kv = {s.seq_len_kv} rows of the padded cache, the zeros past each length included. Stop each "
         f"sequence at its own length, {lens}"),
        ("pages unshuffled", lambda x: _pages_in_order(x, packed=False), "it reads the pages in pool order, not "
         "through the page table: its output is attention over pages b x max_pages + j. The pages are shuffled as a "
         "serving engine leaves them: read page page_table[b, j]"),
        ("pages unshuffled", lambda x: _pages_in_order(x, packed=True), "it reads the pages in pool order, not "
         "through the page table: its output is attention over each sequence's pages taken one after the other from "
         "the pool's start. The pages are shuffled as a serving engine leaves them: read page page_table[b, j]"),
        ("window ignored", lambda x: _reference(x, window=None) if s.window is not None else None,
         f"it ignores the sliding window: its output is attention over every key up to the query, not the last "
         f"{s.window} (a plain function receives `window`, or FlashAttention's `window_size`)"),
        ("causal mask aligned to the start", _causal_from_the_start, "its causal mask is aligned to the start of the "
         "cache (torch SDPA's is_causal: query i sees keys 0..i); with S_q < S_kv the harness aligns it to the end "
         "(query i at position S_kv - S_q + i, FlashAttention's bottom-right convention)"),
    ]
    tried = []
    for name, make, why in candidates:
        ref = make(inputs)
        if ref is None:
            continue
        if name not in tried:
            tried.append(name)
        if compare(out, ref).passed:
            return f" Likely cause, {name}: {why}."
    if not tried:
        return ""
    return (f" None of the usual mistakes on this workload reproduces its output (checked: {', '.join(tried)}); "
            f"`harness.kernels.workload_reference(inputs)` is the reference, one sequence at a time.")
