"""The correctness gate as the interpreter case scripts (splitkv_cases.py, mla_cases.py) run it on many shapes of one
kernel. Imported by them only after TRITON_INTERPRET=1 is set; importing this module imports nothing heavy."""

from __future__ import annotations

from harness.kernels import gate
from harness.kernels._leak import nan_leak_check

__all__ = ["gate_shape"]


def gate_shape(kernel, x, launch, *, closure_checks: bool):
    """The gate's comparison with the fp64 reference, and its NaN-leak check (packed or paged batches), on this
    shape. The gate's checks of the launch closure (an output not cached, inputs read at each launch) only where
    `closure_checks`: they launch twice more, a new fp64 reference included, and check the closure, which is the same
    on every shape; each script runs them on its first case. (The interpreter takes seconds a launch on these
    shapes: they were half of the scripts' time.)"""
    result = gate(kernel, x, launch, check_fresh=closure_checks)
    if not closure_checks:  # the gate runs it among the closure checks: here it is the shape's own
        nan_leak_check(kernel, x, launch, sync=lambda out: None)
    return result
