"""Kernels that break in every way a run must survive, for tests and `benchmarks/endings.py`.

Named on the command line as `module:function`, e.g. `-k tests.runner.ending_kernels:hangs` (run from the
repository root). Never bundled.
"""

from __future__ import annotations

import time

import torch.nn.functional as F

from harness.kernels import KernelRegistry

registry = KernelRegistry()
DECLARE = dict(dtypes={"float32", "bfloat16"}, devices={"cpu", "cuda"}, graph_safe=False)


def _sdpa(x):
    return F.scaled_dot_product_attention(x.q, x.k, x.v, is_causal=x.shape.causal, scale=x.scale, enable_gqa=True)


@registry.kernel("honest", **DECLARE)
def honest(x):
    """Correct attention: the control next to the broken ones."""
    return lambda: _sdpa(x)


@registry.kernel("hangs", **DECLARE)
def hangs(x):
    """Its launch never returns (a Python sleep): the watchdog must stop it in the gate."""
    def launch():
        time.sleep(3600)
        return _sdpa(x)

    return launch


@registry.kernel("hangs-later", **DECLARE)
def hangs_later(x):
    """Passes the gate, then hangs in a timed chunk."""
    calls = [0]

    def launch():
        calls[0] += 1
        if calls[0] > 12:
            time.sleep(3600)
        return _sdpa(x)

    return launch


@registry.kernel("raises", **DECLARE)
def raises(x):
    """Its launch raises."""
    def launch():
        raise RuntimeError("boom: the kernel's own bug")

    return launch


@registry.kernel("raises-in-prepare", **DECLARE)
def raises_in_prepare(x):
    """prepare() itself raises."""
    raise ValueError("cannot build the kernel")


@registry.kernel("raises-later", **DECLARE)
def raises_later(x):
    """Passes the gate, then raises in a timed chunk."""
    calls = [0]

    def launch():
        calls[0] += 1
        if calls[0] > 12:
            raise RuntimeError("illegal memory access (simulated)")
        return _sdpa(x)

    return launch


@registry.kernel("returns-none", **DECLARE)
def returns_none(x):
    """Its launch returns None."""
    def launch():
        _sdpa(x)

    return launch


@registry.kernel("wrong-shape", **DECLARE)
def wrong_shape(x):
    """Its launch returns the output transposed."""
    return lambda: _sdpa(x).transpose(1, 2).contiguous()


@registry.kernel("nan-output", **DECLARE)
def nan_output(x):
    """Returns NaN everywhere."""
    def launch():
        return _sdpa(x) * float("nan")

    return launch
