"""Plain attention functions for `bench error --model` tests (issue 41), named as
`tests.capture.model_error_kernels:NAME` from the repository root."""

from __future__ import annotations

import torch.nn.functional as F


def no_gqa(q, k, v, is_causal=True, scale=None):
    """torch SDPA without enable_gqa: fails on a model with fewer KV heads than query heads."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
