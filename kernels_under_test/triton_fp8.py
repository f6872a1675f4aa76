"""`triton-fp8-exact` and `triton-fp8-lean`: FP8 (e4m3) attention forward in Triton, BF16 out.

Setup (in `prepare`, never timed): q, k, v are quantized to e4m3 with one power-of-two scale per tensor
(`harness.kernels._quant`), and V is stored transposed, [B, Hkv, dv, S], because Hopper's FP8 wgmma
takes its B operand K-major only (keys contiguous). Both products run in FP8 with fp32 accumulation;
the q and k descales fold into the base-2 softmax scale and the v descale into the final division.

P, per 64-key block: o = whole binades from the block max down to the row max (>= 0, capped), and the
block's p is stored as the e4m3 value of P = p * 2^(o + sigma), sigma = 6. The PV product of the block
and its row sum are multiplied by 2^-(o + sigma) in fp32; the row sum adds the ROUNDED P, so the
weights that multiply V sum to one. Lazy rescale tau = 0.125 binade.

- exact: P = exp2(s - m + o + sigma), then the hardware round-to-nearest-even conversion to e4m3
  (cvt.rn.satfinite, four codes to a 32-bit register: see _triton_common._e4m3_codes for why).
- lean: the e4m3 code of P from one FMA, no exp2 and no conversion (protocol.md "Lean P").

Lean P, derived. A positive e4m3fn code k = 8E + F (E: 4 exponent bits, F: 3 mantissa bits) is the value
2^(E-7) (1 + F/8) (normal, E >= 1) or F 2^-9 (subnormal). Each binade holds 8 codes, linear in the
value, so the code of 2^u is close to 8(u + 7) (the chord 1 + f >= 2^f, at most 6.1 % above it). With
x = s - m (base-2 score minus the row reference, <= tau) and u = x + o + sigma:
    y = 8 (x + o + sigma + 7) - beta,  code = clamp(round(y), 0, 126),  sigma = 6, beta = 0.35.
The block max (x + o in (-1, tau]) gets a code near 8 * 13 = 104, the code of 2^6 = 64: P is p times 2^6,
so the block spans 2^6 down to the smallest subnormal 2^-9, i.e. p >= 2^-15 is kept, and the largest
code, round(8 (13 + tau) - beta) = 105 (value 72), stays far below 126 (448; 127 is NaN), so the upper
clamp never acts. beta = 0.35 shifts the chord down so the error is centred: |P/2^u - 1| <= 7.5 % for
every u >= -6 (normal codes; measured 7.45 %), against 5.9 % for exact rounding. The descale
2^-(o + sigma) removes both factors. In the kernel y is ONE FMA per element on the raw fp8 dot product,
    y = fma(qk, 8 * qk_scale, c0),  c0 = 8 (sigma + 7 + o - m) - beta  (one per row),
and the float-to-int conversion is one add: z = y + 2^23 rounds y to the nearest integer in the low
mantissa bits (the fp32 ulp at 2^23 is 1), max(z, 2^23) sends y < 0 to code 0, and the low byte of z's
bits is the code, reinterpreted as fp8e4nv (no MUFU.EX2, no F2I, no F2FP). Folding 2^23 into c0 would
save the add but needs 8m + beta on an integer grid; the shifted reference then costs ~25 % more error
(measured in the interpreter), so the add stays.
"""

from __future__ import annotations

import functools
import math

from harness.kernels import E4M3_MAX, MMA_REL_ERROR, Kernel, KernelRegistry
from harness.kernels._quant import quantize_e4m3_pow2
from kernels_under_test.triton_bf16 import HEAD_DIMS, check_layout, config_for, interpreting, triton_availability

__all__ = ["registry", "CONFIGS", "TAU", "SIGMA", "BETA", "P_BLOCK", "prepare_exact", "prepare_lean", "quantized", "requantizer"]

registry = KernelRegistry()

TAU = 0.125
SIGMA = 6  # P is stored as p * 2^SIGMA: the block max sits at 64, so p down to 2^-15 survives
BETA = 0.35
P_BLOCK = 64  # keys per power-of-two scaling block; the kernel's block_n must equal it

# Hopper (H200) starting points, checked ahead of time for sm_90 (no spills, QGMMA in the SASS).
# block_n is fixed at P_BLOCK; tune block_m, warps and stages on the GPU.
CONFIGS = {
    (64, 64): dict(block_m=128, block_n=64, num_warps=8, num_stages=3),
    # Measured on the H200 (S=16384 H=32, lean P, burst; docs/experiments/fp8-kernel-tuning.md): 4.33 ms as (128 rows,
    # 8 warps, 3 stages), 4.30 ms with 4 stages, 3.52 ms with 64-row blocks of 4 warps: three CTAs per SM
    # whose softmax and QGMMAs are out of step, where Triton does not overlap them within one CTA.
    (128, 128): dict(block_m=64, block_n=64, num_warps=4, num_stages=3),
    (192, 128): dict(block_m=128, block_n=64, num_warps=8, num_stages=2),
}


def quantized(inputs):
    """(q8, k8, vt8, descales) exactly as the FP8 kernels receive them; vt8 is V^T, [B, Hkv, dv, S]."""
    q8, dq = quantize_e4m3_pow2(inputs.q)
    k8, dk = quantize_e4m3_pow2(inputs.k)
    v8, dv = quantize_e4m3_pow2(inputs.v)
    return q8, k8, v8.transpose(-1, -2).contiguous(), (dq, dk, dv)


