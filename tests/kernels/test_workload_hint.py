"""The gate's hint on a serving workload names the mistake that reproduces the kernel's output (lengths ignored,
pages unshuffled, window ignored, the causal mask aligned to the start), never the mask's alignment at S_q = 1,
and says what it checked when nothing does. The mutants of the bundled shapes: tests/kernels/test_decode_kernels.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.errors import GateFailure
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import adapt_callable, convention, gate


def _inputs(**kw):
    shape = AttentionShape(**{**dict(batch=3, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=11, head_dim_qk=16), **kw})
    return make_inputs(InputSpec(shape=shape, dtype="float32", source="gaussian:1"), device="cpu")


def _failure(fn, x) -> str:
    kernel = adapt_callable(fn)
    with pytest.raises(GateFailure) as e:
        gate(kernel, x, kernel.prepare(x))
    return " ".join(str(e.value).split())


@convention(layout="decode")
def ignores_seq_lens(q, k_cache, v_cache, *, seq_lens, scale=None):
    """vLLM's decode layout on a dense cache [B, S_kv, Hkv, d], padded past each length, read to the end."""
    k, v = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q[:, :, None], k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                          scale=scale)[:, :, 0]


def test_a_decode_kernel_that_ignores_the_lengths_is_told_so_not_about_the_causal_mask():
    text = _failure(ignores_seq_lens, _inputs(kv_lens=(9, 4, 11)))
    assert "Likely cause, lengths ignored: it ignores the sequence lengths" in text
    assert "`kv_lens` (`seq_lens`, `cache_seqlens`, `seqused_k`)" in text
    assert "bottom-right" not in text and "causal mask" not in text  # S_q = 1: the alignment cannot matter


@convention(layout="decode")
def zeros(q, k_cache, v_cache, *, block_table, seq_lens, scale=None):
    return torch.zeros(q.shape[0], q.shape[1], v_cache.shape[-1])


def test_nothing_reproduced_names_what_was_checked():
    text = _failure(zeros, _inputs(kv_lens=(9, 4, 11), page_size=4))
    assert "None of the usual mistakes on this workload reproduces its output (checked: lengths ignored, pages " \
           "unshuffled)" in text
    assert "Likely cause" not in text


def test_dense_self_attention_gets_no_workload_hint():
    def wrong(q, k, v, is_causal=True, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=not is_causal, scale=scale, enable_gqa=True)

    text = _failure(wrong, _inputs(batch=1, seq_len=16, seq_len_kv=16))
    assert "Likely cause" not in text and "usual mistakes" not in text
