"""Lean P against its formula and against exact P, in pure torch (no Triton needed).

protocol.md "Lean P": y = 8 (x + sigma + 7) - beta, rounded and clamped to the e4m3 code; within 7.5 %
of p per value; lean-P output error 1.22-1.36x that of exact P in the paper.
"""

from __future__ import annotations

import math

import torch

from harness.kernels._error import emulate_p_attention, error_between
from harness.kernels._quant import e4m3_code_values, lean_p_codes, quantize_p
from harness.kernels._reference import reference_attention

SIGMA, BETA = 6.0, 0.35


def test_code_values_match_the_e4m3fn_format():
    codes = torch.arange(0, 127, dtype=torch.uint8)
    assert torch.equal(e4m3_code_values(codes), codes.view(torch.float8_e4m3fn).to(torch.float64))


def test_codes_of_the_anchor_points():
    u = torch.tensor([0.0, -1.0, -2.0, 0.125, -12.0, -13.5, -40.0, -math.inf], dtype=torch.float64)
    codes = lean_p_codes(u).tolist()
    # 2^0 * 2^6 = 64 is code 104 = 8 * 13; each binade down is 8 codes; tau = 0.125 above gives 105;
    # below 2^-12 * 64 = 2^-6 (code 8) the codes go subnormal and reach 0.
    assert codes == [104, 96, 88, 105, 8, 0, 0, 0]
    assert e4m3_code_values(torch.tensor([104])).item() == 64.0


def test_lean_p_is_within_7_5_percent_of_p_for_normal_codes():
    u = torch.linspace(-12.0, 0.125, 400_001, dtype=torch.float64)  # P = 2^(u + 6) >= 2^-6: normal codes
    rel = e4m3_code_values(lean_p_codes(u)) / torch.exp2(u + SIGMA) - 1.0
    assert rel.abs().max() < 0.075
    assert rel.abs().max() > 0.07  # the bound is tight: beta centres the chord error, it does not remove it
    exact = torch.exp2(u + SIGMA).to(torch.float8_e4m3fn).to(torch.float64) / torch.exp2(u + SIGMA) - 1.0
    assert exact.abs().max() < 0.0625  # round to nearest: half a step of 1/8


def test_the_largest_code_stays_below_nan():
    u = torch.linspace(-200.0, 0.125, 10_001, dtype=torch.float64)  # x <= tau = 0.125 under lazy rescale
    assert int(lean_p_codes(u).max()) == 105 < 127


def _kernel_lean_codes(qk, qk_scale, m, o):
    # The kernel's arithmetic in fp32: one FMA for y, then + 2^23 rounds to an integer in the low bits.
    c0 = (8.0 * (SIGMA + 7.0 + o - m) - BETA).to(torch.float32)
    y = torch.addcmul(c0, qk, torch.tensor(qk_scale * 8.0, dtype=torch.float32))
    z = torch.clamp_min(y + 8388608.0, 8388608.0)
    return (z.view(torch.int32) & 0xFF).to(torch.uint8)


def test_the_kernel_fma_and_magic_add_give_the_formulas_codes():
    g = torch.Generator().manual_seed(3)
    qk = (torch.randn(64, 64, generator=g) * 300.0).round()  # fp8 products summed: integer-ish fp32 values
    qk_scale = 0.0173
    m = (qk.amax(-1, keepdim=True) * qk_scale).to(torch.float32)
    o = torch.clamp(torch.floor(m - (qk * qk_scale).amax(-1, keepdim=True)), 0, 100)
    got = _kernel_lean_codes(qk, qk_scale, m, o)
    want = lean_p_codes(qk.double() * qk_scale - m.double() + o.double())
    # fp32 vs fp64 evaluation may differ only where y sits on a rounding boundary
    assert (got.int() - want.int()).abs().max() <= 1
    assert (got != want).float().mean() < 1e-3


def test_quantize_p_undoes_the_block_scaling():
    t = torch.tensor([[0.0, -3.2, -9.7, -1.0] + [-math.inf] * 4], dtype=torch.float64)  # blocks of 4 keys
    for mode in ("exact", "lean"):
        p = quantize_p(t, p_mode=mode, block=4)
        assert p[0, 0].item() == 1.0  # the row max is code 104 = 2^sigma, scaled back to 1
        assert torch.all(p[0, 4:] == 0)  # a fully masked block adds nothing (its o is capped)
        assert torch.allclose(p[0, :4], torch.exp2(t[0, :4]), rtol=0.075)


