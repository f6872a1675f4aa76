"""Kernels that turn wrong after the gate (issue 41), named by `benchmarks/h200/output_watch.sh` as
`benchmarks/h200/watch_kernels.py:NAME`. Each is honest for its first 6 calls (prepare's and the gate's), then:

- `zeros_after_gate`: returns zeros;
- `copy_after_gate`: returns a copy of an output it kept (right values, no attention computed);
- `honest`: never turns (the control: it must be timed).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_calls = {"n": 0}
_kept: dict = {}


def _sdpa(q, k, v, is_causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def zeros_after_gate(q, k, v, is_causal=True, scale=None):
    _calls["n"] += 1
    out = _sdpa(q, k, v, is_causal, scale)
    return out if _calls["n"] <= 6 else torch.zeros_like(out)


def copy_after_gate(q, k, v, is_causal=True, scale=None):
    _calls["n"] += 1
    if _calls["n"] <= 6 or "out" not in _kept:
        _kept["out"] = _sdpa(q, k, v, is_causal, scale)
    return _kept["out"].clone()


def honest(q, k, v, is_causal=True, scale=None):
    return _sdpa(q, k, v, is_causal, scale)
