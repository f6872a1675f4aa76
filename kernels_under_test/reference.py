"""The fp64 reference as a kernel: slow, exact, and useful to check the gate itself on any device."""

from __future__ import annotations

from harness.kernels import WORKLOADS, KernelRegistry, workload_reference

__all__ = ["registry"]

registry = KernelRegistry()


@registry.kernel(
    "reference-fp64",
    dtypes={"bfloat16", "float16", "float32", "float64"},
    devices={"cpu", "cuda"},
    graph_safe=False,
    tolerance="fp64",
    description="attention in fp64 (upcast inputs), row-blocked, one sequence at a time; the gate's reference",
    workloads=WORKLOADS,
)
def reference_fp64(inputs):
    def launch():
        return workload_reference(inputs)

    return launch
