"""Acceptance 1 of issue 33: every shape kind (decode against a KV cache, sliding window, paged, varlen, and
their mixtures) against a brute-force fp64 reference written here from the definitions, element by element,
on the logical tensors; the paged and varlen layouts hold exactly the values of the dense one; the FLOP and
byte accounting counts the visible pairs and keys."""

from __future__ import annotations

import pytest
import torch

from harness.inputs import AttentionShape, InputSpec, make_inputs, sequences
from harness.kernels import workload_reference


def _shape(**kw):
    base = dict(batch=2, heads_q=4, heads_kv=2, seq_len=3, seq_len_kv=11, head_dim_qk=8)
    return AttentionShape(**{**base, **kw})


def _inputs(shape, seed=0):
    return make_inputs(InputSpec(shape=shape, dtype="float32", source="gaussian:1", seed=seed), device="cpu")


def _visible(p: int, j: int, *, causal: bool, window) -> bool:
    """The definition: key j is visible to the query at position p."""
    if causal and j > p:
        return False
    if window is not None and j <= p - window:
        return False
    return not (window is not None and not causal and j >= p + window)


def _brute(q, k, v, *, scale, causal, window):
    """fp64 attention of one sequence, q [Hq, lq, d], k/v [Hkv, lkv, d], by loops over queries and keys."""
    hq, lq, _ = q.shape
    hkv, lkv, dv = v.shape
    out = torch.zeros((hq, lq, dv), dtype=torch.float64)
    for h in range(hq):
        g = h // (hq // hkv)
        for i in range(lq):
            p = lkv - lq + i
            keys = [j for j in range(lkv) if _visible(p, j, causal=causal, window=window)]
            s = torch.tensor([float(q[h, i].double() @ k[g, j].double()) * scale for j in keys], dtype=torch.float64)
            w = torch.softmax(s, 0)
            out[h, i] = sum(w[n] * v[g, j].double() for n, j in enumerate(keys))
    return out


def _logical(shape, seed=0):
    """The values of the workload before any paging or packing: the same shape dense, same seed."""
    dense = AttentionShape(batch=shape.batch, heads_q=shape.heads_q, heads_kv=shape.heads_kv, seq_len=shape.seq_len,
                           seq_len_kv=shape.seq_len_kv, head_dim_qk=shape.head_dim_qk, causal=shape.causal,
                           window=shape.window)
    return _inputs(dense, seed) if not shape.packed else None


