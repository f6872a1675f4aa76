"""Error of one attention call, and for FP8 kernels the error by stage (protocol.md "Error of one
attention call").

The reference is fp64 attention on exactly the inputs the kernel receives: the BF16 tensors, or for
a kernel that declares `extra["quant"] == "e4m3-pow2"` their e4m3 quantization times its power-of-two
descale. For FP8 the error splits into three terms whose references are nested:

- input: fp64 attention on the quantized inputs vs fp64 attention on the BF16 inputs;
- P: the same with p quantized the way the kernel declares (`extra["p_mode"]`: "exact" or "lean"),
  with the exact row max and fp64 accumulation, vs fp64 attention on the quantized inputs;
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

__all__ = [
    "StageError",
    "ErrorReport",
    "attention_error",
    "error_between",
    "kernel_reference_inputs",
    "lean_p_codes",
    "e4m3_code_values",
    "quantize_p",
    "emulate_p_attention",
]


@dataclass(frozen=True, kw_only=True)
class StageError:
    """Relative RMS error (RMS of the difference / RMS of the reference) and max |difference|."""

    rel_rms: float
    max_abs: float


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
    return StageError(rel_rms=rel, max_abs=float(diff.abs().max()) if diff.numel() else 0.0)


def kernel_reference_inputs(kernel, inputs):
    """(q, k, v) in fp64 exactly as `kernel` multiplies them: dequantized e4m3 for FP8, else upcast."""
    import torch

    from harness.kernels._quant import dequantize, quantize_e4m3_pow2

    quant = kernel.extra.get("quant")
    if quant is None:
        return tuple(t.to(torch.float64) for t in (inputs.q, inputs.k, inputs.v))
    if quant != "e4m3-pow2":
        raise ValueError(f"kernel {kernel.name!r} declares an unknown quantization {quant!r}")
    return tuple(dequantize(*quantize_e4m3_pow2(t)) for t in (inputs.q, inputs.k, inputs.v))


def lean_p_codes(u, *, beta: float = 0.35, sigma: float = 6.0):
    """The lean-P e4m3 codes of 2^u * 2^sigma: round(8 (u + sigma + 7) - beta), clamped to [0, 126].

    `u` is base-2 score minus row max plus the block offset o (<= 0 with the exact row max). 126 is the
    largest finite e4m3fn code (448); 127 would be NaN.
    """
    import torch

    y = 8.0 * (u + sigma + 7.0) - beta
    return torch.clamp(torch.round(y), 0, 126).to(torch.uint8)


def e4m3_code_values(codes):
    """fp64 values of non-negative e4m3fn codes: 2^(E-7) (1 + F/8) for code 8E + F, E >= 1; F 2^-9 else."""
    import torch

    c = codes.to(torch.int64)
    e, f = c // 8, (c % 8).to(torch.float64)
    normal = torch.pow(2.0, (e - 7).to(torch.float64)) * (1.0 + f / 8.0)
    return torch.where(e > 0, normal, f * 2.0**-9)


def quantize_p(t, *, p_mode: str, block: int = 64, sigma: float = 6.0, beta: float = 0.35):
    """Probabilities (unnormalized, relative to the exact row max) as an FP8 kernel forms them, in fp64.

    `t` is [..., n] base-2 scores with -inf where masked. Per `block` keys, o = clamp(floor(m - m_blk), 0, 100)
    (whole binades from the block max down to the row max m); the stored value is e4m3(2^(t - m + o + sigma))
    by round-to-nearest-even ("exact") or the lean code ("lean"), then scaled back by 2^-(o + sigma).
    "bf16" is p = 2^(t - m) rounded to bf16, without blocks (the BF16 kernels' P).
    """
    import torch

    if p_mode == "bf16":  # FlashAttention-2 style: p relative to the row max, rounded to bf16
        return torch.exp2(t - t.amax(dim=-1, keepdim=True)).to(torch.bfloat16).to(torch.float64)
    n = t.shape[-1]
    pad = (-n) % block
    tp = torch.nn.functional.pad(t, (0, pad), value=-math.inf) if pad else t
    blocks = tp.reshape(*tp.shape[:-1], -1, block)
    m = tp.amax(dim=-1, keepdim=True).unsqueeze(-1)  # [..., 1, 1]
    m_blk = blocks.amax(dim=-1, keepdim=True)  # [..., nblk, 1]
    o = torch.clamp(torch.floor(m - m_blk), 0, 100)  # inf (fully masked block) -> 100: its p is 0 anyway
    u = blocks - m + o
    if p_mode == "exact":
        scaled = torch.exp2(u + sigma).to(torch.float8_e4m3fn).to(torch.float64)
    elif p_mode == "lean":
        scaled = e4m3_code_values(lean_p_codes(u, beta=beta, sigma=sigma))
        scaled = torch.where(torch.isneginf(blocks), torch.zeros_like(scaled), scaled)
    else:
        raise ValueError(f"unknown p_mode {p_mode!r}: use 'bf16', 'exact' or 'lean'")
    p = scaled * torch.exp2(-(o + sigma))
    return p.reshape(tp.shape)[..., :n]


def emulate_p_attention(q, k, v, *, scale: float, causal: bool, p_mode: str, block: int = 64,
                        sigma: float = 6.0, beta: float = 0.35, block_rows: int = 512):
    """fp64 attention with p quantized as the kernel does (exact row max, fp64 sums), normalized by the
    sum of the quantized p. q [B,Hq,S,dqk], k [B,Hkv,S,dqk], v [B,Hkv,S,dv]; GQA by head index."""
    import torch

    B, Hq, S, _ = q.shape
    group = Hq // k.shape[1]
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=torch.float64, device=q.device)
    c = scale * math.log2(math.e)
    for h in range(Hq):
        kh = k[:, h // group].to(torch.float64)
        vh = v[:, h // group].to(torch.float64)
        for r0 in range(0, S, block_rows):
            r1 = min(S, r0 + block_rows)
            kv_end = r1 if causal else S
            t = torch.matmul(q[:, h, r0:r1].to(torch.float64), kh[:, :kv_end].transpose(-1, -2)) * c
            if causal:
                rows = torch.arange(r0, r1, device=q.device)[:, None]
                cols = torch.arange(0, kv_end, device=q.device)[None, :]
                t = t.masked_fill(cols > rows, -math.inf)
            p = quantize_p(t, p_mode=p_mode, block=block, sigma=sigma, beta=beta)
            out[:, h, r0:r1] = torch.matmul(p, vh[:, :kv_end]) / p.sum(-1, keepdim=True)
    return out


def attention_error(kernel, inputs, *, launch=None) -> ErrorReport:
    """Launch `kernel` once on `inputs` and measure its error against fp64 attention (see module doc)."""
    from harness.kernels._reference import reference_attention

    launch = launch or kernel.prepare(inputs)
    out = launch()
    s = inputs.shape
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
    if p_mode in ("exact", "lean"):
        emu = emulate_p_attention(
            qd, kd, vd, scale=inputs.scale, causal=s.causal, p_mode=p_mode, block=kernel.extra.get("p_block", 64),
            sigma=kernel.extra.get("sigma", 6.0), beta=kernel.extra.get("beta", 0.35),
        )
        stages["p"] = error_between(emu, ref)
        stages["kernel"] = error_between(out, emu)
    return ErrorReport(
        **common, reference=f"{quant} quantized inputs", total=error_between(out, ref), stages=stages,
        vs_unquantized=error_between(out, unq), p_mode=p_mode,
    )
