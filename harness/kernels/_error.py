"""Error of one attention call, and for FP8 kernels the error by stage (protocol.md "Error of one
attention call").

The reference is fp64 attention on exactly the inputs the kernel receives: the BF16 tensors, or for
a kernel that declares `extra["quant"] == "e4m3-pow2"` their e4m3 quantization times its power-of-two
descale. A kernel that declares a low-precision recipe (`extra["recipe"]`) splits further: Q, K and V
each quantized alone, all three, P, the fp32 accumulation and the kernel (harness.kernels._recipes).
For FP8 the error splits into three terms whose references are nested:

- input: fp64 attention on the quantized inputs vs fp64 attention on the BF16 inputs;
- P: the same with p quantized the way the kernel declares (`extra["p_mode"]`: "exact" or "lean", per
  block or row: `harness.kernels._reference.emulate_declared`, the gate's emulation), with the exact row
  max and fp64 accumulation, vs fp64 attention on the quantized inputs;
- kernel: the kernel's output vs that P emulation (lazy rescale, fp32 accumulation, ordering, bf16 out).

A BF16 kernel that declares `extra["p_mode"] == "bf16"` (p rounded to bf16 before the PV product) gets
the P and kernel terms too, without the input term.

The P emulations are pure torch functions so they can be tested without a GPU or Triton.

>>> import torch
>>> lean_p_codes(torch.tensor([0.0, -1.0, -20.0], dtype=torch.float64)).tolist()
[104, 96, 0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.errors import UnsupportedInputError
from harness.kernels._quant import dequantize, lean_p_codes, quantize_e4m3_pow2, quantize_p  # noqa: F401 - lean_p_codes: the module doctest
from harness.kernels._recipes import declared_recipe, dense_only
from harness.kernels._reference import (
    declared_numerics,
    emulate_declared,
    reference_attention,
    score_blocks,
    workload_reference,
)
from harness.numerics import stage_outputs

__all__ = [
    "StageError",
    "ErrorReport",
    "attention_error",
    "error_between",
    "kernel_reference_inputs",
    "emulate_p_attention",
    "recipe_stage_errors",
]


@dataclass(frozen=True, kw_only=True)
class StageError:
    """Relative RMS error (RMS of the difference / RMS of the reference: the relative L2 error), max |difference|,
    cosine similarity <out, ref> / (|out| |ref|) over the whole tensor (FlashAttention-4's accuracy figure) and
    SNR = 20 log10(RMS ref / RMS difference) in dB."""

    rel_rms: float
    max_abs: float
    cosine: float = math.nan
    snr_db: float = math.nan


@dataclass(frozen=True, kw_only=True)
class ErrorReport:
    kernel: str
    shape: str
    source: str
    reference: str  # what the fp64 reference was computed on
    total: StageError  # kernel output vs fp64 attention on the kernel's own inputs
    stages: dict[str, StageError] = field(default_factory=dict)  # "input" (FP8), "p", "kernel" where declared
    vs_unquantized: StageError | None = None  # FP8 only: kernel output vs fp64 attention on the BF16 inputs
    p_mode: str | None = None

    def summary(self) -> str:
        parts = [f"rel. RMS {self.total.rel_rms:.3g}, max |diff| {self.total.max_abs:.3g} (vs fp64 on {self.reference})"]
        for name, s in self.stages.items():
            parts.append(f"{name} term: rel. RMS {s.rel_rms:.3g}, max {s.max_abs:.3g}")
        return "; ".join(parts)


def error_between(out, ref) -> StageError:
    """Error of `out` against `ref` (both upcast to fp64)."""
    import torch

    o = out.to(torch.float64)
    r = ref.to(torch.float64)
    diff = o - r
    rms_ref = float(r.pow(2).mean().sqrt())
    rms_diff = float(diff.pow(2).mean().sqrt())
    rel = rms_diff / rms_ref if rms_ref > 0 else (0.0 if rms_diff == 0 else math.inf)
    norms = float(o.norm() * r.norm())
    cosine = float((o * r).sum()) / norms if norms > 0 else (1.0 if rms_diff == 0 else 0.0)
    snr = math.inf if rms_diff == 0 else (20 * math.log10(rms_ref / rms_diff) if rms_ref > 0 else -math.inf)
    return StageError(rel_rms=rel, max_abs=float(diff.abs().max()) if diff.numel() else 0.0, cosine=cosine,
                      snr_db=snr if math.isfinite(rel) else -math.inf)


def kernel_reference_inputs(kernel, inputs):
    """(q, k, v) in fp64 exactly as `kernel` multiplies them: dequantized e4m3 for FP8, else upcast."""
    import torch

    quant = kernel.extra.get("quant")
    if quant is None:
        return tuple(t.to(torch.float64) for t in (inputs.q, inputs.k, inputs.v))
    if quant != "e4m3-pow2":
        raise ValueError(f"kernel {kernel.name!r} declares an unknown quantization {quant!r}")
    return tuple(dequantize(*quantize_e4m3_pow2(t)) for t in (inputs.q, inputs.k, inputs.v))


def emulate_p_attention(q, k, v, *, scale: float, causal: bool, p_mode: str, block: int = 64,
                        sigma: float = 6.0, beta: float = 0.35, block_rows: int = 512):
    """fp64 attention with p quantized as the kernel does (exact row max, fp64 sums), normalized by the
    sum of the quantized p. q [B,Hq,S,dqk], k [B,Hkv,S,dqk], v [B,Hkv,S,dv]; GQA by head index."""
    import torch

    B, Hq, S, _ = q.shape
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=torch.float64, device=q.device)
    for h, r0, r1, t, vb in score_blocks(q, k, v, scale=scale, causal=causal, block_rows=block_rows):
        p = quantize_p(t, p_mode=p_mode, block=block, sigma=sigma, beta=beta)
        out[:, h, r0:r1] = torch.matmul(p, vb) / p.sum(-1, keepdim=True)
    return out


def attention_error(kernel, inputs, *, launch=None) -> ErrorReport:
    """Launch `kernel` once on `inputs` and measure its error against fp64 attention (see module doc)."""
    launch = launch or kernel.prepare(inputs)
    out = launch()
    s = inputs.shape
    recipe = declared_recipe(kernel)
    if recipe is not None:  # Q, K, V alone, all inputs, P, the fp32 accumulation, the kernel (_recipes)
        e = recipe_stage_errors(kernel, inputs, out, recipe)
        return ErrorReport(kernel=kernel.name, shape=s.label(), source=inputs.source,
                           reference=f"{recipe.name} quantized inputs", total=e["total"], stages=e["stages"],
                           vs_unquantized=e["vs_unquantized"], p_mode=recipe.name)
    if s.features():  # a serving workload: against its fp64 reference, one sequence at a time; no P stages
        if kernel.extra.get("quant") is not None:
            raise UnsupportedInputError(f"Kernel {kernel.name!r}: the error by stage of FP8 inputs is computed for "
                                        f"dense self-attention only, not for {', '.join(sorted(s.features()))}.")
        return ErrorReport(kernel=kernel.name, shape=s.label(), source=inputs.source,
                           reference=f"the {inputs.dtype} inputs", total=error_between(out, workload_reference(inputs)),
                           p_mode=kernel.extra.get("p_mode"))
    qd, kd, vd = kernel_reference_inputs(kernel, inputs)
    ref = reference_attention(qd, kd, vd, scale=inputs.scale, causal=s.causal)
    common = dict(kernel=kernel.name, shape=s.label(), source=inputs.source)
    quant = kernel.extra.get("quant")
    p_mode = kernel.extra.get("p_mode")
    if quant is None:
        stages = {}
        if p_mode == "bf16":
            emu = emulate_p_attention(qd, kd, vd, scale=inputs.scale, causal=s.causal, p_mode="bf16")
            stages = {"p": error_between(emu, ref), "kernel": error_between(out, emu)}
        return ErrorReport(**common, reference=f"the {inputs.dtype} inputs", total=error_between(out, ref),
                           stages=stages, p_mode=p_mode)
    unq = reference_attention(inputs.q, inputs.k, inputs.v, scale=inputs.scale, causal=s.causal)
    stages = {"input": error_between(ref, unq)}
    numerics = declared_numerics(kernel)
    if numerics is not None:  # the gate's emulation of what the kernel declares (block offsets, o cap, scales)
        emu = emulate_declared(numerics, qd, kd, vd, scale=inputs.scale, causal=s.causal, spread=False).out
        stages["p"] = error_between(emu, ref)
        stages["kernel"] = error_between(out, emu)
    return ErrorReport(
        **common, reference=f"{quant} quantized inputs", total=error_between(out, ref), stages=stages,
        vs_unquantized=error_between(out, unq), p_mode=p_mode,
    )


def recipe_stage_errors(kernel, inputs, out, recipe=None) -> dict:
    """bench error's terms of a recipe kernel: each operand alone (q, k, v) and all three (input) against fp64
    attention on the unquantized inputs; P's rounding (p) on the quantized inputs; the declared fp32
    accumulation (accumulation) on top; and the kernel against the whole emulation (kernel). Also "total" (the
    kernel against fp64 attention on its quantized inputs, P unrounded) and "vs_unquantized"."""
    recipe = recipe or declared_recipe(kernel)
    dense_only(kernel, inputs)
    o = stage_outputs(recipe, inputs.q, inputs.k, inputs.v, scale=inputs.scale, causal=inputs.shape.causal)
    stages = {n: error_between(o[n], o["exact"]) for n in ("q", "k", "v", "input")}
    stages["p"] = error_between(o["p"], o["input"])
    stages["accumulation"] = error_between(o["full"], o["p"])
    stages["kernel"] = error_between(out, o["full"])
    return {"stages": stages, "total": error_between(out, o["input"]), "vs_unquantized": error_between(out, o["exact"])}