KINDS = {
    "decode q1": dict(seq_len=1),
    "decode q3 causal": dict(),
    "decode q3 not causal": dict(causal=False),
    "self-attention window 4": dict(seq_len=11, window=4),
    "decode window 5": dict(window=5),
    "window not causal": dict(seq_len=7, window=3, causal=False),
    "paged 4": dict(page_size=4),
    "paged 3 window 4": dict(page_size=3, window=4),
    "paged 16 (one page)": dict(page_size=16),
    "varlen prefill": dict(batch=3, seq_len=11, kv_lens=(11, 2, 7)),
    "varlen decode": dict(batch=3, seq_len=2, kv_lens=(5, 1, 11)),
    "varlen paged": dict(batch=3, seq_len=1, kv_lens=(9, 4, 11), page_size=4),
    "varlen paged window": dict(batch=3, seq_len=3, kv_lens=(9, 2, 11), page_size=2, window=3, causal=True),
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_shape_kind_matches_the_brute_force_definition(kind):
    shape = _shape(**KINDS[kind])
    x = _inputs(shape)
    ref = workload_reference(x)
    assert tuple(ref.shape) == shape.out_shape() and ref.dtype == torch.float64
    # With abs_v, the same output and P |V| (the gate's per-element allowance for rounding P) beside it.
    same, pv_abs = workload_reference(x, abs_v=True)
    assert torch.equal(same, ref) and pv_abs.shape == ref.shape
    # The brute force reads the logical tensors through their layout by hand: dense [b], packed cu_seqlens
    # rows, or the page table's pages token by token.
    lq, lk = shape.q_lengths(), shape.kv_lengths()
    cq, ck = [0], [0]
    for a, b in zip(lq, lk):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + b)
    for b in range(shape.batch):
        qb = x.q[0, :, cq[b]:cq[b + 1]] if shape.packed else x.q[b]
        if shape.paged:
            table = x.page_table[b].tolist()
            kb = torch.stack([x.k[table[t // shape.page_size], t % shape.page_size] for t in range(lk[b])], 1)
            vb = torch.stack([x.v[table[t // shape.page_size], t % shape.page_size] for t in range(lk[b])], 1)
        elif shape.packed:
            kb, vb = x.k[0, :, ck[b]:ck[b + 1]], x.v[0, :, ck[b]:ck[b + 1]]
        else:
            kb, vb = x.k[b], x.v[b]
        want = _brute(qb, kb, vb, scale=x.scale, causal=shape.causal, window=shape.window)
        got = ref[0, :, cq[b]:cq[b + 1]] if shape.packed else ref[b]
        assert torch.allclose(got, want, atol=1e-12, rtol=0), (kind, b, float((got - want).abs().max()))
        want_abs = _brute(qb, kb, vb.abs(), scale=x.scale, causal=shape.causal, window=shape.window)
        got_abs = pv_abs[0, :, cq[b]:cq[b + 1]] if shape.packed else pv_abs[b]
        assert torch.allclose(got_abs, want_abs, atol=1e-12, rtol=0), (kind, b)


def test_the_causal_mask_is_aligned_to_the_end_of_the_cache_not_its_start():
    x = _inputs(_shape(seq_len=1))
    ref = workload_reference(x)
    # a single query at the end of the cache sees every key: non-causal attention of the same tensors
    full = workload_reference(_inputs(_shape(seq_len=1, causal=False)))
    assert torch.allclose(ref, full, atol=1e-12)
    # the top-left reading would have let it see key 0 alone, its output that key's value
    assert not torch.allclose(ref[:, :, 0], x.v[:, [0, 0, 1, 1], 0].double(), atol=1e-3)


@pytest.mark.parametrize("kw", [dict(page_size=4), dict(page_size=3, window=4), dict(page_size=1)])
def test_a_paged_cache_holds_the_dense_values_in_shuffled_pages_and_junk_elsewhere(kw):
    shape = _shape(**kw)
    paged, dense = _inputs(shape), _logical(shape)
    assert torch.equal(paged.q, dense.q)
    for seq, b in zip(sequences(paged), range(shape.batch)):
        assert torch.equal(seq.k[0], dense.k[b]) and torch.equal(seq.v[0], dense.v[b])
    assert torch.equal(workload_reference(paged), workload_reference(dense))
    table = paged.page_table.tolist()
    used = [p for b, row in enumerate(table) for p in row[:shape.pages_per_sequence()[b]]]
    assert len(set(used)) == len(used)  # no page shared
    if len(used) > 2:
        assert used != sorted(used)  # shuffled, as a serving engine leaves them
    assert shape.num_pages > len(used) and paged.kv_lens.tolist() == [11, 11]
    # every slot no sequence owns holds values unlike the data (N(0, 1) against the source's), so a kernel that
    # reads them cannot pass
    owned = {(table[b][t // shape.page_size], t % shape.page_size) for b in range(shape.batch) for t in range(11)}
    junk = [paged.v[p, o] for p in range(shape.num_pages) for o in range(shape.page_size) if (p, o) not in owned]
    assert junk and all(torch.isfinite(t).all() for t in junk)


def test_varlen_packs_each_sequence_at_its_cu_seqlens_rows_with_its_last_queries():
    shape = _shape(batch=3, seq_len=4, kv_lens=(9, 2, 11))
    x = _inputs(shape)
    assert shape.q_lengths() == (4, 2, 4)  # a sequence shorter than S_q is all queries
    assert x.cu_seqlens_q.tolist() == [0, 4, 6, 10] and x.cu_seqlens_kv.tolist() == [0, 9, 11, 22]
    assert tuple(x.q.shape) == (1, 4, 10, 8) and tuple(x.k.shape) == (1, 2, 22, 8)
    assert x.kv_lens.dtype == torch.int32 and x.page_table is None
    paged = _inputs(_shape(batch=3, seq_len=4, kv_lens=(9, 2, 11), page_size=4))
    assert torch.equal(workload_reference(paged), workload_reference(x))  # the same values, paged


def test_the_fingerprint_covers_the_page_table_and_lengths():
    from harness.inputs import changed, fingerprint, restore

    spec = InputSpec(shape=_shape(batch=3, seq_len=1, kv_lens=(9, 4, 11), page_size=4), dtype="float32")
    x = make_inputs(spec, device="cpu")
    before = fingerprint(x)
    assert set(before) == {"q", "k", "v", "page_table", "kv_lens", "cu_seqlens_q", "cu_seqlens_kv"}
    x.page_table[0, 0] += 1
    x.kv_lens[1] = 3
    assert changed(before, fingerprint(x)) == ["page_table", "kv_lens"]
    restore(x, spec)
    assert changed(before, fingerprint(x)) == []


def test_shapes_refuse_what_they_cannot_be():
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match="--seq-len-q <= --seq-len-kv"):
        _shape(seq_len=12)
    with pytest.raises(ConfigError, match="one length per sequence"):
        _shape(kv_lens=(3,))
    with pytest.raises(ConfigError, match=r"outside 1\.\.11"):
        _shape(kv_lens=(3, 12))
    with pytest.raises(ConfigError, match="--window 0"):
        _shape(window=0)
    assert _shape(page_size=4).features() == {"decode", "paged"} and not _shape(seq_len=11).features()


def _pairs_brute(shape):
    pairs = diag = keys = 0
    for lq, lkv in zip(shape.q_lengths(), shape.kv_lengths()):
        seen = set()
        for i in range(lq):
            p = lkv - lq + i
            for j in range(lkv):
                if _visible(p, j, causal=shape.causal, window=shape.window):
                    pairs += 1
                    seen.add(j)
                    diag += int(j == p and shape.causal)
        keys += len(seen)
    return pairs, diag, keys


@pytest.mark.parametrize("kind", KINDS)
def test_flops_and_bytes_count_the_visible_pairs_and_keys(kind):
    s = _shape(**KINDS[kind])
    pairs, diag, keys = _pairs_brute(s)
    assert s.flops == (2 * pairs - diag) * s.heads_q * (s.head_dim_qk + s.head_dim_v)
    q = sum(s.q_lengths())
    index = (4 * (sum(s.pages_per_sequence()) + s.batch) if s.paged else 0) + (
        (8 * (s.batch + 1) + (0 if s.paged else 4 * s.batch)) if s.packed else 0)
    assert s.bytes_moved(item=2, out_item=2) == 2 * (q * s.heads_q * 8 * 2 + keys * s.heads_kv * 16) + index


def test_flops_keep_the_protocol_for_self_attention_and_flash_attentions_decode_formula():
    s = AttentionShape(batch=2, heads_q=4, heads_kv=4, seq_len=64, head_dim_qk=16)
    assert s.flops == 2 * 4 * 64**2 * 32  # B H S^2 (dqk + dv), causal
    assert AttentionShape(batch=2, heads_q=4, heads_kv=4, seq_len=64, head_dim_qk=16, causal=False).flops == 2 * s.flops
    d = AttentionShape(batch=2, heads_q=4, heads_kv=1, seq_len=4, seq_len_kv=100, head_dim_qk=16)
    # FlashAttention's benchmark: B H 2 S_q avg (dqk + dv), avg = (S_kv - S_q + S_kv) / 2
    assert d.flops == 2 * 4 * 2 * 4 * (100 - 4 + 100) / 2 * 32
    # q read and the output written (B S_q Hq d each), each sequence's 100 keys and values once for its one KV head
    assert d.bytes_moved(item=2, out_item=2) == 2 * (2 * 4 * 4 * 16 * 2 + 2 * 100 * 32)