def requantizer(inputs, q8, k8, vt8, descales):
    """The launch closure's `refresh()` (in-model timing, harness.capture._bind): inputs.q, k, v quantized again into
    the same e4m3 buffers with the scales prepare() chose (static per-tensor scales, as FP8 serving calibrates them
    once; saturating at +-448), no launch. On prepare()'s own inputs it writes exactly what `quantized` wrote."""
    import torch

    scales = [1.0 / d for d in descales]

    def e4m3(t, scale):
        return (t.to(torch.float32) * scale).clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)

    def refresh() -> None:
        q8.copy_(e4m3(inputs.q, scales[0]))
        k8.copy_(e4m3(inputs.k, scales[1]))
        vt8.copy_(e4m3(inputs.v, scales[2]).transpose(-1, -2))

    return refresh


def _prepare(inputs, *, mode_name: str, config: dict | None, proton: bool = False, table=None):
    """`config` (or the `table` entry, default CONFIGS) holds tc.Config's keys plus an optional `loop`, the
    schedule of the blocks that need no mask: "plain" (`_stage`), "pipelined" (QK(j) and PV(j-1) issued
    together) or "acc-in-mma" (PV accumulating in the wgmma); see _triton_fp8_pipe."""
    import torch

    from kernels_under_test import _triton_common as tc
    from kernels_under_test._triton_fp8_pipe import stage_acc_in_mma, stage_pipelined

    s = inputs.shape
    check_layout(inputs)
    params = dict(config) if config is not None else config_for(s.head_dim_qk, s.head_dim_v, table=table or CONFIGS)
    loops = {"plain": None, "pipelined": stage_pipelined, "acc-in-mma": stage_acc_in_mma}
    loop = params.pop("loop", "plain")
    if loop not in loops:
        raise ValueError(f"config key loop={loop!r}: the FP8 kernels' loops are {', '.join(loops)}")
    bulk = loops[loop]
    cfg = tc.Config(**params)
    q8, k8, vt8, (dq, dk, dv) = quantized(inputs)
    out = torch.empty((s.batch, s.heads_q, s.seq_len, s.head_dim_v), dtype=torch.bfloat16, device=inputs.q.device)
    launch = tc.attention_launch(
        mode=tc.MODE_EXACT if mode_name == "exact" else tc.MODE_LEAN,
        q=q8, k=k8, v=vt8, out=out, v_transposed=True,
        qk_scale=inputs.scale * math.log2(math.e) * dq * dk, out_scale=dv,
        causal=s.causal, config=cfg, tau=TAU, sigma=SIGMA, beta=BETA, proton=proton, bulk=bulk,
    )
    launch.refresh = requantizer(inputs, q8, k8, vt8, (dq, dk, dv))
    if not interpreting():  # compile here, in setup, so that no timed launch compiles
        launch()
    return launch


def prepare_exact(inputs, *, config: dict | None = None, proton: bool = False):
    """Quantize q, k, v to e4m3 and bind them; P by exp2 and the hardware e4m3 conversion."""
    return _prepare(inputs, mode_name="exact", config=config, proton=proton)


def prepare_lean(inputs, *, config: dict | None = None, proton: bool = False):
    """Quantize q, k, v to e4m3 and bind them; P's e4m3 code by one FMA (lean P)."""
    return _prepare(inputs, mode_name="lean", config=config, proton=proton)


# Relative error of one P value against p: exact rounding to e4m3 is within half a step (2^-4, the fp8
# gate's own allowance); lean P within 7.5 % (the chord; tests/kernels/test_triton_lean_p.py checks it).
P_REL_ERROR = {"exact": 2.0**-4, "lean": 0.075}


def _declare(name: str, prepare, p_mode: str, description: str, *, into=None, extra=None, source=None,
             head_dims=HEAD_DIMS, devices=("cuda", "cpu"), availability=None) -> None:
    (registry if into is None else into).add(
        Kernel(
            name=name,
            prepare=prepare,
            dtypes=frozenset({"bfloat16", "float16"}),
            devices=frozenset(devices),
            head_dims=frozenset(head_dims),
            availability=availability
            or functools.partial(triton_availability, min_capability=(8, 9), why="FP8 tl.dot"),
            description=description,
            output_dtype="bfloat16",
            tolerance="fp8",
            source=source or f"{__name__}:{prepare.__name__}",
            extra={
                # Quantization happens in prepare(): the launch reads the e4m3 copies, not inputs.q/k/v.
                "reads_inputs_at_launch": False,
                "quant": "e4m3-pow2",
                "p_mode": p_mode,
                "p_rel_error": P_REL_ERROR[p_mode],
                "p_block": P_BLOCK,
                "sigma": SIGMA,
                "beta": BETA,
                "tau": TAU,
                # Hopper's FP8 wgmma adds its products in ~13-14 bits (harness.kernels._reference.MMA_REL_ERROR)
                "mma_rel_error": MMA_REL_ERROR,
                **(extra or {}),
            },
        )
    )


_declare("triton-fp8-exact", prepare_exact, "exact", "Triton FP8 e4m3 forward, P by exp2 + e4m3 conversion, tau=0.125")
_declare("triton-fp8-lean", prepare_lean, "lean", "Triton FP8 e4m3 forward, lean P (one FMA per e4m3 code), tau=0.125")