def test_block_offsets_keep_small_blocks_accurate():
    # A block 20 binades below the row max would underflow e4m3 without its own offset o.
    t = torch.tensor([[0.0] * 4 + [-20.0, -20.5, -21.0, -22.0]], dtype=torch.float64)
    for mode in ("exact", "lean"):
        p = quantize_p(t, p_mode=mode, block=4)
        assert torch.allclose(p[0, 4:], torch.exp2(t[0, 4:]), rtol=0.075)


def test_lean_p_costs_some_accuracy_compared_with_exact_p():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 512, 64, generator=g, dtype=torch.float64) for _ in range(3))
    scale = 64**-0.5
    ref = reference_attention(q, k, v, scale=scale, causal=True)
    err = {
        mode: error_between(emulate_p_attention(q, k, v, scale=scale, causal=True, p_mode=mode), ref).rel_rms
        for mode in ("exact", "lean")
    }
    # The paper saw 1.22-1.36x; any ratio far outside says the emulation drifted from the formula.
    assert 1.05 < err["lean"] / err["exact"] < 1.6, err


def test_rounding_p_alone_misses_the_fp8_gate_on_the_first_rows_of_std1_inputs():
    # Why an FP8 kernel fails the gate's max |diff| < 0.03 on std-1 Gaussian inputs: with the exact row
    # max and fp64 sums, rounding p per value (lean within 7.5 %, exact within 6.25 %) already moves the
    # output of a row with a handful of keys by up to ~0.04 (exact) / ~0.06 (lean). Long rows average it
    # out. (On the H200 inputs, B1 H32 S16384 d128 seed 0, the lean emulation gives max |diff| 0.0636 at
    # head 1 row 1, what triton-fp8-lean measured; exact P 0.045.)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 512, 128, generator=g, dtype=torch.float64) for _ in range(3))
    ref = reference_attention(q, k, v, scale=128**-0.5, causal=True)
    row_max = {
        mode: (emulate_p_attention(q, k, v, scale=128**-0.5, causal=True, p_mode=mode) - ref).abs().amax(-1)[0]
        for mode in ("exact", "lean")
    }
    for mode, limit in (("exact", 0.035), ("lean", 0.05)):
        assert row_max[mode][:, :16].max() > limit, mode  # rows 0..15: 1 to 16 keys
        assert row_max[mode][:, 256:].max() < 0.02, mode  # rows with >= 257 keys
    assert row_max["lean"][:, :16].max() > row_max["exact"][:, :16].max()


def test_fp8_gate_allows_p_rounding_on_first_rows_but_snr_still_catches_a_wrong_kernel():
    # The rows above miss max |diff| < 0.03 through P's own rounding; the gate allows p_rounding * rms(v)
    # for it (lean P: its declared 7.5 %) and keeps SNR >= 30 dB unrelaxed, so a kernel 5 % off
    # everywhere (SNR 26 dB) still fails.
    from dataclasses import replace

    from harness.kernels._gate import compare_outputs
    from harness.kernels._tolerance import gate_tolerance

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 512, 128, generator=g, dtype=torch.float64) for _ in range(3))
    ref = reference_attention(q, k, v, scale=128**-0.5, causal=True)
    v_rms = float(v.pow(2).mean().sqrt())
    fp8 = gate_tolerance("fp8")
    for mode, tol in (("exact", fp8), ("lean", replace(fp8, p_rounding=0.075))):
        out = emulate_p_attention(q, k, v, scale=128**-0.5, causal=True, p_mode=mode)
        result = compare_outputs(out, ref, kernel=mode, tolerance=tol, v_rms=v_rms)
        assert result.max_abs_diff > 0.03 and result.passed, (mode, result.summary())
        wrong = compare_outputs(ref * 1.05, ref, kernel="5% off", tolerance=tol, v_rms=v_rms)
        assert not wrong.passed and "SNR" in wrong.reason, wrong.summary()
    # Without the P allowance the protocol's bare limit fails the exact-P emulation (what the H200 showed).
    bare = compare_outputs(emulate_p_attention(q, k, v, scale=128**-0.5, causal=True, p_mode="exact"), ref,
                           kernel="exact", tolerance=replace(fp8, p_rounding=0.0), v_rms=v_rms)
    assert not bare.passed and "max |diff|" in bare.reason


def test_lean_kernel_declares_its_p_error_bound_to_the_gate():
    from kernels_under_test.triton_fp8 import registry

    assert registry.get("triton-fp8-lean").extra["p_rel_error"] == 0.075
    assert registry.get("triton-fp8-exact").extra["p_rel_error"] == 2.0**-4
