"""`emu-<recipe>`: every bundled low-precision recipe (harness.numerics.RECIPES) as a kernel, emulated in torch.

Correct and slow: q, k, v are transformed and quantized as the recipe declares, P is formed against the exact row
max and rounded, PV is accumulated in fp32 per key block, the output written in bf16, all in fp32 torch on any
device (`harness.numerics.attend` in fp32; the gate's reference is the same recipe in fp64). What they are for is
accuracy, not speed: ranking recipes on a real model (`bench error --model ... -k emu-nvfp4-directp`) before the
kernel exists, on any GPU or the CPU. Their times measure the emulation, never a kernel.
"""

from __future__ import annotations

from harness.errors import UnsupportedInputError
from harness.kernels import Kernel, KernelRegistry
from harness.numerics import RECIPES, attend, operands, parse_recipe

__all__ = ["registry", "kernel_name"]

registry = KernelRegistry()


def kernel_name(recipe: str) -> str:
    return f"emu-{recipe}"


def _prepare_for(recipe_name: str):
    def prepare(inputs):
        import torch

        recipe = parse_recipe(recipe_name)
        d = inputs.shape.head_dim_qk
        if recipe.hadamard and d & (d - 1):
            raise UnsupportedInputError(f"Kernel {kernel_name(recipe_name)!r} rotates Q and K by a Hadamard matrix, "
                                        f"which needs a power-of-two head dim, not {d}.")

        def launch():
            ops = operands(recipe, inputs.q, inputs.k, inputs.v, dtype=torch.float32)
            out = attend(recipe, ops, scale=inputs.scale, causal=inputs.shape.causal).out
            return out.to(torch.bfloat16)

        return launch

    prepare.__name__ = f"prepare_{recipe_name.replace('-', '_').replace('+', '_')}"
    return prepare


def _declare_all() -> None:
    for name, recipe in RECIPES.items():
        registry.add(Kernel(
            name=kernel_name(name), prepare=_prepare_for(name), dtypes=frozenset({"bfloat16", "float16"}),
            devices=frozenset({"cpu", "cuda"}), graph_safe=False, output_dtype="bfloat16",
            description=f"emulated recipe {name} (torch, fp32): {recipe.describe()}",
            source=f"{__name__}:{_prepare_for.__name__}", extra={"recipe": name, "emulated": True}))


_declare_all()
