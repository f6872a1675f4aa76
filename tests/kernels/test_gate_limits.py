"""The gate at its limits: bf16 and e4m3 (fp8) kernels that miss exactly by a little, or stay just within.

Each adversarial kernel returns the fp64 reference plus an error it sizes itself from the gate's own
allowance at one element (the format's rounding times |ref| plus the P rounding, or the kernel's declared
P-error bound, times P |V| there), so "just within" and "just beyond" are a few percent of the limit apart
and a loosened limit or an ignored declaration flips a verdict.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from harness.errors import GateFailure, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, gate, reference_attention
from harness.kernels._gate import compare_outputs
from harness.kernels._tolerance import gate_tolerance

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=32, head_dim_qk=16)
ELEM = (0, 1, 7, 3)


def _inputs():
    return make_inputs(InputSpec(shape=SHAPE, dtype="bfloat16", source="gaussian:1"), device="cpu")


def _kernel(*, beyond: float, tolerance: str | None = None, declared: float | None = None,
            assume_p: float | None = None, rel_noise: float = 0.0) -> Kernel:
    """A kernel off the reference by `allowance + beyond` at ELEM (allowance computed with P rounding
    `assume_p`, default the format's), and by `rel_noise` x ref everywhere (for the SNR limit)."""
    tol = gate_tolerance(tolerance or "bfloat16")
    p = tol.p_rounding if assume_p is None else assume_p

    def prepare(x):
        def launch():
            ref, pv_abs = reference_attention(x.q, x.k, x.v, scale=x.scale, causal=True, abs_v=True)
            out = ref * (1.0 + rel_noise)
            out[ELEM] = ref[ELEM] + tol.rounding * abs(float(ref[ELEM])) + p * float(pv_abs[ELEM]) + beyond
            return out

        return launch

    extra = {} if declared is None else {"p_rel_error": declared}
    return Kernel(name="adversarial", prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  tolerance=tolerance, extra=extra)


def _gate(kernel):
    x = _inputs()
    return gate(kernel, x, kernel.prepare(x))


@pytest.mark.parametrize("tolerance, limit", [(None, 2e-3), ("fp8", 0.03)])
def test_max_diff_beyond_rounding_just_within_passes_and_just_beyond_fails(tolerance, limit):
    assert _gate(_kernel(beyond=0.95 * limit, tolerance=tolerance)).passed
    with pytest.raises(GateFailure, match="max |diff| beyond rounding"):
        _gate(_kernel(beyond=1.05 * limit, tolerance=tolerance))


def test_bf16_limit_is_2e_3_not_looser():
    # Beyond 2e-3 but well within a tenfold looser limit: still a failure.
    with pytest.raises(GateFailure, match=r">= 0.002"):
        _gate(_kernel(beyond=4e-3))


@pytest.mark.parametrize("tolerance, bound", [(None, 0.075), ("fp8", 0.15)])
def test_a_declared_p_error_bound_is_allowed_and_held_to(tolerance, bound):
    # A lean-P kernel declares its P within 7.5 %: an error at that bound passes only because of the declaration.
    limit = gate_tolerance(tolerance or "bfloat16").max_abs
    within = dict(beyond=0.5 * limit, tolerance=tolerance, assume_p=bound)
    assert _gate(_kernel(declared=bound, **within)).passed
    with pytest.raises(GateFailure, match="beyond rounding"):
        _gate(_kernel(**within))  # the same output without the declaration
    with pytest.raises(GateFailure, match="beyond rounding"):
        _gate(_kernel(declared=bound, beyond=1.05 * limit, tolerance=tolerance, assume_p=bound))


def test_a_declared_bound_tighter_than_rounding_does_not_tighten_the_gate():
    # 1e-6 < 2^-8: the format's own P rounding still applies.
    assert _gate(_kernel(beyond=1e-3, declared=1e-6)).passed


def test_fp8_snr_limit_30_db():
    # A relative error e everywhere gives SNR -20 log10(e): 0.03 -> 30.5 dB passes, 0.033 -> 29.6 dB fails.
    assert _gate(_kernel(beyond=0.0, tolerance="fp8", rel_noise=0.030)).passed
    with pytest.raises(GateFailure, match=r"SNR 29\.\d dB < 30 dB"):
        _gate(_kernel(beyond=0.0, tolerance="fp8", rel_noise=0.033))


def test_snr_is_not_a_bf16_criterion():
    r = compare_outputs(torch.ones(8, dtype=torch.float64) * 1.001, torch.ones(8, dtype=torch.float64),
                        kernel="k", tolerance=gate_tolerance("bf16"))
    assert r.passed and r.snr_db == pytest.approx(60.0)


def test_tolerance_table_and_aliases():
    for kind in ("bf16", "fp16", "fp8", "fp32", "fp64"):
        assert gate_tolerance(kind).name == kind
    with pytest.raises(dataclasses.FrozenInstanceError):
        gate_tolerance("bf16").max_abs = 1.0
    with pytest.raises(TypeError):
        type(gate_tolerance("bf16"))("bf16", 2e-3, None, 2.0**-8, 2.0**-8)
    assert gate_tolerance("fp16").p_rounding == 2.0**-11 and gate_tolerance("fp16").min_snr_db is None
    assert gate_tolerance("fp32").rounding == 2.0**-24 and gate_tolerance("fp64").p_rounding == 2.0**-53
    assert gate_tolerance("bfloat16") == gate_tolerance("bf16")
    assert gate_tolerance("float8_e4m3fn") == gate_tolerance("fp8")
    assert (gate_tolerance("bf16").max_abs, gate_tolerance("bf16").rounding, gate_tolerance("bf16").p_rounding) == (
        2e-3, 2.0**-8, 2.0**-8)
    fp8 = gate_tolerance("fp8")
    assert (fp8.max_abs, fp8.min_snr_db, fp8.rounding, fp8.p_rounding) == (0.03, 30.0, 2.0**-8, 2.0**-4)
    assert gate_tolerance("float16").max_abs == 1e-3 and gate_tolerance("float16").rounding == 2.0**-11
    assert gate_tolerance("float32").max_abs == 1e-4 and gate_tolerance("float32").p_rounding == 2.0**-24
    assert gate_tolerance("float64").max_abs == 1e-10 and gate_tolerance("float64").rounding == 2.0**-53


def test_compare_outputs_figures():
    ref = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    out = ref + torch.tensor([0.0, 0.01, 0.0, -0.02], dtype=torch.float64)
    r = compare_outputs(out, ref, kernel="k", tolerance=gate_tolerance("bf16"), v_rms=0.5)
    assert r.max_abs_diff == pytest.approx(0.02)
    # element 3: 0.02 - (2^-8 * 0 + 2^-8 * 0.5); element 1: 0.01 - 2^-8 * 2.5
    assert r.max_excess_diff == pytest.approx(0.02 - 2.0**-8 * 0.5)
    rms_ref = ((1.0 + 4.0 + 0.25 + 0.0) / 4) ** 0.5
    rms_diff = ((0.01**2 + 0.02**2) / 4) ** 0.5
    assert r.rel_rms_error == pytest.approx(rms_diff / rms_ref)
    assert r.snr_db == pytest.approx(20 * torch.log10(torch.tensor(rms_ref / rms_diff)).item())
    assert not r.passed and r.kernel == "k" and r.nonfinite == 0
    assert "max |diff| beyond rounding" in r.reason and "SNR" not in r.reason
    assert "limit 0.002" in r.summary() and "dB" in r.summary() and "non-finite" not in r.summary()


def test_exact_output_and_zero_reference():
    z = torch.zeros(4, dtype=torch.float64)
    r = compare_outputs(z.clone(), z, kernel="k", tolerance=gate_tolerance("fp8"))
    assert r.passed and r.snr_db == float("inf") and r.rel_rms_error == 0.0 and r.max_excess_diff <= 0
    assert "SNR inf dB" in r.summary()
    bad = compare_outputs(z + 1e-9, z, kernel="k", tolerance=gate_tolerance("fp8"))
    assert bad.rel_rms_error == float("inf") and bad.snr_db == float("-inf") and not bad.passed


def test_nonfinite_and_shape_mismatch():
    ref = torch.ones(4, dtype=torch.float64)
    out = ref.clone()
    out[1] = float("nan")
    out[2] = float("inf")
    r = compare_outputs(out, ref, kernel="k", tolerance=gate_tolerance("bf16"))
    assert not r.passed and r.nonfinite == 2 and r.max_abs_diff == float("inf")
    assert r.reason.startswith("2 NaN/Inf values") and "2 non-finite values" in r.summary()
    s = compare_outputs(torch.ones(3), ref, kernel="k", tolerance=gate_tolerance("bf16"))
    assert not s.passed and "output shape (3,) differs from the reference's (4,)" == s.reason


# Exactly at a limit. The excess sits where |ref| = 0 and v_rms = 0 (no allowance), so it is the diff
# itself, exactly; the other elements are exact. max |diff| beyond rounding must be < the limit (at it:
# a failure), SNR >= its limit (at it: a pass).

def _at(excess: float, n: int = 16):
    ref = torch.ones(n, dtype=torch.float64)
    ref[0] = 0.0
    out = ref.clone()
    out[0] = excess
    return out, ref


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_an_excess_exactly_at_the_limit_fails_and_one_ulp_below_passes(kind):
    tol = gate_tolerance(kind)
    at = compare_outputs(*_at(tol.max_abs), kernel="k", tolerance=tol)
    assert at.max_excess_diff == tol.max_abs and not at.passed
    assert at.reason.startswith("max |diff| beyond rounding")
    below = compare_outputs(*_at(math.nextafter(tol.max_abs, 0.0)), kernel="k", tolerance=tol)
    assert below.passed and below.reason == ""


def test_an_snr_exactly_at_the_limit_passes_and_just_short_of_it_fails():
    ref = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    out = ref * 1.02  # 34 dB: well within fp8's max |diff| too
    tol = gate_tolerance("fp8")
    snr = compare_outputs(out, ref, kernel="k", tolerance=tol).snr_db
    assert compare_outputs(out, ref, kernel="k", tolerance=dataclasses.replace(tol, min_snr_db=snr)).passed
    short = compare_outputs(out, ref, kernel="k", tolerance=dataclasses.replace(tol, min_snr_db=math.nextafter(snr, 99)))
    assert not short.passed and short.reason.startswith("SNR ")


def test_relative_error_and_snr_do_not_depend_on_the_scale_of_the_output():
    # Outputs of std 0.1 inputs are small: below 1, the ratios must still be computed, not 0 or inf.
    ref = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    out = ref * 1.01
    tol = dataclasses.replace(gate_tolerance("fp8"), max_abs=1e9)  # only the ratios are under test
    for scale in (2.0**-6, 2.0**-1, 1.0, 2.0**6):
        r = compare_outputs(out * scale, ref * scale, kernel="k", tolerance=tol)
        assert r.rel_rms_error == pytest.approx(0.01) and r.snr_db == pytest.approx(40.0)


def test_empty_outputs_have_no_difference():
    e = torch.empty(0, dtype=torch.float64)
    r = compare_outputs(e, e.clone(), kernel="k", tolerance=gate_tolerance("bf16"))
    assert r.max_abs_diff == 0.0 and r.max_excess_diff == 0.0 and r.passed


def test_without_v_rms_no_p_rounding_is_allowed():
    tol = gate_tolerance("bf16")
    out, ref = _at(1e-3)
    assert compare_outputs(out, ref, kernel="k", tolerance=tol).max_excess_diff == 1e-3
    assert compare_outputs(out, ref, kernel="k", tolerance=tol, v_rms=0.5).max_excess_diff == pytest.approx(
        1e-3 - tol.p_rounding * 0.5)


def test_reasons_name_the_measured_value_and_the_limit_each():
    # 5 % off everywhere in fp8: both the max |diff| and the SNR limits are missed; one reason each.
    ref = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    tol = gate_tolerance("fp8")
    r = compare_outputs(ref * 1.05, ref, kernel="k", tolerance=tol)
    parts = r.reason.split("; ")
    assert len(parts) == 2 and not r.passed
    assert parts[0].startswith("max |diff| beyond rounding ") and f" {r.max_excess_diff:.3g} " in parts[0]
    assert parts[0].endswith(f" {tol.max_abs:g}")
    assert parts[1].startswith(f"SNR {r.snr_db:.1f} dB") and parts[1].endswith(f" {tol.min_snr_db:g} dB")


def test_summary_gives_each_figure_and_the_limits_that_apply():
    import re

    ref = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    out = ref * 1.05
    for kind in ("bf16", "fp8"):
        tol = gate_tolerance(kind)
        r = compare_outputs(out, ref, kernel="k", tolerance=tol)
        head = (f"max |diff| {r.max_abs_diff:.3g} (beyond rounding {r.max_excess_diff:.3g}, limit {tol.max_abs:g}), "
                f"rel. RMS error {r.rel_rms_error:.3g}, SNR {r.snr_db:.1f} dB")
        snr_limit = f", limit {tol.min_snr_db:g} dB" if kind == "fp8" else ""
        assert r.summary() == head + snr_limit  # nothing else: no non-finite count when there is none
    out[3] = float("nan")
    r = compare_outputs(out, ref, kernel="k", tolerance=gate_tolerance("fp8"))
    assert re.search(r", limit 30 dB, 1 non-finite values$", r.summary())


def test_a_wrong_shape_output_has_no_finite_figures():
    r = compare_outputs(torch.ones(3), torch.ones(4, dtype=torch.float64), kernel="k", tolerance=gate_tolerance("fp8"))
    assert r.snr_db == float("-inf") and r.nonfinite == 0  # no values were compared, none counted
    assert "SNR -inf dB" in r.summary() and "non-finite" not in r.summary()


def test_gate_result_is_a_frozen_keyword_only_record_with_an_empty_default_reason():
    from harness.kernels._gate import GateResult

    fields = dict(kernel="k", passed=True, max_abs_diff=0.0, max_excess_diff=0.0, rel_rms_error=0.0, snr_db=99.0,
                  nonfinite=0, tolerance=gate_tolerance("bf16"))
    r = GateResult(**fields)
    assert r.reason == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.passed = False
    with pytest.raises(TypeError):
        GateResult(*fields.values())


# Rounding P where the weight sits on keys with large |v|. Key 0 carries v = 32 and half the weight of the
# other visible keys (score -ln 2 below theirs), key 1 v = -16, the rest v = 0: row 1's output is ~0 while its
# P |V| is 21, and rms(v) over the 64 keys is 4.5. A kernel whose every P is off by a fraction of bf16's unit
# roundoff, all in the direction of its v, moves that row by the fraction times P |V|: what rounding P may do.
# (SmolLM2 layer 19 on the H200: cuDNN's bf16 SDPA passed a per-element P |V| allowance at 0.92 of it and failed
# the rms(v) one by 0.0024.)
HEAVY = AttentionShape(batch=1, heads_q=1, heads_kv=1, seq_len=64, head_dim_qk=16)


def _heavy_keys():
    x = make_inputs(InputSpec(shape=HEAVY, dtype="bfloat16", source="gaussian:1"), device="cpu")
    q, k, v = torch.zeros_like(x.q), torch.zeros_like(x.k), torch.zeros_like(x.v)
    q[..., 0] = -1.0
    k[:, :, 0, 0] = math.log(2.0) / x.scale  # score of key 0: -ln 2 (in bf16, 0.9975 of it), the others 0
    v[:, :, 0], v[:, :, 1] = 32.0, -16.0
    for t, new in zip((x.q, x.k, x.v), (q, k, v)):
        t.copy_(new)
    return x


def _p_off_by(frac: float) -> Kernel:
    """Every P off by `frac` x bf16's unit roundoff, signed like the v it multiplies, the sum of P exact."""

    def prepare(x):
        def launch():
            group = x.q.shape[1] // x.k.shape[1]
            k = x.k.double().repeat_interleave(group, 1)
            v = x.v.double().repeat_interleave(group, 1)
            s = torch.matmul(x.q.double(), k.transpose(-1, -2)) * x.scale
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
            p = torch.softmax(s, -1)
            bent = torch.einsum("bhqk,bhkd->bhqkd", p, torch.ones_like(v)) * (1 + frac * 2.0**-8 * v.sign()[:, :, None])
            return torch.einsum("bhqkd,bhkd->bhqd", bent, v)

        return launch

    return Kernel(name=f"p-off-{frac}", prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}))


