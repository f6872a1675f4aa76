"""`triton-bf16`: a FlashAttention-2 style forward in Triton, BF16 in, fp32 accumulation, BF16 out.

Causal and non-causal, GQA by indexing the shared KV head (no repeated K/V), dqk = dv = 64 or 128 and
dqk = 192 with dv = 128. Scores are base 2 (softmax scale * log2(e) folded into the one multiply that
feeds exp2), softmax is online with a lazy rescale (tau = 0.5 binade, protocol.md "Lean P"), and in
the causal case only the diagonal blocks are masked. K and V come through TMA descriptors on sm_90+
(masked pointer loads elsewhere). The row sum adds the bf16-rounded p that multiplies V, so the
weights sum to one even though lazy rescale lets the largest p exceed 1. The jit code is
`_triton_common._attn_fwd`, shared with the FP8 kernels.

Tuning: `CONFIGS` maps (dqk, dv) to launch parameters and is read in `prepare()`, never at import, so a
tuning script may edit it or pass `prepare(inputs, config={...})`. One config per shape and one launch
per call: no autotuning inside the timed closure.

>>> from kernels_under_test.triton_bf16 import registry
>>> registry.get("triton-bf16").extra["tau"]
0.5
"""

from __future__ import annotations

import functools
import importlib.util
import math

from harness.errors import UnsupportedInputError
from harness.kernels import Kernel, KernelRegistry
from kernels_under_test._triton_interpreter import interpreting  # re-exported: the kernels read it from here

__all__ = ["registry", "CONFIGS", "HEAD_DIMS", "TAU", "triton_availability", "interpreting", "config_for", "prepare"]

registry = KernelRegistry()

TAU = 0.5
HEAD_DIMS = ((64, 64), (128, 128), (192, 128))
LOG2E = math.log2(math.e)

# Hopper (H200) starting points, checked ahead of time for sm_90 with triton 3.6 (HGMMA, no spills; see
# _triton_aot.compile_for and tests/kernels/test_triton_sass.py). Tune on the GPU: tile block_m x block_n,
# num_warps, num_stages (software-pipeline depth); optional keys rescale_branch (skip acc *= alpha when no
# row's max moved: a tile-wide branch), use_tma (False: pointer loads) and pack_p (round p to bf16 two at a
# time: half the conversions on the unit MUFU.EX2 uses; docs/experiments/fp8-kernel-tuning.md).
CONFIGS = {
    (64, 64): dict(block_m=128, block_n=128, num_warps=8, num_stages=3),
    # Measured on the H200 (S=16384 H=32, burst; docs/experiments/fp8-kernel-tuning.md): 6.09 ms as (8 warps, 2 stages),
    # 4.57 ms with pack_p, 4.02 ms with pack_p and 3 stages (230 KB of shared memory).
    (128, 128): dict(block_m=128, block_n=128, num_warps=8, num_stages=3, pack_p=True),
    (192, 128): dict(block_m=128, block_n=64, num_warps=8, num_stages=2),
}


def triton_availability(device_kind: str, *, min_capability: tuple[int, int] = (8, 0), why: str = "") -> str | None:
    """None when these Triton kernels can run on `device_kind` here, else the sentence saying why not."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed: pip install triton"
    if device_kind == "cpu":
        if interpreting():
            return None
        return "runs on the CPU only in the Triton interpreter (set TRITON_INTERPRET=1; slow, for tests)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    if getattr(torch.version, "hip", None) and min_capability > (8, 0):
        return "the FP8 kernels use NVIDIA's e4m3 (fp8e4nv) layout and are not built for ROCm"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < min_capability:
        need = why or "bf16 tl.dot"
        return f"{need} needs sm_{min_capability[0]}{min_capability[1]}+ (this GPU is sm_{major}{minor})"
    return None


def config_for(dqk: int, dv: int, *, table=None) -> dict:
    """The launch parameters for one head-dim pair, or raise saying which pairs are supported."""
    table = CONFIGS if table is None else table
    try:
        return dict(table[(dqk, dv)])
    except KeyError:
        dims = ", ".join(f"{a}/{b}" if a != b else str(a) for a, b in sorted(table))
        raise UnsupportedInputError(f"no Triton config for head dims dqk={dqk}, dv={dv}; supported: {dims}") from None


def check_layout(inputs) -> None:
    """The kernels index q, k, v through strides but need the head dim contiguous (it is a vector load)."""
    for name in ("q", "k", "v"):
        if getattr(inputs, name).stride(-1) != 1:
            raise UnsupportedInputError(f"Triton kernels need {name} contiguous in its last dim; pass .contiguous()")


def prepare(inputs, *, config: dict | None = None, proton: bool = False):
    """Bind q, k, v and a preallocated output; compile once here so no timed launch ever compiles.

    `proton=True` builds the variant with Proton scopes, for `bench trace --timeline` only."""
    import torch

    from kernels_under_test import _triton_common as tc

    s = inputs.shape
    check_layout(inputs)
    cfg = tc.Config(**(config if config is not None else config_for(s.head_dim_qk, s.head_dim_v)))
    q, k, v = inputs.q, inputs.k, inputs.v
    out = torch.empty((s.batch, s.heads_q, s.seq_len, s.head_dim_v), dtype=q.dtype, device=q.device)
    launch = tc.attention_launch(
        mode=tc.MODE_BF16, q=q, k=k, v=v, out=out, qk_scale=inputs.scale * LOG2E, out_scale=1.0,
        causal=s.causal, config=cfg, tau=TAU, proton=proton,
    )
    if not interpreting():  # the interpreter compiles nothing; a warm-up there only doubles test time
        launch()
    return launch


registry.add(
    Kernel(
        name="triton-bf16",
        prepare=prepare,
        dtypes=frozenset({"bfloat16", "float16"}),
        devices=frozenset({"cuda", "cpu"}),
        head_dims=frozenset(HEAD_DIMS),
        availability=functools.partial(triton_availability, min_capability=(8, 0)),
        description="Triton FlashAttention-2 forward, base-2 online softmax, lazy rescale tau=0.5, GQA",
        source=f"{__name__}:prepare",
        extra={"tau": TAU, "p_mode": "bf16"},
    )
)
