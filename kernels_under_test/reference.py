"""The fp64 reference as a kernel: slow, exact, and useful to check the gate itself on any device."""

from __future__ import annotations

from harness.kernels import KernelRegistry, reference_attention

__all__ = ["registry"]

registry = KernelRegistry()


@registry.kernel(
    "reference-fp64",
    dtypes={"bfloat16", "float16", "float32", "float64"},
    devices={"cpu", "cuda"},
    graph_safe=False,
    tolerance="fp64",
    description="attention in fp64 (upcast inputs), row-blocked; the gate's reference",
)
def reference_fp64(inputs):
    def launch():
        return reference_attention(inputs.q, inputs.k, inputs.v, scale=inputs.scale, causal=inputs.shape.causal)

    return launch
