"""The stress sources draw what harness/inputs/_stress.py says they draw (its statistics, measured)."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import InputError
from harness.inputs import AttentionShape, InputSpec, check_source, make_inputs

SHAPE = AttentionShape(batch=2, heads_q=4, heads_kv=2, seq_len=2048, head_dim_qk=64)


def _x(source, shape=SHAPE, seed=0):
    return make_inputs(InputSpec(shape=shape, dtype="float32", source=source, seed=seed), device="cpu")


def test_outliers_put_a_large_key_bias_in_d_over_16_channels_shared_by_a_kv_head_and_its_queries():
    x = _x("outliers:20")
    k_mean, k_std = x.k.mean(dim=(0, 2)), x.k.std(dim=(0, 2))  # per KV head and channel
    q_std = x.q.std(dim=(0, 2))
    for h in range(2):
        out = (k_mean[h] > 10).nonzero().flatten()
        assert len(out) == 64 // 16
        assert torch.allclose(k_mean[h, out], torch.full((4,), 20.0), atol=0.5)
        assert torch.allclose(k_std[h, out], torch.full((4,), 5.0), rtol=0.1)
        normal = torch.ones(64, dtype=torch.bool)
        normal[out] = False
        assert k_mean[h, normal].abs().max() < 0.15 and torch.allclose(k_std[h, normal], torch.ones(60), rtol=0.1)
        for qh in (2 * h, 2 * h + 1):  # GQA: both query heads of KV head h widen the same channels
            assert torch.allclose(q_std[qh, out], torch.full((4,), 5.0), rtol=0.1)
            assert x.q[:, qh][..., out].mean(dim=(0, 1)).abs().max() < 0.5  # no bias on the query side
            assert torch.allclose(q_std[qh, normal], torch.ones(60), rtol=0.1)
    assert not torch.equal((k_mean[0] > 10), (k_mean[1] > 10))  # each KV head its own channels
    assert torch.allclose(x.v.std(), torch.tensor(1.0), rtol=0.05)


def test_a_sink_scores_l_nats_above_the_other_keys_for_every_query():
    x = _x("sinks:6")
    scores = torch.einsum("bhqd,bhkd->bhqk", x.q, x.k.repeat_interleave(2, 1)) * x.scale
    gap = scores[..., 0] - scores[..., 1:].mean(-1)
    others = scores[..., 1:]
    assert abs(float(gap.mean()) - 6.0) < 0.1
    assert abs(float(scores[..., 0].std()) - 6.0 / 8) < 0.05  # N(0, L^2/d) around L
    assert abs(float(others.std()) - math.sqrt(2.0)) < 0.05  # N(0, 2) for every other key
    weight = torch.softmax(scores[..., :1024, :1024], -1)[..., 0]  # the non-causal share at S = 1024
    assert 0.12 < float(weight.mean()) < 0.18  # the doc's "about 15 %" at L = 6
    assert torch.allclose(x.v.std(), torch.tensor(1.0), rtol=0.05)


def _t3_tail(t: float) -> float:
    """P(T > t) for Student-t with 3 degrees of freedom (closed form)."""
    a = t / math.sqrt(3)
    return 0.5 - (math.atan(a) + a / (1 + a * a)) / math.pi


def test_heavy_tails_are_student_t_scaled_to_unit_variance():
    x = _x("heavytail:3")
    for t in (x.q, x.k, x.v):
        flat = t.flatten().double()
        scale = math.sqrt(1 / 3)  # x sqrt((nu - 2) / nu): the t draw is flat / scale
        for z in (1.0, 3.0, 6.0):
            want = 2 * _t3_tail(z / scale)
            got = float((flat.abs() > z).double().mean())
            assert abs(got - want) < 4 * math.sqrt(want / flat.numel()) + 1e-5, (z, got, want)
        assert abs(float(flat.median())) < 0.01
    assert float((x.q.abs() > 8).double().mean()) > 1e-4  # a Gaussian puts ~1e-15 there


def test_same_seed_same_inputs_other_seed_other_structure():
    a, b, c = _x("outliers:20", seed=1), _x("outliers:20", seed=1), _x("outliers:20", seed=2)
    assert torch.equal(a.k, b.k) and torch.equal(a.q, b.q)
    assert not torch.equal(a.k.mean(dim=(0, 2)) > 10, c.k.mean(dim=(0, 2)) > 10)


@pytest.mark.parametrize("bad", ["sinks:x", "heavytail:2", "outliers:-1", "outliers:inf"])
def test_bad_parameters_are_refused_by_flag(bad):
    with pytest.raises(InputError, match="--input"):
        check_source(bad)
