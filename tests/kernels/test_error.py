"""Error of one attention call and its split by stage, on the CPU with emulated kernels."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import InputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, reference_attention
from harness.kernels._error import attention_error, emulate_p_attention, error_between, kernel_reference_inputs
from harness.kernels._quant import dequantize, pow2_scale, quantize_e4m3_pow2
from kernels_under_test.sdpa import registry as sdpa


def _inputs(seq_len=96, source="gaussian:1.0", causal=True):
    shape = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=seq_len, head_dim_qk=64, causal=causal)
    return make_inputs(InputSpec(shape=shape, dtype="bfloat16", source=source, seed=5), device="cpu")


def _fake_fp8_kernel(p_mode, *, skew=0.0):
    """An 'FP8 kernel' whose output is the P emulation itself (plus an optional error of its own)."""

    def prepare(inputs):
        q, k, v = kernel_reference_inputs(kernel, inputs)
        out = emulate_p_attention(q, k, v, scale=inputs.scale, causal=inputs.shape.causal, p_mode=p_mode)
        out = (out * (1.0 + skew)).to(torch.bfloat16)
        return lambda: out

    kernel = Kernel(
        name=f"fake-fp8-{p_mode}", prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
        extra={"quant": "e4m3-pow2", "p_mode": p_mode, "p_block": 64, "reads_inputs_at_launch": False},
    )
    return kernel


def test_error_between_is_relative_rms_and_max_abs():
    ref = torch.tensor([3.0, -4.0], dtype=torch.float64)
    e = error_between(ref + torch.tensor([0.0, 0.5], dtype=torch.float64), ref)
    assert e.max_abs == 0.5
    assert e.rel_rms == pytest.approx(math.sqrt(0.25 / 2) / math.sqrt(25 / 2))


def test_bf16_kernel_has_no_stages_and_a_small_error():
    x = _inputs()
    report = attention_error(sdpa.get("sdpa-cpu"), x)
    assert report.stages == {} and report.vs_unquantized is None
    assert 0 < report.total.rel_rms < 5e-3
    assert "bfloat16 inputs" in report.reference


@pytest.mark.parametrize("p_mode", ["exact", "lean"])
def test_fp8_error_splits_into_input_p_and_kernel_terms(p_mode):
    x = _inputs()
    report = attention_error(_fake_fp8_kernel(p_mode), x)
    assert set(report.stages) == {"input", "p", "kernel"} and report.p_mode == p_mode
    s = report.stages
    # Quantizing q, k, v costs more than quantizing P, and this fake kernel adds only its bf16 output.
    assert s["input"].rel_rms > s["p"].rel_rms > s["kernel"].rel_rms > 0
    assert s["kernel"].rel_rms < 2.0**-8
    # The total is measured against fp64 on the quantized inputs, so it is about the P term.
    assert report.total.rel_rms == pytest.approx(math.hypot(s["p"].rel_rms, s["kernel"].rel_rms), rel=0.3)
    assert report.vs_unquantized.rel_rms > report.total.rel_rms


def test_a_kernel_error_of_its_own_lands_in_the_kernel_term():
    x = _inputs()
    clean = attention_error(_fake_fp8_kernel("exact"), x)
    skewed = attention_error(_fake_fp8_kernel("exact", skew=0.02), x)
    assert skewed.stages["input"] == clean.stages["input"] and skewed.stages["p"] == clean.stages["p"]
    assert skewed.stages["kernel"].rel_rms == pytest.approx(0.02, rel=0.1)


def test_lean_p_term_exceeds_exact_p_term_on_the_same_inputs():
    x = _inputs(seq_len=256)
    exact = attention_error(_fake_fp8_kernel("exact"), x).stages["p"].rel_rms
    lean = attention_error(_fake_fp8_kernel("lean"), x).stages["p"].rel_rms
    assert 1.0 < lean / exact < 1.7


def test_the_reference_uses_exactly_the_quantized_values():
    x = _inputs(seq_len=32)
    qd, kd, vd = kernel_reference_inputs(_fake_fp8_kernel("exact"), x)
    q8, dq = quantize_e4m3_pow2(x.q)
    assert torch.equal(qd, q8.to(torch.float64) * dq)
    ref = reference_attention(qd, kd, vd, scale=x.scale, causal=True)
    assert ref.dtype == torch.float64


def test_unknown_p_mode_is_refused():
    with pytest.raises(ValueError, match="unknown p_mode"):
        emulate_p_attention(*(torch.zeros(1, 1, 4, 8, dtype=torch.float64),) * 3, scale=1.0, causal=False, p_mode="x")


# quantization: one power-of-two scale per tensor


def test_pow2_scale_is_the_largest_power_of_two_that_fits():
    assert pow2_scale(448.0) == 1.0
    assert pow2_scale(447.9) == 1.0
    assert pow2_scale(224.0) == 2.0
    assert pow2_scale(0.1) == 2.0**12  # 0.1 * 4096 = 409.6 <= 448 < 819.2
    assert pow2_scale(0.0) == 1.0


def test_quantize_is_exact_power_of_two_and_never_saturates():
    g = torch.Generator().manual_seed(0)
    t = (torch.randn(4, 64, generator=g) * 3.7).to(torch.bfloat16)
    t8, descale = quantize_e4m3_pow2(t)
    assert t8.dtype == torch.float8_e4m3fn
    assert math.log2(descale) == int(math.log2(descale))
    amax = float(t8.float().abs().max())
    assert 224.0 < amax <= 448.0
    rel = (dequantize(t8, descale) - t.double()).abs() / t.double().abs().clamp_min(1e-30)
    assert float(rel[t.double().abs() > 2**-3].max()) <= 2.0**-4  # round to nearest with 3 mantissa bits


def test_quantize_zeros_and_nonfinite():
    t8, descale = quantize_e4m3_pow2(torch.zeros(8, dtype=torch.bfloat16))
    assert descale == 1.0 and not t8.float().any()
    with pytest.raises(InputError, match="NaN or Inf"):
        quantize_e4m3_pow2(torch.tensor([1.0, float("nan")]))
