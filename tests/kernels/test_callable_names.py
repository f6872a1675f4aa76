"""A plain function that takes a workload's tensors by position is refused with the fix (keyword-only parameters)
and the names the harness passes; once keyword-only, the same function receives them and passes the gate."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.errors import KernelError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import adapt_callable, gate
from harness.kernels._callable_names import KEYWORD_GROUPS
from harness.kernels._decode_layout import LENGTH_KW, PAGE_TABLE_KW, WORKLOAD_INTS, WORKLOAD_KW

PAGED = AttentionShape(batch=3, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=40, head_dim_qk=16, page_size=8,
                       kv_lens=(40, 7, 19))


def _decode(q, k_cache, v_cache, block_table, seq_lens, scale):
    out = []
    for b, n in enumerate(seq_lens.tolist()):
        pages = block_table[b].long()
        k, v = (c[pages].flatten(0, 1)[:n].transpose(0, 1) for c in (k_cache, v_cache))
        group = q.shape[1] // k.shape[0]
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
        out.append(F.scaled_dot_product_attention(q[b][:, None], k, v, scale=scale)[:, 0])
    return torch.stack(out)


def test_positional_page_table_and_lengths_are_refused_with_the_keyword_only_fix():
    def paged_decode(q, k_cache, v_cache, page_table, kv_lens, scale=None):
        return q

    with pytest.raises(KernelError) as info:
        adapt_callable(paged_decode)
    text = str(info.value)
    assert "takes page_table, kv_lens as positional parameter(s)" in text
    assert "`def paged_decode(q, k, v, *, page_table, kv_lens)`" in text
    assert "cannot supply" not in text and "A plain attention callable must look like" not in text  # the old, false one
    for name in ("block_table", "block_tables", "seq_lens", "cache_seqlens", "seqused_k", "cu_seqlens_q"):
        assert f"`{name}`" in text, name
    assert "docs/workloads.md" in text


def test_the_names_listed_are_exactly_the_names_the_harness_passes():
    listed = {n for _, names in KEYWORD_GROUPS for n in names}
    passed = {"is_causal", "causal", "scale", "softmax_scale", "enable_gqa", "q_descale", "k_descale", "v_descale",
              *WORKLOAD_KW, *WORKLOAD_INTS}
    assert listed == passed
    assert set(PAGE_TABLE_KW) | set(LENGTH_KW) <= listed


def test_the_same_function_keyword_only_receives_the_pages_and_passes_the_gate():
    from harness.kernels import convention

    @convention(layout="decode")
    def paged_decode(q, k_cache, v_cache, *, page_table, kv_lens, scale=None):
        return _decode(q, k_cache, v_cache, page_table, kv_lens, scale)

    kernel = adapt_callable(paged_decode)
    assert {"paged", "varlen"} <= kernel.workloads
    x = make_inputs(InputSpec(shape=PAGED, dtype="float32", source="gaussian:1"), device="cpu")
    assert gate(kernel, x, kernel.prepare(x)).passed
