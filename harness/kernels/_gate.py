"""The correctness gate: every kernel x input is checked before it is timed (protocol.md "Correctness gate").

Two ways to judge an output, chosen by what the kernel declares:

- by format (BF16 kernels, and FP8 kernels that declare no P rounding): against fp64 attention on what the
  kernel multiplies, max |diff| beyond the format's own rounding (of the output, and of P: per element its unit
  roundoff times P |V|) below the protocol's limit (bf16 2e-3, fp8 0.03) and, for FP8, SNR >= 30 dB
  (`compare_outputs`);
- by declared numerics (FP8 kernels that declare their P rounding, `harness.kernels._reference.Numerics`):
  against the fp64 emulation of exactly those numerics, each element within a small multiple of what that
  emulation's own rounding of P moves it by, the RMS difference within twice the RMS such rounding gives,
  and SNR >= 30 dB against exact attention on the quantized inputs (`compare_declared`). A max |diff|
  sized on Gaussian inputs cannot tell a correct FP8 kernel from a broken one on real layers, where an
  attention sink carries half of a row's weight and its P's e4m3 rounding alone moves outputs by 0.09.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from harness.errors import GateFailure, UnsupportedInputError
from harness.inputs import valid_rms
from harness.kernels._error import kernel_reference_inputs
from harness.kernels._layout import layout_hint
from harness.kernels._leak import nan_leak_check
from harness.kernels._recipes import declared_recipe, emulate_recipe
from harness.kernels._reference import (
    Emulation,
    declared_numerics,
    emulate_declared,
    reference_attention,
    workload_reference,
)
from harness.kernels._tolerance import GateTolerance, declared_tolerance, gate_tolerance, hoeffding_z
from harness.kernels._workload_hint import workload_hint

__all__ = ["GateResult", "compare_outputs", "compare_declared", "declared_allowance", "declared_rms", "gate",
           "gate_columns"]


@dataclass(frozen=True, kw_only=True)
class GateResult:
    kernel: str
    passed: bool
    max_abs_diff: float
    max_excess_diff: float  # max over elements of |diff| - (rounding*|ref| + p_rounding*(P|V|))
    rel_rms_error: float
    snr_db: float
    nonfinite: int
    tolerance: GateTolerance
    reason: str = ""
    # By declared numerics: the largest |diff| / allowance over the elements, RMS diff / expected RMS, and
    # what the output was compared with.
    max_ratio: float | None = None
    rms_ratio: float | None = None
    reference: str = "fp64 attention on the kernel's inputs"

    def summary(self) -> str:
        snr = f"{self.snr_db:.1f}"  # -inf (a NaN or wrong-shape output) must not print as "inf"
        if self.tolerance.max_ratio is not None:
            return (
                f"vs its declared numerics ({self.reference}): max |diff| / allowance {_g(self.max_ratio)} (limit "
                f"{self.tolerance.max_ratio:g}), RMS diff / rounding's {_g(self.rms_ratio)} (limit "
                f"{self.tolerance.rms_ratio:g}); vs exact fp64 on its quantized inputs: max |diff| "
                f"{self.max_abs_diff:.3g}, rel. RMS error {self.rel_rms_error:.3g}, SNR {snr} dB, limit "
                f"{self.tolerance.min_snr_db:g} dB" + (f", {self.nonfinite} non-finite values" if self.nonfinite else "")
            )
        return (
            f"max |diff| {self.max_abs_diff:.3g} (beyond rounding {self.max_excess_diff:.3g}, limit "
            f"{self.tolerance.max_abs:g}), rel. RMS error {self.rel_rms_error:.3g}, SNR {snr} dB"
            + (f", limit {self.tolerance.min_snr_db:g} dB" if self.tolerance.min_snr_db is not None else "")
            + (f", {self.nonfinite} non-finite values" if self.nonfinite else "")
        )


def _g(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _wrong_shape(out, ref, *, kernel: str, tolerance: GateTolerance) -> GateResult | None:
    if tuple(out.shape) == tuple(ref.shape):
        return None
    return GateResult(
        kernel=kernel, passed=False, max_abs_diff=math.inf, max_excess_diff=math.inf, rel_rms_error=math.inf,
        snr_db=-math.inf, nonfinite=0, tolerance=tolerance,
        max_ratio=math.inf if tolerance.max_ratio is not None else None,
        rms_ratio=math.inf if tolerance.rms_ratio is not None else None,
        reason=f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}",
    )


def _diff_and_snr(out, ref):
    """(|out - ref| with non-finite outputs as inf, non-finite count, max |diff|, rel. RMS error, SNR dB)."""
    import torch

    o = out.to(torch.float64)
    nonfinite = int((~torch.isfinite(o)).sum())
    diff = (o - ref).abs()
    if nonfinite:
        diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, math.inf))
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rms_ref = float(ref.pow(2).mean().sqrt())
    rms_diff = float(diff.pow(2).mean().sqrt()) if not nonfinite else math.inf
    rel = rms_diff / rms_ref if rms_ref > 0 else (0.0 if rms_diff == 0 else math.inf)
    if rms_diff == 0:
        snr = math.inf
    elif rms_ref > 0 and math.isfinite(rms_diff):
        snr = 20 * math.log10(rms_ref / rms_diff)
    else:
        snr = -math.inf
    return diff, nonfinite, max_abs, rel, snr


def compare_outputs(out, ref, *, kernel: str, tolerance: GateTolerance, v_rms: float = 0.0,
                    pv_abs=None) -> GateResult:
    """Compare a kernel output with the fp64 reference (pure: no launches).

    The P rounding allowed per element is `tolerance.p_rounding` times `pv_abs`, the reference's P |V| there (the
    most a relative error of 1 in every probability moves that element), or, without it, times the scalar `v_rms`.
    Why per element: a row that puts its weight on keys whose |v| is several times rms(v) (SmolLM2 layer 19: P |V|
    2.9 where rms(v) is 1.0) moves by that much more when P is rounded, and cuDNN's bf16 SDPA exceeded the
    rms(v) allowance there by 0.0024 on the H200 (2026-12-05) while staying within 0.92 of the per-element one.
    """
    bad = _wrong_shape(out, ref, kernel=kernel, tolerance=tolerance)
    if bad is not None:
        return bad
    diff, nonfinite, max_abs, rel, snr = _diff_and_snr(out, ref)
    allowance = tolerance.rounding * ref.abs() + tolerance.p_rounding * (v_rms if pv_abs is None else pv_abs)
    excess = float((diff - allowance).max()) if diff.numel() else 0.0
    reasons = []
    if nonfinite:
        reasons.append(f"{nonfinite} NaN/Inf values in the output")
    if not excess < tolerance.max_abs:
        reasons.append(f"max |diff| beyond rounding {excess:.3g} >= {tolerance.max_abs:g}")
    if tolerance.min_snr_db is not None and not snr >= tolerance.min_snr_db:
        reasons.append(f"SNR {snr:.1f} dB < {tolerance.min_snr_db:g} dB")
    return GateResult(
        kernel=kernel, passed=not reasons, max_abs_diff=max_abs, max_excess_diff=excess, rel_rms_error=rel,
        snr_db=snr, nonfinite=nonfinite, tolerance=tolerance, reason="; ".join(reasons),
    )


def compare_declared(out, em, *, kernel: str, tolerance: GateTolerance | None = None) -> GateResult:
    """Compare a kernel output with the emulation of its declared numerics (`Emulation`; pure: no launches).

    Per element e, D = out - em.out must stay within its allowance
        2 min(z p_spread_e, p_bound_e) + out_rounding |em.out_e| + accumulation_e + 1e-6 rms(em.out)
    (two roundings of a key's P, the kernel's and the emulation's, differ by at most twice the bound on one:
    z = hoeffding_z(elements) times their root-sum-square bounds a sum of many, p_bound a sum of few);
    rms(D) must stay within `rms_ratio` times sqrt(mean(4/6 p_spread^2 +
    (out_rounding em.out)^2 / 3 + accumulation^2 / 3)), the RMS of D if every key were rounded at another
    point (two roundings uniform within the bound differ with variance (2w)^2 / 6); and SNR against exact
    attention on the quantized inputs (em.exact) must reach `min_snr_db`. The stored `max_excess_diff` is
    max(|D| - allowance): < 0 when every element is within its allowance.
    """
    import torch

    tolerance = tolerance or em.tolerance or declared_tolerance()
    bad = _wrong_shape(out, em.out, kernel=kernel, tolerance=tolerance)
    if bad is not None:
        return bad
    _, nonfinite, max_abs, rel, snr = _diff_and_snr(out, em.exact)
    d = (out.to(torch.float64) - em.out).abs()
    if nonfinite:
        d = torch.where(torch.isfinite(d), d, torch.full_like(d, math.inf))
    if d.numel():
        allowance = declared_allowance(em)
        max_ratio = float((d / allowance.clamp_min(1e-300)).max())
        excess = float((d - allowance).max())
        expected = declared_rms(em)
        rms_d = float(d.pow(2).mean().sqrt()) if not nonfinite else math.inf
        rms_ratio = rms_d / expected if expected > 0 else (0.0 if rms_d == 0 else math.inf)
    else:
        max_ratio = excess = rms_ratio = 0.0
    reasons = []
    if nonfinite:
        reasons.append(f"{nonfinite} NaN/Inf values in the output")
    if not max_ratio < tolerance.max_ratio:
        reasons.append(f"max |diff| from its declared numerics' emulation {max_ratio:.3g} x its allowance "
                       f"(limit {tolerance.max_ratio:g})")
    if not rms_ratio <= tolerance.rms_ratio:
        reasons.append(f"RMS diff from the emulation {rms_ratio:.3g} x the RMS its rounding of P gives "
                       f"(limit {tolerance.rms_ratio:g})")
    if tolerance.min_snr_db is not None and not snr >= tolerance.min_snr_db:
        reasons.append(f"SNR {snr:.1f} dB < {tolerance.min_snr_db:g} dB against exact attention on its quantized inputs")
    return GateResult(
        kernel=kernel, passed=not reasons, max_abs_diff=max_abs, max_excess_diff=excess, rel_rms_error=rel,
        snr_db=snr, nonfinite=nonfinite, tolerance=tolerance, reason="; ".join(reasons), max_ratio=max_ratio,
        rms_ratio=rms_ratio, reference=f"fp64 emulation: {em.numerics.describe()}",
    )


def declared_allowance(em):
    """Per element, how far a correct kernel may be from the emulation `em` (see `compare_declared`)."""
    import torch

    n = em.out.numel()
    rms_e = float(em.out.pow(2).mean().sqrt()) if n else 0.0
    p_term = 2 * torch.minimum(hoeffding_z(n) * em.p_spread, em.p_bound)
    return p_term + em.numerics.out_rounding * em.out.abs() + em.accumulation + 1e-6 * rms_e


def declared_rms(em) -> float:
    """The RMS of kernel - emulation if every key's P were rounded at another point (see `compare_declared`)."""
    u = em.numerics.out_rounding
    return float((4.0 / 6.0 * em.p_spread.pow(2) + (u * em.out).pow(2) / 3.0 + em.accumulation.pow(2) / 3.0)
                 .mean().sqrt())