def test_rounding_p_is_allowed_per_element_by_p_times_abs_v():
    x = _heavy_keys()
    ref, pv_abs = reference_attention(x.q, x.k, x.v, scale=x.scale, causal=True, abs_v=True)
    assert abs(float(ref[0, 0, 1, 0])) < 0.02 and float(pv_abs[0, 0, 1, 0]) == pytest.approx(64 / 3, rel=1e-3)
    assert gate(_p_off_by(0.99), x, _p_off_by(0.99).prepare(x)).passed
    # The same output against rms(v) alone (the allowance before 2026-12-05): failed, 0.08 off where 0.018 is allowed.
    out = _p_off_by(0.99).prepare(x)()
    v_rms = float(x.v.double().pow(2).mean().sqrt())
    assert v_rms == pytest.approx(4.47, abs=0.01)
    assert not compare_outputs(out, ref, kernel="k", tolerance=gate_tolerance("bf16"), v_rms=v_rms).passed
    with pytest.raises(GateFailure, match="beyond rounding"):
        _gate_on(x, _p_off_by(1.5))  # half a unit roundoff more than rounding can do: 0.04 beyond


def _gate_on(x, kernel):
    return gate(kernel, x, kernel.prepare(x))


def test_pv_abs_replaces_v_rms_element_by_element():
    tol = gate_tolerance("bf16")
    ref = torch.zeros(3, dtype=torch.float64)
    out = torch.tensor([0.01, 0.01, 0.0], dtype=torch.float64)
    pv_abs = torch.tensor([0.0, 4.0, 100.0], dtype=torch.float64)
    r = compare_outputs(out, ref, kernel="k", tolerance=tol, v_rms=100.0, pv_abs=pv_abs)
    assert r.max_excess_diff == pytest.approx(0.01)  # element 0: no P |V|, no allowance (v_rms not used)
    assert compare_outputs(out[1:], ref[1:], kernel="k", tolerance=tol, pv_abs=pv_abs[1:]).max_excess_diff == (
        pytest.approx(0.01 - 4.0 * 2.0**-8))


