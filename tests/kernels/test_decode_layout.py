"""vLLM's and FlashInfer's decode layout (`layout="decode"`: q [B, Hq, d]; `"decode-bshd"`: q [B, 1, Hq, d]; the
cache paged or dense [B, S_kv, Hkv, d]; the lengths by keyword), for a plain function and for a factory through
`decode_batch`, dense and paged, equal and different lengths, each through the correctness gate against fp64; its
mistakes caught; a function that names a page table without a default refused without --page-size, by that flag."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.errors import ConfigError, GateFailure, KernelError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, adapt_callable, convention, decode_batch, gate

BASE = dict(batch=3, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=40, head_dim_qk=16)
SHAPES = {
    "dense": dict(),
    "paged": dict(page_size=8),
    "varlen dense": dict(kv_lens=(40, 7, 19)),
    "varlen paged": dict(kv_lens=(40, 7, 19), page_size=8),
}


def _inputs(**kw):
    shape = AttentionShape(**{**BASE, **kw})
    return make_inputs(InputSpec(shape=shape, dtype="float32", source="gaussian:1"), device="cpu")


def _attend(q, k, v, scale):
    """One sequence: q [Hq, d] against its keys and values [L, Hkv, d]."""
    group = q.shape[0] // k.shape[1]
    k, v = (t.transpose(0, 1).repeat_interleave(group, 0) for t in (k, v))
    return F.scaled_dot_product_attention(q[:, None], k, v, scale=scale)[:, 0]


def _decode(q, k_cache, v_cache, seq_lens, page_table, scale, mistake=None):
    """q [B, Hq, d]; the cache in pages [N, P, Hkv, d] with a page table, or dense [B, S, Hkv, d]."""
    out = []
    for b, n in enumerate(seq_lens.tolist()):
        if mistake == "ignores lengths":
            n = k_cache.shape[1] if page_table is None else page_table.shape[1] * k_cache.shape[1]
        if page_table is not None:
            pages = page_table[b].long()
            k, v = (t[pages].flatten(0, 1)[:n] for t in (k_cache, v_cache))
        else:
            k, v = k_cache[b, :n], v_cache[b, :n]
        out.append(_attend(q[b], k, v, scale))
    return torch.stack(out)


@convention(layout="decode")
def vllm_decode(q, k_cache, v_cache, *, seq_lens, page_table=None, scale=None):
    return _decode(q, k_cache, v_cache, seq_lens, page_table, scale)


@convention(layout="decode-bshd")
def flash_decode(q, k_cache, v_cache, *, cache_seqlens, block_table=None, softmax_scale=None):
    """FlashAttention's flash_attn_with_kvcache names: q [B, 1, Hq, d], block_table, cache_seqlens."""
    return _decode(q[:, 0], k_cache, v_cache, cache_seqlens, block_table, softmax_scale)[:, None]


@pytest.mark.parametrize("fn", [vllm_decode, flash_decode])
@pytest.mark.parametrize("kind", SHAPES)
def test_a_plain_function_in_the_decode_layout_passes_on_every_cache(fn, kind):
    kernel = adapt_callable(fn)
    assert kernel.workloads == {"decode", "mla", "paged", "varlen"} and kernel.extra["queries_per_sequence"] == 1
    x = _inputs(**SHAPES[kind])
    kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu", shape=x.shape)
    assert gate(kernel, x, kernel.prepare(x)).passed


@pytest.mark.parametrize("kind", ["dense", "varlen paged"])
def test_a_factory_lays_its_inputs_out_with_decode_batch(kind):
    def prepare(inputs):
        d = decode_batch(inputs)
        assert d.q.shape == (3, 4, 16) and d.seq_lens.tolist() == list(inputs.shape.kv_lengths())
        if d.page_table is None:
            assert d.k.shape == (3, 40, 2, 16)  # dense [B, S_kv, Hkv, d], padded to the longest under varlen
        return lambda: d.to_output(_decode(d.q, d.k, d.v, d.seq_lens, d.page_table, inputs.scale))

    kernel = Kernel(name="factory-decode", prepare=prepare, dtypes=frozenset({"float32"}), devices=frozenset({"cpu"}),
                    workloads=frozenset({"decode", "paged", "varlen"}), extra={"reads_inputs_at_launch": False})
    x = _inputs(**SHAPES[kind])
    assert gate(kernel, x, kernel.prepare(x)).passed


@pytest.mark.parametrize("mistake, kind", [("ignores lengths", "varlen dense"), ("ignores lengths", "varlen paged"),
                                           ("q as [B, d, Hq]", "paged")])
def test_decode_layout_mistakes_fail_the_gate(mistake, kind):
    @convention(layout="decode")
    def wrong(q, k_cache, v_cache, *, seq_lens, page_table=None, scale=None):
        if mistake == "q as [B, d, Hq]":  # reads q's last two dims the other way round
            q = q.reshape(q.shape[0], q.shape[2], q.shape[1]).transpose(1, 2)
        return _decode(q, k_cache, v_cache, seq_lens, page_table, scale, mistake=mistake)

    kernel = adapt_callable(wrong, name=f"mutant-{mistake}")
    x = _inputs(**SHAPES[kind])
    with pytest.raises(GateFailure):
        gate(kernel, x, kernel.prepare(x))


def test_the_layout_says_what_it_cannot_take():
    kernel = adapt_callable(vllm_decode)
    two = _inputs(seq_len=2)
    with pytest.raises(UnsupportedInputError, match="one query per sequence.*Give --seq-len-q 1"):
        kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu",
                              shape=two.shape)
    with pytest.raises(ConfigError, match="cu_seqlens_q would mean nothing"):
        adapt_callable(lambda q, k, v, *, cu_seqlens_q, seq_lens: q, options={"layout": "decode"})

    @convention(layout="decode")
    def flat(q, k_cache, v_cache, *, seq_lens, page_table=None, scale=None):
        return q.flatten(1)  # [B, Hq * d]: not the layout's output

    with pytest.raises(KernelError, match=r"returned shape \(3, 64\); \[3, 4, 16\] is expected"):
        adapt_callable(flat).prepare(_inputs())


def test_a_spec_suffix_declares_the_layout():
    from harness.kernels import spec_with_options, split_spec

    assert split_spec("mod:fn@decode-bshd,expand-gqa").options == {"layout": "decode-bshd", "gqa": "expand"}
    assert spec_with_options("mod:fn", layout="decode") == "mod:fn@decode"


def test_a_page_table_without_a_default_is_refused_without_page_size_by_the_flag():
    def paged_only(q, k, v, *, page_table, kv_lens, is_causal=True, scale=None):
        return q

    kernel = adapt_callable(paged_only)
    assert kernel.extra["requires"] == ["paged"]
    dense = _inputs()
    with pytest.raises(UnsupportedInputError) as e:
        kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu",
                              shape=dense.shape)
    assert "--page-size" in str(e.value) and "page_table=None" in str(e.value)
    with pytest.raises(UnsupportedInputError, match="--page-size"):  # a direct prepare() is refused the same way
        kernel.prepare(dense)
    # with pages it is taken, and a page table defaulting to None declares a dense cache welcome too
    kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu",
                          shape=_inputs(page_size=8).shape)
    assert "requires" not in adapt_callable(vllm_decode).extra
