"""The gate's NaN-leak check on packed (varlen) and paged batches: one sequence's NaN must reach no other's output.

The mixing kernels here are correct on finite inputs (they pass every comparison) and differ from a correct
kernel only in HOW they mask another sequence's keys: by multiplying its P by 0, which keeps a NaN."""

from __future__ import annotations

import pytest
import torch

from harness.errors import GateFailure
from harness.inputs import AttentionShape, InputSpec, make_inputs, sequences
from harness.kernels import Kernel, default_registry, gate, reference_attention
from harness.kernels._leak import poison_sequence

PACKED = AttentionShape(batch=3, heads_q=2, heads_kv=1, seq_len=6, kv_lens=(6, 3, 5), head_dim_qk=16)
PAGED = AttentionShape(batch=3, heads_q=2, heads_kv=1, seq_len=1, seq_len_kv=9, page_size=4, head_dim_qk=16)


def _inputs(shape):
    return make_inputs(InputSpec(shape=shape, dtype="float32", source="gaussian:1", seed=2), device="cpu")


def _kernel(name, prepare):
    return Kernel(name=name, prepare=prepare, dtypes=frozenset({"float32"}), devices=frozenset({"cpu"}),
                  workloads=frozenset({"varlen", "paged", "decode"}), tolerance="fp32")


def _mixing_packed(inputs):
    """Attention over the whole packed stream, another sequence's keys masked by P x 0 (their scores are computed,
    exponentiated and multiplied away); the causal mask aligned to each sequence's end."""
    s = inputs.shape

    def launch():
        q, k, v = inputs.q[0], inputs.k[0], inputs.v[0]  # [H, rows, d]
        rows_seq = torch.repeat_interleave(torch.arange(s.batch), torch.tensor(s.q_lengths()))
        keys_seq = torch.repeat_interleave(torch.arange(s.batch), torch.tensor(s.kv_lengths()))
        k_pos = torch.cat([torch.arange(n) for n in s.kv_lengths()])
        q_pos = torch.cat([torch.arange(lk - lq, lk) for lq, lk in zip(s.q_lengths(), s.kv_lengths())])
        keep = (rows_seq[:, None] == keys_seq[None, :]) & (k_pos[None, :] <= q_pos[:, None])
        kk = k.repeat_interleave(s.heads_q // s.heads_kv, 0)
        vv = v.repeat_interleave(s.heads_q // s.heads_kv, 0)
        scores = (q @ kk.transpose(-1, -2)) * inputs.scale
        m = scores.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
        p = torch.exp(scores - m) * keep  # the leak: 0 x exp(NaN) is NaN
        return ((p @ vv) / p.sum(-1, keepdim=True)).unsqueeze(0)

    return launch


def test_a_correct_varlen_kernel_passes_and_a_mixing_one_fails_only_the_leak_check():
    x = _inputs(PACKED)
    assert gate(default_registry().get("reference-fp64"), x, default_registry().get("reference-fp64").prepare(x)).passed
    mixing = _kernel("mixing", _mixing_packed)
    out = _mixing_packed(x)()
    assert torch.allclose(out.double(), reference_attention_packed(x), atol=1e-5)  # right on finite inputs
    with pytest.raises(GateFailure, match="leaks NaN across sequences") as info:
        gate(mixing, x, mixing.prepare(x))
    assert "sequence(s) [0, 2]" in str(info.value) and "[1]" in str(info.value)
    before = [t.clone() for t in (x.q, x.k, x.v)]
    assert all(torch.equal(a, b) for a, b in zip(before, (x.q, x.k, x.v)))  # restored after the check


def reference_attention_packed(x):
    out = torch.empty(x.q.shape, dtype=torch.float64)
    for seq in sequences(x):
        out[seq.rows] = reference_attention(seq.q, seq.k, seq.v, scale=x.scale, causal=True)
    return out


def _mixing_paged(inputs):
    """Each sequence reads its own pages and the next sequence's first page too, masked by P x 0."""
    s = inputs.shape

    def launch():
        out = torch.empty(s.out_shape(), dtype=torch.float32)
        seqs = sequences(inputs)
        for seq in seqs:
            nxt = seqs[(seq.index + 1) % len(seqs)]
            k = torch.cat([seq.k, nxt.k[:, :, :s.page_size]], 2)
            v = torch.cat([seq.v, nxt.v[:, :, :s.page_size]], 2)
            n = seq.k.shape[2]
            keep = torch.arange(k.shape[2]) < n
            scores = (seq.q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * inputs.scale
            p = torch.exp(scores - scores.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)) * keep
            out[seq.rows] = (p @ v.repeat_interleave(2, 1)) / p.sum(-1, keepdim=True)
        return out

    return launch


def test_paged_pools_are_poisoned_page_by_page_and_a_neighbour_reading_kernel_fails():
    x = _inputs(PAGED)
    ref = default_registry().get("reference-fp64")
    assert gate(ref, x, ref.prepare(x)).passed
    mixing = _kernel("mixing-paged", _mixing_paged)
    with pytest.raises(GateFailure, match="leaks NaN"):
        gate(mixing, x, mixing.prepare(x))
    poison_sequence(x, 1)
    seqs = sequences(x)
    assert torch.isnan(seqs[1].k).all() and torch.isnan(seqs[1].v).all() and torch.isnan(seqs[1].q).all()
    assert torch.isfinite(seqs[0].k).all() and torch.isfinite(seqs[2].v).all() and torch.isfinite(seqs[0].q).all()


def test_every_other_sequence_is_poisoned_then_the_rest():
    """Four sequences: the check's two launches see NaN in sequences 0 and 2, then in 1 and 3, and never in both."""
    shape = AttentionShape(batch=4, heads_q=2, heads_kv=1, seq_len=5, kv_lens=(5, 3, 4, 2), head_dim_qk=16)
    x = _inputs(shape)
    seen = []

    def prepare(inputs):
        ref = default_registry().get("reference-fp64").prepare(inputs)

        def launch():
            seen.append(tuple(s.index for s in sequences(inputs) if torch.isnan(s.k).any()))
            return ref()

        return launch

    gate(_kernel("spy", prepare), x, prepare(x))
    assert seen[-2:] == [(0, 2), (1, 3)] and all(s == () for s in seen[:-2])