def test_a_given_fp64_reference_is_judged_with_its_p_abs_v():
    # A caller's own fp64 tensor (saving the gate its pass) is judged as the gate's own reference is.
    x = _heavy_keys()
    ref = reference_attention(x.q, x.k, x.v, scale=x.scale, causal=True)
    within, beyond = _p_off_by(0.99), _p_off_by(1.5)
    assert gate(within, x, within.prepare(x), reference=ref).passed
    with pytest.raises(GateFailure, match="beyond rounding"):
        gate(beyond, x, beyond.prepare(x), reference=ref)


def test_a_failure_carries_its_numbers_for_the_kernels_row():
    with pytest.raises(GateFailure) as info:
        _gate(_kernel(beyond=4e-3))
    numbers = info.value.gate
    assert numbers["gate_max_abs_diff"] > 4e-3 and numbers["gate_snr_db"] > 30
    assert numbers["gate_max_ratio"] is None and numbers["gate_reference"] == "fp64 attention on the kernel's inputs"


def test_an_fp8_kernel_on_a_serving_workload_is_refused_naming_its_features():
    # Its inputs' quantization is emulated for dense self-attention only: a kernel that declares `quant` (P not
    # declared) is refused on a paged decode, not judged against the wrong reference.
    shape = AttentionShape(batch=2, heads_q=2, heads_kv=2, seq_len=1, seq_len_kv=32, head_dim_qk=16, page_size=8)
    x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1"), device="cpu")
    k = Kernel(name="quantizes", prepare=lambda x: (lambda: None), dtypes=frozenset({"bfloat16"}),
               devices=frozenset({"cpu"}), tolerance="fp8", extra={"quant": "e4m3-pow2"})
    with pytest.raises(UnsupportedInputError, match=r"^Kernel 'quantizes' is judged on its FP8 inputs' quantization, "
                       r"which the gate emulates for dense self-attention only, not for decode, paged\.$"):
        gate(k, x, k.prepare(x))
