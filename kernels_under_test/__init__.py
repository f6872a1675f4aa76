"""Kernels bundled with the harness, registered under stable names.

`register(registry)` is the `harness.kernels` entry point: it imports each kernel module and adds
what it recorded. Kernel modules declare into their own module-level `registry` with decorators that
only record, so importing a module compiles nothing and touches no GPU.
"""

from __future__ import annotations

import importlib

__all__ = ["register", "MODULES"]

MODULES = (
    "kernels_under_test.sdpa",
    "kernels_under_test.reference",
    "kernels_under_test.triton_bf16",
    "kernels_under_test.triton_fp8",
    "kernels_under_test.triton_fp8_variants",
    "kernels_under_test.gluon_fp8",
    "kernels_under_test.decode",
    "kernels_under_test.recipes",
)


def register(registry) -> None:
    for name in MODULES:
        module = importlib.import_module(name)
        for kernel in module.registry:
            registry.add(kernel)
