"""Candidate speed-ups of `triton-fp8-lean` / `-exact` (issue 19), each one focused change, registered
under its own name so that the harness gates, times and traces it beside the kernel it changes.

Same P, same gate, same declared P bound (`p_rel_error`) as the kernel each starts from: only the
schedule or the launch shape differs. On the H200 (S=16384, H=32, d=128, causal) both FP8 kernels kept
the tensor pipe 33 % busy while softmax took 44-51 % of each key block, serialized against QK and PV
inside a CTA; lean P is bound by instruction issue (69 %), exact P by MUFU.EX2 (XU 41 %).

- `triton-fp8-lean-pipe` / `triton-fp8-exact-pipe`: the unmasked blocks run `stage_pipelined`
  (_triton_fp8_pipe): QK of block j and PV of block j-1 are issued together before block j's softmax,
  so the tensor cores work while the vector units form P (FlashAttention-3's intra-warpgroup
  pipelining). The table configs of the kernels they start from; exact-pipe at d=128 only (at d=64
  ptxas 12.8 reads registers at the loop head that nothing wrote: the pattern of exact P's H200 NaN).
  In triton 3.6's sm_90 code each wgmma is still waited for right after it is issued (_triton_fp8_pipe).
- `triton-fp8-lean-pipe-m128`: the same loop with 128-row tiles of 8 warps (two warpgroups: two
  independent m64 halves that the scheduler may interleave, a step toward FA3's ping-pong), and half
  the K/V reads from L2 per query row.
- `triton-fp8-lean-accmma` / `triton-fp8-exact-accmma`: `_stage`'s order, but acc is kept in units of
  the block's descale so PV accumulates inside the wgmma (acc times one per-row factor is its C operand):
  one FMUL per accumulator element a block where `_stage` spends an FMUL and an FFMA. sm_90 SASS of
  triton 3.6, d=128 lean: the unmasked loop has 479 instructions a trip against 520 (64 FFMA fewer),
  and one wgmma wait instead of two (PV's is left to the next trip's QK wait).
- `triton-fp8-lean-m64`: the plain kernel with 64-row tiles of 4 warps at every head dim: d=128's
  table config already (3 CTAs per SM, out of step: 3.52 ms against 4.33 ms at 128 rows on the H200),
  new at d=64, where the table keeps 128 rows of 8 warps.

Not here: `tl.range(..., warp_specialize=True)` on this loop. Triton 3.6 has it (tl.range's keyword;
sm_90 runs it through its Hopper pass `nvgpu-warp-specialization`), but compiled ahead of time for sm_90
it either left the loop as it was (128 rows, 8 warps: no warp_specialize op, no setmaxnreg) or aborted
in the pass (64 rows, 4 warps: an assertion in WSLowerToken.cpp, processProducerCommitOp).

>>> from kernels_under_test.triton_fp8_variants import registry
>>> sorted(k.name for k in registry)[:2]
['triton-fp8-exact-pipe', 'triton-fp8-lean-pipe']
"""

from __future__ import annotations

import functools

from harness.kernels import KernelRegistry
from kernels_under_test import triton_fp8

__all__ = ["registry", "VARIANTS"]

registry = KernelRegistry()

_BASE = triton_fp8.CONFIGS
_M128 = {  # 128-row tiles of 8 warps at every head dim (d=64 is the base table's already)
    (64, 64): dict(block_m=128, block_n=64, num_warps=8, num_stages=3),
    (128, 128): dict(block_m=128, block_n=64, num_warps=8, num_stages=3),
    (192, 128): dict(block_m=128, block_n=64, num_warps=8, num_stages=2),
}

_M64 = {dims: dict(cfg, block_m=64, num_warps=4) for dims, cfg in _BASE.items()}

# name -> (P mode, config table, overrides of every table entry, description)
VARIANTS = {
    "triton-fp8-lean-pipe": ("lean", _BASE, dict(loop="pipelined"),
                             "triton-fp8-lean with QK(j) and PV(j-1) issued together before softmax(j)"),
    # d=128 only: at d=64 ptxas 12.8 (triton 3.6) reads, at the loop head, 16-bit halves of registers that
    # nothing wrote before the loop (the pattern of exact P's H200 NaN; tests/kernels/test_triton_sass.py).
    "triton-fp8-exact-pipe": ("exact", {(128, 128): _BASE[(128, 128)]}, dict(loop="pipelined"),
                              "triton-fp8-exact with QK(j) and PV(j-1) issued together before softmax(j)"),
    "triton-fp8-lean-pipe-m128": ("lean", _M128, dict(loop="pipelined"),
                                  "triton-fp8-lean-pipe with 128-row tiles of 8 warps (two warpgroups)"),
    "triton-fp8-lean-accmma": ("lean", _BASE, dict(loop="acc-in-mma"),
                               "triton-fp8-lean with PV accumulating in the wgmma (one FMUL per acc element a block)"),
    "triton-fp8-exact-accmma": ("exact", _BASE, dict(loop="acc-in-mma"),
                                "triton-fp8-exact with PV accumulating in the wgmma (one FMUL per acc element a block)"),
    "triton-fp8-lean-m64": ("lean", _M64, {}, "triton-fp8-lean with 64-row tiles of 4 warps at every head dim"),
}


def _table(base: dict, over: dict) -> dict:
    return {dims: {**cfg, **over} for dims, cfg in base.items()}


def _prepare(inputs, *, p_mode: str, table: dict, over: dict, config: dict | None = None, proton: bool = False):
    """`config` replaces the variant's table entry (launch parameters); the variant's own change (`over`)
    applies on top of it, so a test or tuning script that passes small tiles still runs the variant."""
    config = None if config is None else {**config, **over}
    return triton_fp8._prepare(inputs, mode_name=p_mode, config=config, proton=proton, table=table)


for _name, (_mode, _base, _over, _text) in VARIANTS.items():
    _prep = functools.partial(_prepare, p_mode=_mode, table=_table(_base, _over), over=_over)
    # acc-in-mma: the running PV accumulator is the wgmma's C operand, so it passes through each block's MMA
    # the pipelined and acc-in-mma loops cap a block's offset o at _triton_fp8_pipe.O_CAP (24)
    _extra = {"variant_of": f"triton-fp8-{_mode}", "acc_in_mma": _over.get("loop") == "acc-in-mma",
              **({"o_cap": 24} if _over.get("loop") in ("pipelined", "acc-in-mma") else {})}
    triton_fp8._declare(_name, _prep, _mode, _text, into=registry, extra=_extra,
                        source=f"{__name__}:_prepare", head_dims=tuple(_base))
