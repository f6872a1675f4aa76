"""Kernels returning odd things (adversarial round 3)."""
import numpy as np
import torch
import torch.nn.functional as F


def _s(q, k, v, is_causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=True)


def tuple_out(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale), None


def numpy_out(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale).numpy()


def list_out(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale).tolist()


def noncontig(q, k, v, is_causal=True, scale=None):
    o = _s(q, k, v, is_causal, scale)
    return o.transpose(1, 2).contiguous().transpose(1, 2)  # right values, non-contiguous strides


def alias_q(q, k, v, is_causal=True, scale=None):
    return q


def writes_into_q(q, k, v, is_causal=True, scale=None):
    o = _s(q, k, v, is_causal, scale)
    q.copy_(o)
    return q


def int_out(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale).to(torch.int32)


def zero_dim(q, k, v, is_causal=True, scale=None):
    return torch.tensor(1.0)


def requires_grad(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale).requires_grad_(True)


class Sub(torch.Tensor):
    pass


def subclass(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale).as_subclass(Sub)


def view_of_bigger(q, k, v, is_causal=True, scale=None):
    o = _s(q, k, v, is_causal, scale)
    big = torch.empty((2,) + tuple(o.shape), dtype=o.dtype)
    big[1] = o
    return big[1]


_persist = {}


def persistent_buffer(q, k, v, is_causal=True, scale=None):
    """Honest: writes into one buffer it keeps, returns it every call (out= style)."""
    o = _s(q, k, v, is_causal, scale)
    buf = _persist.setdefault("b", torch.empty_like(o))
    buf.copy_(o)
    return buf


_n = {"c": 0}


def nan_after_gate(q, k, v, is_causal=True, scale=None):
    _n["c"] += 1
    o = _s(q, k, v, is_causal, scale)
    return o if _n["c"] <= 5 else o.fill_(float("nan"))


def cached_clone_after_gate(q, k, v, is_causal=True, scale=None):
    """Computes once after the gate, then returns clones of a private cache: values right, no work."""
    _n["c"] += 1
    if _n["c"] <= 5 or "o" not in _persist:
        _persist["o"] = _s(q, k, v, is_causal, scale)
    return _persist["o"].clone()


def scaled_after_gate(q, k, v, is_causal=True, scale=None):
    _n["c"] += 1
    o = _s(q, k, v, is_causal, scale)
    return o if _n["c"] <= 5 else o * 1.01
