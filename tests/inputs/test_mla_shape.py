"""MLA decode in DeepSeek's absorbed form (`--mla`, AttentionShape.latent_kv): one latent KV head of 576 dims whose
first 512 are V, so v is a view of k, dense or paged; the cache is counted once in the bytes and both products in
the FLOPs; the fp64 reference and sdpa-kvcache take dqk != dv; triton-splitkv is refused by name."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs, sequences
from harness.kernels import default_registry, gate, workload_reference
from harness.suite import ShapeArgs, attention_shapes

MLA = dict(batch=2, heads_q=16, heads_kv=1, seq_len=1, seq_len_kv=40, head_dim_qk=576, head_dim_v=512, latent_kv=True)


def test_the_mla_flag_is_deepseeks_absorbed_shape_and_fixes_its_dims():
    (shape, _), = attention_shapes(ShapeArgs(mla=True, seq_len_q=1, seq_len_kv=4096), device="cpu")
    assert (shape.heads_q, shape.heads_kv, shape.head_dim_qk, shape.head_dim_v, shape.latent_kv) == (128, 1, 576, 512, True)
    (tp, _), = attention_shapes(ShapeArgs(mla=True, heads=16, seq_len_q=1, seq_len_kv=64, page_size=64), device="cpu")
    assert tp.heads_q == 16 and tp.page_size == 64 and "mla-latent" in tp.label()
    with pytest.raises(ConfigError, match="--mla fixes.*--heads-kv"):
        attention_shapes(ShapeArgs(mla=True, heads_kv=8, seq_len_q=1, seq_len_kv=64), device="cpu")
    with pytest.raises(ConfigError, match="dv=640 cannot exceed"):
        AttentionShape(**{**MLA, "head_dim_v": 640})


def test_the_latent_cache_is_read_once_and_both_products_are_counted():
    mla, separate = AttentionShape(**MLA), AttentionShape(**{**MLA, "latent_kv": False})
    assert mla.flops == separate.flops == 2 * (2 * 40 - 1) * 16 * (576 + 512)  # B 2, causal Sq 1: 2 L - 1 per head
    q, out, cache = 2 * 16 * 576, 2 * 16 * 512, 2 * 40 * 576
    assert mla.bytes_moved(item=2, out_item=2) == 2 * (q + cache) + 2 * out
    assert separate.bytes_moved(item=2, out_item=2) - mla.bytes_moved(item=2, out_item=2) == 2 * 2 * 40 * 512


@pytest.mark.parametrize("page", [None, 8])
def test_v_is_the_latent_part_of_k_and_sdpa_kvcache_passes_the_gate(page):
    x = make_inputs(InputSpec(shape=AttentionShape(**MLA, page_size=page), dtype="bfloat16", source="gaussian:1"),
                    device="cpu")
    assert x.v.data_ptr() == x.k.data_ptr() and torch.equal(x.v, x.k[..., :512])
    for seq in sequences(x):
        assert torch.equal(seq.v, seq.k[..., :512])
    ref = workload_reference(x)
    assert tuple(ref.shape) == (2, 16, 1, 512)
    kernel = default_registry().get("sdpa-kvcache")
    assert gate(kernel, x, kernel.prepare(x)).passed


def test_triton_splitkv_is_refused_the_mla_dims_by_name():
    x = make_inputs(InputSpec(shape=AttentionShape(**MLA), dtype="bfloat16"), device="cpu")
    from kernels_under_test import _triton_decode

    with pytest.raises(UnsupportedInputError, match="dqk=576, dv=512"):
        _triton_decode.prepare(x)
