"""Example kernels: a tiny attention implementation declared the way a kernel repository declares one.

The factory does the setup and returns a zero-argument launch closure; only the closure is timed.
"""

from __future__ import annotations

from harness.kernels import KernelRegistry

__all__ = ["registry", "register"]

registry = KernelRegistry()


@registry.kernel("example-attention", dtypes={"float32", "bfloat16"}, devices={"cpu", "cuda"})
def example_attention(inputs):
    """Causal attention through torch's scaled_dot_product_attention."""
    import torch.nn.functional as F

    q, k, v = inputs.q, inputs.k, inputs.v
    gqa = q.shape[1] != k.shape[1]

    def launch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale,
                                              enable_gqa=gqa)

    return launch


def register(target: KernelRegistry) -> None:
    """The `harness.kernels` entry point: add this repository's kernels to the harness's registry."""
    for kernel in registry:
        target.add(kernel)
