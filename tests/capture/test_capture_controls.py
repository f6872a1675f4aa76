"""Synthetic controls shaped like a capture, and e4m3 copies with power-of-two scales."""

from __future__ import annotations

import json
import math

import pytest

from harness.capture import (
    e4m3_scale,
    list_captures,
    load_capture,
    quantize_e4m3_pow2,
    save_like,
    synthesize_like,
)
from harness.errors import InputError
from harness.inputs import InputSpec, make_inputs

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dist", ["gaussian:0.1", "gaussian:1", "zeros", "constant:0.5", "randbits"])
def test_control_has_the_capture_shape(llama_capture, dist):
    path = llama_capture.layers[0].path
    real = load_capture(path)
    x = synthesize_like(path, dist, seed=3)
    for name in ("q", "k", "v"):
        assert getattr(x, name).shape == getattr(real, name).shape
        assert getattr(x, name).dtype == torch.bfloat16
    assert x.shape == real.shape and x.scale == real.scale
    assert x.provenance["like"] == str(path) and x.provenance["dist"] == dist
    # The same values a plain InputSpec of that shape and seed gives: one definition of each control.
    plain = make_inputs(InputSpec(shape=real.shape, dtype="bfloat16", source=dist, seed=3), device="cpu")
    assert torch.equal(plain.q, x.q) and torch.equal(plain.v, x.v)


def test_gaussian_matched_follows_the_capture_std(llama_capture):
    path = llama_capture.layers[1].path
    stats = json.loads((path.parent / "manifest.json").read_text())["layers"]["2"]["stats"]
    x = synthesize_like(path, "gaussian:matched", seed=0)
    for name in ("q", "k", "v"):
        assert float(getattr(x, name).float().std()) == pytest.approx(stats[f"{name}_std"], rel=0.05)
    assert x.provenance["matched_std"]["q"] == stats["q_std"]


def test_unknown_control(llama_capture):
    with pytest.raises(InputError, match="gaussian:matched"):
        synthesize_like(llama_capture.layers[0].path, "laplace:1")


def test_saved_control_loads_and_lists(llama_capture, capture_copy):
    path = save_like(capture_copy / "layer02.safetensors", dist="gaussian:0.1", seed=1)
    assert path.parent.name == f"{capture_copy.name}.gaussian-0.1.seed1"
    x = load_capture(path)
    assert x.provenance["kind"] == "synthetic" and x.provenance["dist"] == "gaussian:0.1"
    stats = x.provenance["stats"]
    assert stats["logit_std"] < 0.05  # std 0.1, d 16, scale 1/4: about 0.01, nearly uniform attention
    kinds = {(c.kind, c.layer) for c in list_captures(capture_copy.parent.parent)}
    assert ("synthetic", 2) in kinds and ("capture", 2) in kinds


def test_e4m3_scale_is_the_largest_safe_power_of_two():
    for absmax in (1e-3, 0.37, 1.0, 3.0, 447.9, 448.0, 449.0, 1e6):
        scale = e4m3_scale(absmax)
        assert math.log2(scale).is_integer()
        assert absmax * scale <= 448.0 < absmax * scale * 2
    assert e4m3_scale(0.0) == 1.0
    with pytest.raises(InputError, match="NaN or Inf"):
        e4m3_scale(float("inf"))


def test_quantize_e4m3_pow2():
    g = torch.Generator().manual_seed(0)
    t = (torch.randn(4, 256, generator=g) * 3.7).to(torch.bfloat16)
    q, descale = quantize_e4m3_pow2(t)
    assert q.dtype == torch.float8_e4m3fn and q.shape == t.shape
    assert descale == 1 / e4m3_scale(float(t.float().abs().max()))
    back = q.float() * descale
    assert torch.isfinite(back).all()
    assert float((back - t.float()).abs().max()) <= float(t.float().abs().max()) * 2**-4  # e4m3: 3 mantissa bits
    assert float(q.float().abs().max()) > 224  # the scale uses the top binade
