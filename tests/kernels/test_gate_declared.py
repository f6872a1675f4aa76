"""The gate by declared numerics, on the CPU without Triton: kernels emulated in torch.

A correct FP8 kernel rounds P at its own points (its running row max sits up to tau above or below the
exact one); that is modelled here by the emulation of the same numerics on scores shifted per row by up to
0.125 binade, which softmax itself ignores. On an input with an attention sink that carries half of each
row's weight and a value far from the others', such a kernel fails the format gate (max |diff| beyond
rounding >= 0.03: the issue-32 failure) and passes the gate by its declared numerics; a kernel with a
real bug fails both.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from harness.errors import GateFailure
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import (
    Kernel,
    Numerics,
    compare_declared,
    declared_numerics,
    declared_tolerance,
    emulate_declared,
    gate,
    gate_columns,
    kernel_reference_inputs,
    reference_attention,
)
from harness.kernels._gate import compare_outputs, declared_allowance, declared_rms
from harness.kernels._quant import quantize_p
from harness.kernels._tolerance import gate_tolerance, hoeffding_z

SHAPE = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=192, head_dim_qk=64)
EXTRA = {"quant": "e4m3-pow2", "p_block": 64, "sigma": 6.0, "beta": 0.35, "reads_inputs_at_launch": False}


def _inputs(source="gaussian:1", sink=False, seed=3):
    x = make_inputs(InputSpec(shape=SHAPE, dtype="bfloat16", source=source, seed=seed), device="cpu")
    if sink:
        # key 0 scores ~6 nats above the others for every query and carries a value far from theirs
        x.q[..., 0] = 1.0
        x.k[:, :, 0, 0] = 48.0
        x.v[:, :, 0, :8] = 32.0  # in a few channels, as the massive values of real sinks
    return x


def _shifted(numerics: Numerics, q, k, v, *, scale, causal, shift, drop=None):
    """The emulation of `numerics` with every row's scores shifted by shift[row] (base 2) before P is
    rounded: exact attention is unchanged, the rounding points are those of a stale reference max. `drop`:
    a slice of keys left out (a dropped block)."""
    B, Hq, S, _ = q.shape
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=torch.float64)
    from harness.kernels._reference import score_blocks

    for h, r0, r1, t, vb in score_blocks(q, k, v, scale=scale, causal=causal):
        if drop is not None:
            t = t.clone()
            t[..., drop] = -math.inf
            t[..., 0] = torch.where(torch.isinf(t).all(-1), 0.0, t[..., 0])  # rows that saw only dropped keys
        p = quantize_p(t - t.amax(-1, keepdim=True) + shift[r0:r1, None], p_mode=numerics.p_mode,
                       block=numerics.p_block, sigma=numerics.sigma, beta=numerics.beta)
        out[:, h, r0:r1] = (p @ vb) / p.sum(-1, keepdim=True)
    return out


def _kernel(p_mode, *, broken=None, name="emulated"):
    """An 'FP8 kernel' computing its declared numerics at shifted rounding points, then bf16 out; `broken`
    changes what it computes (a scale 5 % off, key block 1 dropped)."""

    def prepare(x):
        q, k, v = kernel_reference_inputs(kernel, x)
        g = torch.Generator().manual_seed(11)
        shift = torch.rand(x.shape.seq_len, generator=g, dtype=torch.float64) * 0.125
        drop = slice(64, 128) if broken == "drop-block" else None
        out = _shifted(declared_numerics(kernel), q, k, v, scale=x.scale, causal=True, shift=shift, drop=drop)
        if broken == "scale":
            out = out * 1.05
        out = out.to(torch.bfloat16)
        return lambda: out.clone()  # a fresh output every launch (the gate poisons the last one)

    kernel = Kernel(name=name, prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                    tolerance="fp8", output_dtype="bfloat16",
                    extra={**EXTRA, "p_mode": p_mode, "p_rel_error": 2.0**-4 if p_mode == "exact" else 0.075})
    return kernel


def _emulation(kernel, x):
    q, k, v = kernel_reference_inputs(kernel, x)
    return emulate_declared(declared_numerics(kernel), q, k, v, scale=x.scale, causal=True)


@pytest.mark.parametrize("p_mode", ["exact", "lean"])
def test_a_correct_kernel_fails_the_format_gate_on_a_sink_but_passes_by_its_declared_numerics(p_mode):
    x = _inputs("gaussian:0.1", sink=True)
    kernel = _kernel(p_mode)
    out = kernel.prepare(x)()
    em = _emulation(kernel, x)
    share = torch.softmax(torch.einsum("bhd,bhsd->bhs", x.q[:, :, -1].float(),
                                       x.k.float().repeat_interleave(2, 1)) * x.scale, -1)[..., 0]
    assert float(share.min()) > 0.3  # the sink carries a third or more of the last rows' weight
    tol = dataclasses.replace(gate_tolerance("fp8"), p_rounding=kernel.extra["p_rel_error"])
    old = compare_outputs(out, em.exact, kernel=kernel.name, tolerance=tol, v_rms=float(x.v.double().pow(2).mean().sqrt()))
    assert not old.passed and old.max_excess_diff > 0.03, old.summary()
    new = compare_declared(out, em, kernel=kernel.name)
    assert new.passed, new.summary()
    assert new.max_ratio < 0.7 and new.rms_ratio < 1.0 and new.snr_db >= 30
    assert gate(kernel, x, kernel.prepare(x)).passed  # gate() picks the declared path itself


@pytest.mark.parametrize("source", ["gaussian:0.1", "gaussian:1", "sink"])
@pytest.mark.parametrize("broken", ["scale", "drop-block"])
def test_a_broken_kernel_fails_by_its_declared_numerics(source, broken):
    x = _inputs("gaussian:0.1", sink=True) if source == "sink" else _inputs(source)
    kernel = _kernel("exact", broken=broken)
    with pytest.raises(GateFailure, match="declared numerics' emulation|RMS diff from the emulation"):
        gate(kernel, x, kernel.prepare(x))


def test_the_allowance_per_element_and_the_rms_limit_are_held_exactly():
    x = _inputs("gaussian:1")
    kernel = _kernel("exact")
    em = _emulation(kernel, x)
    allow = declared_allowance(em)
    at = (0, 2, 100, 7)
    for factor, passes in ((0.999, True), (1.001, False)):
        out = em.out.clone()
        out[at] += factor * allow[at]
        r = compare_declared(out, em, kernel="k")
        assert r.passed is passes and r.max_ratio == pytest.approx(factor)
    # the RMS limit: noise of twice the expected RMS, spread so that no element leaves its allowance
    g = torch.Generator().manual_seed(0)
    sign = torch.where(torch.rand(em.out.shape, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
    noise = sign * allow
    noise *= declared_rms(em) / float(noise.pow(2).mean().sqrt())
    rms_only = dataclasses.replace(declared_tolerance(), min_snr_db=None)  # at 2x the rounding, SNR is 21 dB
    for k, passes in ((1.99, True), (2.01, False)):
        r = compare_declared(em.out + k * noise, em, kernel="k", tolerance=rms_only)
        assert r.passed is passes and r.rms_ratio == pytest.approx(k), r.summary()


def test_declared_tolerance_and_columns():
    tol = declared_tolerance()
    assert (tol.max_ratio, tol.rms_ratio, tol.min_snr_db, tol.max_abs) == (1.0, 2.0, 30.0, None)
    assert hoeffding_z(1) == pytest.approx(math.sqrt(2 * math.log(2e6)))
    x = _inputs("gaussian:1")
    kernel = _kernel("lean")
    r = gate(kernel, x, kernel.prepare(x))
    cols = gate_columns(r)
    assert cols["gate_max_ratio"] == r.max_ratio and cols["gate_rms_ratio"] == r.rms_ratio
    assert cols["gate_reference"].startswith("fp64 emulation: e4m3 q, k, v; P lean e4m3 per 64-key block")
    assert "vs its declared numerics" in r.summary() and "limit 1" in r.summary() and "limit 30 dB" in r.summary()
    assert gate_columns(None) == dict.fromkeys(cols)


def test_what_is_declared():
    bf16 = Kernel(name="b", prepare=None, dtypes=frozenset(), devices=frozenset(), extra={"p_mode": "bf16"})
    assert declared_numerics(bf16) is None
    undeclared = Kernel(name="u", prepare=None, dtypes=frozenset(), devices=frozenset(), extra={"quant": "e4m3-pow2"})
    assert declared_numerics(undeclared) is None  # FP8 inputs but no P rounding: judged by format
    n = declared_numerics(_kernel("lean"))
    assert (n.p_mode, n.p_scale, n.p_block, n.p_rel_error, n.out_rounding) == ("lean", "block", 64, 0.075, 2.0**-8)
    tighter = _kernel("exact")
    tighter.extra["p_rel_error"] = 1e-3  # a bound tighter than e4m3's own rounding does not tighten the gate
    assert declared_numerics(tighter).p_rel_error == 2.0**-4
    with pytest.raises(ValueError, match="p_scale 'column'"):
        Numerics(p_mode="exact", p_scale="column")


def test_row_scaled_p_loses_what_falls_below_e4m3_and_the_emulation_says_so():
    # One scale per row: p far below the row max lands in e4m3's subnormals or at 0.
    t = torch.tensor([[0.0, -1.0, -13.0, -20.0]], dtype=torch.float64)
    row = quantize_p(t, p_mode="exact", block=2, p_scale="row")
    block = quantize_p(t, p_mode="exact", block=2, p_scale="block")
    assert row[0, :2].tolist() == [1.0, 0.5] and row[0, 3] == 0.0 and block[0, 3] == 2.0**-20
    x = _inputs("gaussian:3")
    q, k, v = (tt.double() for tt in (x.q, x.k, x.v))
    by_row = emulate_declared(Numerics(p_mode="exact", p_scale="row"), q, k, v, scale=x.scale, causal=True)
    by_block = emulate_declared(Numerics(p_mode="exact"), q, k, v, scale=x.scale, causal=True)
    exact = reference_attention(q, k, v, scale=x.scale, causal=True)
    err = lambda e: float((e.out - exact).pow(2).mean().sqrt())  # noqa: E731
    assert err(by_row) > err(by_block) and torch.equal(by_row.exact, by_block.exact)


def test_an_output_of_the_wrong_shape_or_with_nan_fails_the_declared_path_and_says_what_it_saw():
    """The declared path's own refusals: a wrong shape is refused before any difference (its ratios infinite, said
    as such); a NaN is counted, its element's ratio infinite, and the summary names the non-finite values; an
    exact output's excess over the allowance is negative (every element within it), the format's one is not."""
    x = _inputs("gaussian:1")
    kernel = _kernel("exact")
    em = _emulation(kernel, x)
    r = compare_declared(em.out[..., :-1], em, kernel="k")
    assert not r.passed and r.max_ratio == math.inf and r.rms_ratio == math.inf and r.snr_db == -math.inf
    assert r.reason.startswith("output shape (1, 4, 192, 63) differs from the reference's (1, 4, 192, 64)")
    assert "max |diff| / allowance inf (limit" in r.summary() and "RMS diff / rounding's inf" in r.summary()
    out = em.out.clone()
    out[0, 1, 5, 3] = math.nan
    r = compare_declared(out, em, kernel="k")
    assert not r.passed and r.nonfinite == 1 and r.max_ratio == math.inf and r.rms_ratio == math.inf
    assert r.reason.startswith("1 NaN/Inf values in the output; max |diff| from its declared numerics' emulation inf x")
    assert r.summary().endswith(", 1 non-finite values")
    exact = compare_declared(em.out, em, kernel="k")
    allow = declared_allowance(em)
    assert exact.passed and exact.max_ratio == 0.0 and exact.max_excess_diff == pytest.approx(-float(allow.min()))
    assert exact.summary().endswith(" dB") and "max |diff| / allowance 0 (limit" in exact.summary()
    assert "); vs exact fp64 on its quantized inputs: max |diff| 0.0" in exact.summary()
    assert exact.reference.startswith("fp64 emulation: ")
    plain = compare_outputs(em.out, em.exact, kernel="k", tolerance=gate_tolerance("fp8"), v_rms=1.0)
    assert plain.reference == "fp64 attention on the kernel's inputs" and plain.max_ratio is None
    assert plain.summary().startswith("max |diff| ") and "n/a" not in plain.summary()


def test_the_declared_paths_reasons_name_the_ratio_and_its_limit_and_degenerate_cases_hold(monkeypatch):
    """Each failed limit is one reason, worded whole; an empty output has nothing beyond any limit; an emulation
    whose rounding leaves no spread expects an RMS difference of 0, so only an exact output meets it."""
    x = _inputs("gaussian:1")
    kernel = _kernel("exact")
    em = _emulation(kernel, x)
    allow = declared_allowance(em)
    out = em.out.clone()
    out[0, 2, 100, 7] += 2 * allow[0, 2, 100, 7]
    r = compare_declared(out, em, kernel="k", tolerance=dataclasses.replace(declared_tolerance(), min_snr_db=None))
    limit = declared_tolerance().max_ratio
    assert r.reason == f"max |diff| from its declared numerics' emulation 2 x its allowance (limit {limit:g})", r.reason
    noisy = em.out + 3 * declared_rms(em) * torch.where(torch.arange(em.out.numel()).reshape(em.out.shape) % 2 == 0,
                                                         1.0, -1.0).to(em.out.dtype)
    rms_limit = declared_tolerance().rms_ratio
    r = compare_declared(noisy, em, kernel="k", tolerance=dataclasses.replace(declared_tolerance(), min_snr_db=None,
                                                                               max_ratio=math.inf))
    assert r.reason == f"RMS diff from the emulation 3 x the RMS its rounding of P gives (limit {rms_limit:g})", r.reason
    r = compare_declared(noisy, em, kernel="k", tolerance=dataclasses.replace(declared_tolerance(), min_snr_db=80.0,
                                                                               max_ratio=math.inf, rms_ratio=math.inf))
    assert r.reason == f"SNR {r.snr_db:.1f} dB < 80 dB against exact attention on its quantized inputs", r.reason
    empty = dataclasses.replace(em, out=em.out[:, :, :0], exact=em.exact[:, :, :0])
    r = compare_declared(em.out[:, :, :0], empty, kernel="k")
    assert (r.max_ratio, r.rms_ratio, r.max_excess_diff) == (0.0, 0.0, 0.0)
    import harness.kernels._gate as gate_module

    monkeypatch.setattr(gate_module, "declared_rms", lambda em: 0.0)
    assert compare_declared(em.out, em, kernel="k").rms_ratio == 0.0
    assert compare_declared(out, em, kernel="k").rms_ratio == math.inf


def test_the_allowance_and_the_expected_rms_are_the_documented_formulas():
    """compare_declared's docstring, computed here from the emulation's own terms: per element
    2 min(z p_spread, p_bound) + out_rounding |out| + accumulation + 1e-6 rms(out), and the RMS
    sqrt(mean(4/6 p_spread^2 + (out_rounding out)^2 / 3 + accumulation^2 / 3))."""
    x = _inputs("gaussian:1")
    exact = _emulation(_kernel("exact"), x)
    # an accumulation term of its own (an MMA-accumulating kernel's), so that every term is exercised
    for em in (exact, dataclasses.replace(exact, accumulation=exact.out.abs() * 0.01 + 1e-3)):
        n, u = em.out.numel(), em.numerics.out_rounding
        z = hoeffding_z(n)
        want = (2 * torch.minimum(z * em.p_spread, em.p_bound) + u * em.out.abs() + em.accumulation
                + 1e-6 * float(em.out.pow(2).mean().sqrt()))
        assert torch.allclose(declared_allowance(em), want, rtol=1e-12, atol=0)
        rms = float((4 / 6 * em.p_spread.pow(2) + (u * em.out).pow(2) / 3 + em.accumulation.pow(2) / 3).mean().sqrt())
        assert declared_rms(em) == pytest.approx(rms, rel=1e-12)
    assert float(exact.p_spread.max()) > 0 and u > 0


def test_each_declared_limit_is_strict_or_inclusive_as_documented():
    """max |diff| / allowance must stay below its limit; the RMS ratio and the SNR may sit exactly at theirs."""
    x = _inputs("gaussian:1")
    kernel = _kernel("exact")
    out = kernel.prepare(x)()
    em = _emulation(kernel, x)
    seen = compare_declared(out, em, kernel="k")
    at = dataclasses.replace(declared_tolerance(), max_ratio=seen.max_ratio, rms_ratio=seen.rms_ratio,
                             min_snr_db=seen.snr_db)
    r = compare_declared(out, em, kernel="k", tolerance=at)
    assert r.reason.startswith("max |diff| from its declared numerics' emulation") and ";" not in r.reason, r.reason
