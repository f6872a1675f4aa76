"""Five deliberately broken FP8 kernels, each one realistic bug in `triton-fp8-exact` or `triton-fp8-lean`,
for the mutation check of the correctness gate (tests/kernels/test_fp8_gate_real.py on the CPU in Triton's
interpreter, benchmarks/h200/gate_mutation_check.py on the H200). Each declares the numerics of the kernel it
breaks, so the gate judges it exactly as it judges that kernel, and the gate must fail every one of them
on captured layers and on Gaussian inputs alike.

- `mutant-v-descale-x2` (wrong scale): the output descale is one binade off (2 x V's descale).
- `mutant-v-saturated` (wrong scale): V is quantized with a scale two binades too large, so satfinite
  clips its largest values (above a quarter to a half of its absolute max) at 448, the descale that of
  the too-large scale.
- `mutant-drop-first-block` (dropped block): the loop over the unmasked key blocks starts at block 1,
  so every query block but the first loses keys 0-63 (an attention sink among them).
- `mutant-drop-block-before-diagonal` (dropped block): that loop stops one block early (off by one).
- `mutant-swapped-keys` (swapped rows): V^T is built with each pair of adjacent keys swapped, so each
  key's P multiplies its neighbour's value.

Import this module only once TRITON_INTERPRET is set as wanted: its jit functions are built at import.
"""

from __future__ import annotations

import functools
import math

import triton
import triton.language as tl

from harness.kernels import Kernel
from kernels_under_test import _triton_common as tc, triton_fp8
from kernels_under_test._triton_common import _stage

__all__ = ["MUTANTS", "mutants", "mutant"]


@triton.jit
def _stage_skip_first(acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale,
                      lo, hi, offs_m, S, DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr,
                      TAU: tl.constexpr, SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr,
                      USE_TMA: tl.constexpr, V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr):
    return _stage(acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale,
                  lo + BLOCK_N, hi, offs_m, S, DQK_LO, DQK_HI, DV, BLOCK_N, MASKED, CAUSAL, MODE, TAU, SIGMA,
                  BETA, RESCALE_BRANCH, USE_TMA, V_T, PACK_P, PROTON)


@triton.jit
def _stage_stop_early(acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale,
                      lo, hi, offs_m, S, DQK_LO: tl.constexpr, DQK_HI: tl.constexpr, DV: tl.constexpr,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, MODE: tl.constexpr,
                      TAU: tl.constexpr, SIGMA: tl.constexpr, BETA: tl.constexpr, RESCALE_BRANCH: tl.constexpr,
                      USE_TMA: tl.constexpr, V_T: tl.constexpr, PACK_P: tl.constexpr, PROTON: tl.constexpr):
    return _stage(acc, l_i, m_i, q_lo, q_hi, K, K2, V, k_base, v_base, stride_kn, stride_vn, stride_vd, qk_scale,
                  lo, hi - BLOCK_N, offs_m, S, DQK_LO, DQK_HI, DV, BLOCK_N, MASKED, CAUSAL, MODE, TAU, SIGMA,
                  BETA, RESCALE_BRANCH, USE_TMA, V_T, PACK_P, PROTON)


def _quantized_wrong(inputs, *, v_scale_up: int = 0, swap_keys: bool = False):
    """triton_fp8.quantized(), broken: V quantized 2^v_scale_up too large (clipped by satfinite), or V^T
    with adjacent keys swapped."""
    import torch

    from harness.kernels import pow2_scale, quantize_e4m3_pow2

    q8, dq = quantize_e4m3_pow2(inputs.q)
    k8, dk = quantize_e4m3_pow2(inputs.k)
    scale = pow2_scale(float(inputs.v.abs().max())) * 2.0**v_scale_up
    v = inputs.v.to(torch.float32) * scale
    v8 = v.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)  # what cvt.rn.satfinite does past the range
    dv = 1.0 / scale
    if swap_keys:
        S = v8.shape[2]
        perm = torch.arange(S, device=v8.device) ^ 1
        perm = torch.where(perm < S, perm, torch.arange(S, device=v8.device))
        v8 = v8[:, :, perm]
    return q8, k8, v8.transpose(-1, -2).contiguous(), (dq, dk, dv)


def _prepare(inputs, *, p_mode: str, bulk=None, out_scale_factor: float = 1.0, v_scale_up: int = 0,
             swap_keys: bool = False, config: dict | None = None):
    import torch

    from kernels_under_test.triton_bf16 import check_layout, config_for

    s = inputs.shape
    check_layout(inputs)
    cfg = tc.Config(**(dict(config) if config is not None else config_for(s.head_dim_qk, s.head_dim_v,
                                                                            table=triton_fp8.CONFIGS)))
    q8, k8, vt8, (dq, dk, dv) = _quantized_wrong(inputs, v_scale_up=v_scale_up, swap_keys=swap_keys)
    out = torch.empty((s.batch, s.heads_q, s.seq_len, s.head_dim_v), dtype=torch.bfloat16, device=inputs.q.device)
    return tc.attention_launch(
        mode=tc.MODE_EXACT if p_mode == "exact" else tc.MODE_LEAN, q=q8, k=k8, v=vt8, out=out, v_transposed=True,
        qk_scale=inputs.scale * math.log2(math.e) * dq * dk, out_scale=dv * out_scale_factor, causal=s.causal,
        config=cfg, tau=triton_fp8.TAU, sigma=triton_fp8.SIGMA, beta=triton_fp8.BETA, bulk=bulk,
    )


# name -> (the kernel it breaks, what is broken, prepare's keyword arguments)
MUTANTS = {
    "mutant-v-descale-x2": ("triton-fp8-exact", "wrong scale: the output descale one binade off",
                            dict(out_scale_factor=2.0)),
    "mutant-v-saturated": ("triton-fp8-lean", "wrong scale: V quantized two binades too high, clipped at 448",
                           dict(v_scale_up=2)),
    "mutant-drop-first-block": ("triton-fp8-exact", "dropped block: the unmasked loop starts at key block 1",
                                dict(bulk=_stage_skip_first)),
    "mutant-drop-block-before-diagonal": ("triton-fp8-lean", "dropped block: the unmasked loop stops one block early",
                                          dict(bulk=_stage_stop_early)),
    "mutant-swapped-keys": ("triton-fp8-exact", "swapped rows: each pair of adjacent keys' values swapped",
                            dict(swap_keys=True)),
}


def mutant(name: str) -> Kernel:
    """The broken kernel `name`, declared with the numerics of the kernel it breaks."""
    base_name, what, kw = MUTANTS[name]
    base = triton_fp8.registry.get(base_name)
    prepare = functools.partial(_prepare, p_mode=base.extra["p_mode"], **kw)
    return Kernel(name=name, prepare=prepare, dtypes=base.dtypes, devices=base.devices, head_dims=base.head_dims,
                  availability=base.availability, description=f"BROKEN {base_name}: {what}",
                  output_dtype=base.output_dtype, tolerance=base.tolerance, source=f"{__name__}:{name}",
                  extra={**base.extra, "mutant_of": base_name})


def mutants() -> list[Kernel]:
    return [mutant(name) for name in MUTANTS]
