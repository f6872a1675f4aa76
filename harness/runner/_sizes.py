"""The bytes an input configuration puts on the device: what the memory check (`_setup`) and `--l2 cold` (`_l2`)
weigh, and each row's bytes per launch."""

from __future__ import annotations

import math

from harness.inputs import torch_dtype

__all__ = ["estimate_bytes", "item_sizes"]


def estimate_bytes(spec, *, gate: bool) -> dict[str, int]:
    """Bytes one input configuration needs on the device: q, k, v, the output, and the gate's fp64
    reference (output and upcast k, v). Kernels' own workspaces come on top."""
    s = spec.shape
    item, out_item = item_sizes(spec.dtype)
    q, k, v, o = (math.prod(f()) for f in (s.q_shape, s.k_shape, s.v_shape, s.out_shape))
    sizes = {"q": q * item, "k": k * item, "v": v * item, "output": o * out_item}
    if gate:
        # A serving workload's reference upcasts one sequence's keys and values at a time.
        kv = (k + v) if not s.features() else max(s.kv_lengths()) * s.heads_kv * (s.head_dim_qk + s.head_dim_v)
        sizes["gate reference (fp64 output, k, v)"] = 8 * (o + kv)
    return sizes


def item_sizes(dtype: str) -> tuple[int, int]:
    """(bytes per q, k, v element, bytes per output element): FP8 kernels write bf16."""
    import torch

    item = torch.empty((), dtype=torch_dtype(dtype)).element_size()
    return item, max(item, 2)