def gate_columns(g: GateResult | None) -> dict:
    """The gate's figures as the measurements table stores them (results schema v4)."""
    if g is None:
        return {"gate_max_abs_diff": None, "gate_snr_db": None, "gate_max_ratio": None, "gate_rms_ratio": None,
                "gate_reference": None}
    return {"gate_max_abs_diff": g.max_abs_diff, "gate_snr_db": g.snr_db, "gate_max_ratio": g.max_ratio,
            "gate_rms_ratio": g.rms_ratio, "gate_reference": g.reference}


def _sync(t) -> None:
    """Wait for the device work that produces `t` (a CUDA tensor) before it is read."""
    if getattr(t, "is_cuda", False):
        import torch

        torch.cuda.synchronize(t.device)


def gate(kernel, inputs, launch, *, reference=None, check_fresh: bool = True,
         sync: Callable[[Any], None] = _sync) -> GateResult:
    """Check `launch()` against its reference on `inputs`; raise `GateFailure` with the numbers if it fails.

    The reference: for a kernel that declares a low-precision recipe, the recipe's fp64 emulation with its
    allowance (harness.kernels._recipes); for an FP8 kernel that declares its numerics, their fp64 emulation on
    its quantized inputs (`compare_declared`); otherwise fp64 attention on what the kernel multiplies, judged by format
    (`compare_outputs`). `reference` may be given to save computing it again: an `Emulation` (judged by
    declared numerics) or an fp64 tensor (judged by format; its P |V| is then computed here).

    Beyond the comparison, two checks catch kernels that skip work: the returned output is poisoned
    with NaN and the launch repeated (a kernel returning a cached tensor keeps the NaNs), and, when the
    kernel reads its inputs at launch, the inputs are perturbed in place and the output must follow; on
    packed or paged batches a NaN in one sequence must then reach no other's output (harness.kernels._leak).
    `sync(out)` is called on each output before it is read (default: wait for its CUDA device).
    """
    import torch

    numerics = declared_numerics(kernel)
    if reference is None:
        reference = _reference_for(kernel, inputs, numerics)
    if isinstance(reference, Emulation):
        def compare(out, ref):
            return compare_declared(out, ref, kernel=kernel.name)
    else:
        tol = gate_tolerance(kernel.tolerance or inputs.dtype)
        # A P formula coarser than rounding (lean P: within 7.5 %) declares its bound; the gate allows that
        # (a bound tighter than the format's rounding does not tighten the gate).
        tol = replace(tol, p_rounding=max(tol.p_rounding, float(kernel.extra.get("p_rel_error") or 0.0)))
        if not isinstance(reference, FormatReference):  # an fp64 tensor given: P |V| from the same inputs
            reference = FormatReference(out=reference, pv_abs=_format_reference(kernel, inputs).pv_abs)
        v_rms = valid_rms(inputs, "v")

        def compare(out, ref):
            if isinstance(ref, FormatReference):
                return compare_outputs(out, ref.out, kernel=kernel.name, tolerance=tol, pv_abs=ref.pv_abs)
            # The hints' alternative references (a usual mistake reproduced, the other layout): naming a likely
            # cause needs no per-element allowance, and their shapes need not be the reference's.
            return compare_outputs(out, ref, kernel=kernel.name, tolerance=tol, v_rms=v_rms)

    def launch_and_compare(ref):
        out = launch()
        sync(out)
        return out, compare(out, ref)

    out, result = launch_and_compare(reference)
    if not result.passed:
        hint = workload_hint(kernel, inputs, out, compare) + layout_hint(kernel, inputs, out, compare)
        failure = GateFailure(
            f"Kernel {kernel.name!r} failed the correctness gate on {inputs.source} ({inputs.shape.label()}, "
            f"{inputs.dtype}): {result.reason}. Measured: {result.summary()}.{hint} It is not timed."
        )
        failure.gate = gate_columns(result)  # its numbers, stored on its row beside the text
        raise failure
    if not check_fresh:
        return result
    if torch.is_floating_point(out):
        out.fill_(float("nan"))
    _, second = launch_and_compare(reference)
    if not second.passed:
        raise GateFailure(
            f"Kernel {kernel.name!r} returned a stale output: after its previous output was overwritten with "
            f"NaN, a second launch did not produce the right result ({second.reason}). The launch closure "
            f"must compute the output on every call, not return a cached tensor. It is not timed."
        )
    if kernel.extra.get("reads_inputs_at_launch", True):
        saved = [t.clone() for t in (inputs.q, inputs.k, inputs.v)]
        try:
            inputs.refill(seed=(inputs.seed or 0) + 7919)
            _, moved = launch_and_compare(_reference_for(kernel, inputs, numerics))
        finally:
            for t, s in zip((inputs.q, inputs.k, inputs.v), saved):
                t.copy_(s)
        if not moved.passed:
            raise GateFailure(
                f"Kernel {kernel.name!r} ignores its inputs at launch: after q, k, v were changed in place its "
                f"output did not match attention on the new values ({moved.reason}). A kernel that quantizes "
                f"or copies its inputs in prepare() must declare extra={{'reads_inputs_at_launch': False}}. "
                f"It is not timed."
            )
        nan_leak_check(kernel, inputs, launch, sync=sync)
    return result


