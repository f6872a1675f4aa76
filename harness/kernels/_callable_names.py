"""The keyword names a plain attention function may take, and the paragraph that refuses one taking a workload's
tensors by position (docs/workloads.md, "Workloads").

The harness passes everything beyond q, k, v by keyword, under the name the function's signature uses: a name's
meaning is fixed, a position's is not (flash-attn's `flash_attn_with_kvcache` puts `k`, `v`, `rotary_cos` where
another kernel puts its page table).

>>> "seqused_k" in accepted_keywords() and "block_tables" in accepted_keywords()
True
>>> text = positional_workload_text("Kernel 'x.py:attn'", ["page_table", "kv_lens"], fn_name="attn")
>>> "def attn(q, k, v, *, page_table, kv_lens)" in text
True
"""

from __future__ import annotations

from harness.kernels._decode_layout import LENGTH_KW, PAGE_TABLE_KW

__all__ = ["KEYWORD_GROUPS", "accepted_keywords", "positional_workload_text"]

# What the harness hands a plain function, by the names it accepts for each (the first is the harness's own).
KEYWORD_GROUPS = (
    ("the causal flag", ("is_causal", "causal")),
    ("the softmax scale", ("scale", "softmax_scale")),
    ("grouped-query attention", ("enable_gqa",)),
    ("the page table [B, max_pages] int32", PAGE_TABLE_KW),
    ("each sequence's KV length [B] int32", ("kv_lens", *(n for n in LENGTH_KW if n != "kv_lens"))),
    ("packed query offsets [B + 1] int32", ("cu_seqlens_q",)),
    ("packed key offsets [B + 1] int32", ("cu_seqlens_k", "cu_seqlens_kv")),
    ("the longest query length", ("max_seqlen_q",)),
    ("the longest KV length", ("max_seqlen_k", "max_seqlen_kv")),
    ("the sliding window", ("window", "window_size")),
    ("FP8 descales (fp8_inputs(quantized_by='harness'))", ("q_descale", "k_descale", "v_descale")),
)


def accepted_keywords() -> str:
    """Every keyword the harness passes, grouped by what it carries, as one line."""
    # The descales come as three; every other group is one value under any of its names.
    return "; ".join(f"{what}: {(', ' if what.startswith('FP8') else ' or ').join(f'`{n}`' for n in names)}"
                     for what, names in KEYWORD_GROUPS)


def positional_workload_text(what: str, names: list[str], *, fn_name: str = "fn") -> str:
    """The refusal of a function that takes a workload's tensors (or flags) as required positional parameters,
    naming the keyword-only fix and the names the harness passes."""
    shown = ", ".join(names)
    fn = fn_name if fn_name.isidentifier() else "fn"
    return (f"{what} takes {shown} as positional parameter(s) after q, k, v. The harness passes everything beyond "
            f"q, k, v by keyword only, under the name the signature uses, so these must be keyword-only: write "
            f"`def {fn}(q, k, v, *, {shown})` (a `*` before them; a caller that passes them by position must then "
            f"name them). The names it passes: {accepted_keywords()}. The paged cache arrives as k and v "
            f"[num_pages, page_size, Hkv, d] (docs/workloads.md).")
