"""The hook records exactly what attention receives: checked against an independent computation of
layer 0's post-RoPE q, k, v, and end to end through `capture` on tiny Llama, Qwen3 and DeepSeek-V2."""

from __future__ import annotations

import math

import pytest
from capture_tiny import SEQ, VOCAB, build_model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _record(model, layers, seq=SEQ, batch=1):
    from harness.capture._hook import recording, run_forward

    ids = torch.randint(0, VOCAB - 1, (batch, seq), generator=torch.Generator().manual_seed(1))
    with recording(layers) as recorder:
        records = run_forward(model, ids, recorder)
    return ids, records


def _rope_half(x, theta):
    """Rotate-half RoPE (Llama/Qwen layout), computed here from theta alone."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1).float(), torch.cat([ang.sin()] * 2, -1).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _rope_interleaved(x, theta):
    """DeepSeek's RoPE: consecutive pairs (x0, x1), (x2, x3), ... rotated as complex numbers."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * inv[None, :]
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(ang), ang)).flatten(-2).float()


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_gqa_layer0_matches_independent_rope(kind):
    model = build_model(kind)
    ids, records = _record(model, [0, 2])
    layer = model.model.layers[0]
    attn = layer.self_attn
    H, Hkv, d = 4, 2, 16
    with torch.no_grad():
        x = layer.input_layernorm(model.model.embed_tokens(ids))
        q = attn.q_proj(x).view(1, SEQ, H, d)
        k = attn.k_proj(x).view(1, SEQ, Hkv, d)
        v = attn.v_proj(x).view(1, SEQ, Hkv, d).transpose(1, 2)
        if kind == "qwen3":  # QK-norm comes before RoPE; the capture must hold the normalized values
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = _rope_half(q.transpose(1, 2), 10000.0), _rope_half(k.transpose(1, 2), 10000.0)
    r = records[0]
    assert r.q.shape == (1, H, SEQ, d) and r.k.shape == (1, Hkv, SEQ, d), "k must be captured before the GQA repeat"
    assert r.q.is_contiguous() and r.k.is_contiguous() and r.v.is_contiguous()
    assert r.q.device.type == "cpu"
    torch.testing.assert_close(r.q, q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.k, k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.v, v, atol=1e-6, rtol=1e-6)
    assert r.scale == pytest.approx(d**-0.5) and r.causal
    assert r.qk_norm == (kind == "qwen3")
    assert sorted(records) == [0, 2], "only requested layers are kept"


def test_mla_layer0_matches_independent_computation():
    model = build_model("deepseek_v2")
    ids, records = _record(model, [0])
    layer = model.model.layers[0]
    a = layer.self_attn
    H, nope, rope, dv = 4, 16, 8, 16
    with torch.no_grad():
        x = layer.input_layernorm(model.model.embed_tokens(ids))
        q = a.q_proj(x).view(1, SEQ, H, nope + rope).transpose(1, 2)
        q_nope, q_pe = q.split([nope, rope], -1)
        kv_nope, k_pe = a.kv_a_proj_with_mqa(x).split([32, rope], -1)
        kv = a.kv_b_proj(a.kv_a_layernorm(kv_nope)).view(1, SEQ, H, nope + dv).transpose(1, 2)
        k_nope, v = kv.split([nope, dv], -1)
        k_rot = _rope_interleaved(k_pe[:, None], 10000.0).expand(-1, H, -1, -1)
        q = torch.cat([q_nope, _rope_interleaved(q_pe, 10000.0)], -1)
        k = torch.cat([k_nope, k_rot], -1)
    r = records[0]
    # What MLA prefill hands attention: dqk = nope + rope = 24 per head, k expanded per head, v unpadded (dv = 16).
    assert r.q.shape == (1, H, SEQ, 24) and r.k.shape == (1, H, SEQ, 24) and r.v.shape == (1, H, SEQ, dv)
    torch.testing.assert_close(r.q, q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.k, k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r.v, v, atol=1e-6, rtol=1e-6)
    assert r.scale == pytest.approx(24**-0.5)


def test_mla_yarn_scale_is_the_one_attention_receives():
    model = build_model("deepseek_v2_yarn")
    _, records = _record(model, [1])
    mscale = 0.1 * 0.707 * math.log(4.0) + 1.0
    assert records[1].scale == pytest.approx(24**-0.5 * mscale**2)


def test_recorder_replays_model_output_bitwise():
    """Delegating to stock sdpa: the model's attention output equals sdpa on the captured tensors."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    model = build_model("llama")
    _, records = _record(model, [1], batch=2)
    r = records[1]
    out, _ = sdpa_attention_forward(model.model.layers[1].self_attn, r.q, r.k, r.v, None, scaling=r.scale)
    assert torch.equal(out.transpose(1, 2), r.out)


def test_forward_stops_after_last_requested_layer():
    from harness.capture._hook import recording, run_forward

    model = build_model("llama")
    calls = []
    with recording([1], on_call=calls.append) as recorder:
        run_forward(model, torch.zeros((1, 8), dtype=torch.long), recorder)
    assert calls == [0, 1]


@pytest.mark.parametrize("kind", ["llama", "qwen3", "deepseek_v2", "deepseek_v2_yarn"])
def test_capture_end_to_end(kind, model_dirs, text_file, tmp_path):
    from harness.capture import CaptureConfig, capture, load_capture

    result = capture(CaptureConfig(model=str(model_dirs[kind]), layers=(2, 0), seq_len=SEQ, text=str(text_file),
                                   root=tmp_path))
    assert [r.layer for r in result.layers] == [0, 2]
    dv = 16
    dqk = 24 if kind.startswith("deepseek") else 16
    hkv = 4 if kind.startswith("deepseek") else 2
    for r in result.layers:
        assert r.self_check_max_abs_diff <= 1e-5
        x = load_capture(r.path)
        assert (x.shape.heads_q, x.shape.heads_kv, x.shape.head_dim_qk, x.shape.head_dim_v) == (4, hkv, dqk, dv)
        assert x.q.dtype == torch.bfloat16 and x.scale == r.scale
        assert x.provenance["model"]["attention_kind"] == ("mla" if kind.startswith("deepseek") else "gqa")
    assert result.directory.parent.name == kind


def test_self_check_catches_wrong_tensors(monkeypatch, model_dirs, text_file, tmp_path):
    """If the hook recorded something other than what attention used, the self-check refuses to save."""
    import harness.capture._capture as cap
    from harness.capture import CaptureConfig, capture
    from harness.errors import CaptureError

    real = cap.recompute

    def tampered(q, k, v, **kw):
        return real(q, k.roll(1, dims=2), v, **kw)  # as if k were captured one position off

    monkeypatch.setattr(cap, "recompute", tampered)
    with pytest.raises(CaptureError, match="Self-check failed for layer 0") as err:
        capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0, 1), seq_len=SEQ, text=str(text_file),
                              root=tmp_path))
    assert "nothing was saved" in str(err.value)
    assert not list(tmp_path.rglob("*.safetensors"))