@dataclass(frozen=True, eq=False)
class FormatReference:
    """What a kernel judged by format is compared with: fp64 attention (`out`) and its P |V| (`pv_abs`), both
    [B, Hq, S, dv] fp64, computed in one pass over the scores."""

    out: Any
    pv_abs: Any


def _reference_for(kernel, inputs, numerics):
    """What the kernel is judged against on `inputs`: the emulation of its declared numerics, or fp64
    attention on exactly what it multiplies (for FP8 kernels the quantized inputs, so the gate judges the
    kernel, not the declared and separately reported input quantization) with its P |V| (`FormatReference`)."""
    if declared_recipe(kernel) is not None:  # it quantizes the inputs itself, as its recipe declares
        return emulate_recipe(kernel, inputs)
    if inputs.shape.features() and (numerics is not None or kernel.extra.get("quant") is not None):
        # A serving workload (decode, window, paged, varlen) is referenced one sequence at a time, upcast there (a
        # paged pool of a large decode batch would be tens of GB in fp64); the FP8 emulations know dense
        # self-attention only.
        raise UnsupportedInputError(
            f"Kernel {kernel.name!r} is judged on its FP8 inputs' quantization, which the gate emulates for dense "
            f"self-attention only, not for {', '.join(sorted(inputs.shape.features()))}.")
    if numerics is not None:
        q, k, v = kernel_reference_inputs(kernel, inputs)
        return emulate_declared(numerics, q, k, v, scale=inputs.scale, causal=inputs.shape.causal)
    return _format_reference(kernel, inputs)


def _format_reference(kernel, inputs) -> FormatReference:
    """fp64 attention on what the kernel multiplies and its P |V|, in one pass (any workload)."""
    if inputs.shape.features():
        return FormatReference(*workload_reference(inputs, abs_v=True))
    q, k, v = kernel_reference_inputs(kernel, inputs)
    return FormatReference(*reference_attention(q, k, v, scale=inputs.scale, causal=inputs.shape.causal, abs_v=True))
