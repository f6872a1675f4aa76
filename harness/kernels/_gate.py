from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from harness.errors import GateFailure

__all__ = ["GateTolerance", "GateResult", "gate_tolerance", "compare_outputs", "gate"]


@dataclass(frozen=True, kw_only=True)
class GateTolerance:
    """Pass when max |diff| beyond the format's own rounding < `max_abs` and SNR >= `min_snr_db`.

    Two roundings no kernel in that format avoids are not held against it: the output's (`rounding`,
    the output format's unit roundoff u, times |ref|) and that of the probabilities fed to the PV product
    (`p_rounding` times rms(v): a relative error e in each p moves an output by at most about e*rms(v)).
    P goes to the PV product in the operand format: bf16 for bf16 kernels (2^-8), e4m3 for FP8 ones
    (2^-4). Without that allowance a correct kernel fails on std-1 inputs in its first rows, where few
    keys carry weight: cuDNN's bf16 SDPA by 0.0078 against 2e-3, an FP8 kernel with exactly rounded P by
    0.045 against 0.03 on the H200. The raw max |diff| is kept beside the excess, and SNR, which is not
    relaxed, still judges the whole output.
    """

    name: str
    max_abs: float
    min_snr_db: float | None
    rounding: float
    p_rounding: float


def gate_tolerance(kind: str) -> GateTolerance:
    """The protocol's tolerances: bf16 max |diff| < 2e-3; fp8 max |diff| < 0.03 and SNR >= 30 dB."""
    table = {
        "bf16": GateTolerance(name="bf16", max_abs=2e-3, min_snr_db=None, rounding=2.0**-8, p_rounding=2.0**-8),
        "fp16": GateTolerance(name="fp16", max_abs=1e-3, min_snr_db=None, rounding=2.0**-11, p_rounding=2.0**-11),
        # bf16 out, e4m3 P (3 mantissa bits: relative half-ulp 2^-4)
        "fp8": GateTolerance(name="fp8", max_abs=0.03, min_snr_db=30.0, rounding=2.0**-8, p_rounding=2.0**-4),
        "fp32": GateTolerance(name="fp32", max_abs=1e-4, min_snr_db=None, rounding=2.0**-24, p_rounding=2.0**-24),
        "fp64": GateTolerance(name="fp64", max_abs=1e-10, min_snr_db=None, rounding=2.0**-53, p_rounding=2.0**-53),
    }
    aliases = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "float32": "fp32", "float64": "fp64"}
    return table[aliases.get(kind, kind)]


@dataclass(frozen=True, kw_only=True)
class GateResult:
    kernel: str
    passed: bool
    max_abs_diff: float
    max_excess_diff: float  # max over elements of |diff| - (rounding*|ref| + p_rounding*rms(v))
    rel_rms_error: float
    snr_db: float
    nonfinite: int
    tolerance: GateTolerance
    reason: str = ""

    def summary(self) -> str:
        snr = f"{self.snr_db:.1f}"  # -inf (a NaN or wrong-shape output) must not print as "inf"
        return (
            f"max |diff| {self.max_abs_diff:.3g} (beyond rounding {self.max_excess_diff:.3g}, limit "
            f"{self.tolerance.max_abs:g}), rel. RMS error {self.rel_rms_error:.3g}, SNR {snr} dB"
            + (f", limit {self.tolerance.min_snr_db:g} dB" if self.tolerance.min_snr_db is not None else "")
            + (f", {self.nonfinite} non-finite values" if self.nonfinite else "")
        )


def compare_outputs(out, ref, *, kernel: str, tolerance: GateTolerance, v_rms: float = 0.0) -> GateResult:
    """Compare a kernel output with the fp64 reference (pure: no launches). `v_rms` is the RMS of v."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return GateResult(
            kernel=kernel, passed=False, max_abs_diff=math.inf, max_excess_diff=math.inf, rel_rms_error=math.inf,
            snr_db=-math.inf, nonfinite=0, tolerance=tolerance,
            reason=f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}",
        )
    o = out.to(torch.float64)
    nonfinite = int((~torch.isfinite(o)).sum())
    diff = (o - ref).abs()
    if nonfinite:
        diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, math.inf))
    max_abs = float(diff.max()) if diff.numel() else 0.0
    allowance = tolerance.rounding * ref.abs() + tolerance.p_rounding * v_rms
    excess = float((diff - allowance).max()) if diff.numel() else 0.0
    rms_ref = float(ref.pow(2).mean().sqrt())
    rms_diff = float(diff.pow(2).mean().sqrt()) if not nonfinite else math.inf
    rel = rms_diff / rms_ref if rms_ref > 0 else (0.0 if rms_diff == 0 else math.inf)
    if rms_diff == 0:
        snr = math.inf
    elif rms_ref > 0 and math.isfinite(rms_diff):
        snr = 20 * math.log10(rms_ref / rms_diff)
    else:
        snr = -math.inf
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


def _sync(t) -> None:
    """Wait for the device work that produces `t` (a CUDA tensor) before it is read."""
    if getattr(t, "is_cuda", False):
        import torch

        torch.cuda.synchronize(t.device)


def gate(kernel, inputs, launch, *, reference=None, check_fresh: bool = True,
         sync: Callable[[Any], None] = _sync) -> GateResult:
    """Check `launch()` against fp64 attention on `inputs`; raise `GateFailure` with the numbers if it fails.

    Beyond the comparison, two checks catch kernels that skip work: the returned output is poisoned
    with NaN and the launch repeated (a kernel returning a cached tensor keeps the NaNs), and, when the
    kernel reads its inputs at launch, the inputs are perturbed in place and the output must follow.
    `sync(out)` is called on each output before it is read (default: wait for its CUDA device).
    """
    import torch

    from harness.kernels._error import kernel_reference_inputs
    from harness.kernels._reference import reference_attention

    tol = gate_tolerance(kernel.tolerance or inputs.dtype)
    # A P formula coarser than rounding (lean P: within 7.5 %) declares its bound; the gate allows that
    # (a bound tighter than the format's rounding does not tighten the gate).
    tol = replace(tol, p_rounding=max(tol.p_rounding, float(kernel.extra.get("p_rel_error", 0.0))))
    v_rms = float(inputs.v.double().pow(2).mean().sqrt())
    if reference is None:
        # The reference is attention on exactly what the kernel multiplies: for FP8 kernels the quantized
        # inputs, so the gate judges the kernel, not the (declared, separately reported) input quantization.
        q, k, v = kernel_reference_inputs(kernel, inputs)
        reference = reference_attention(q, k, v, scale=inputs.scale, causal=inputs.shape.causal)

    def launch_and_compare(ref):
        out = launch()
        sync(out)
        return out, compare_outputs(out, ref, kernel=kernel.name, tolerance=tol, v_rms=v_rms)

    out, result = launch_and_compare(reference)
    if not result.passed:
        raise GateFailure(
            f"Kernel {kernel.name!r} failed the correctness gate on {inputs.source} ({inputs.shape.label()}, "
            f"{inputs.dtype}): {result.reason}. Measured: {result.summary()}. It is not timed."
        )
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
            ref2 = reference_attention(inputs.q, inputs.k, inputs.v, scale=inputs.scale, causal=inputs.shape.causal)
            _, moved = launch_and_compare(ref2)
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
    return result
