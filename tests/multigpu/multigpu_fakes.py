"""Stand-ins the worker processes import by name (tests/multigpu is put on their PYTHONPATH).

`busy_cpu`: a CPU device another process is using, injected through a slot's `device_factory`.
`dies_on_seed_13`: SDPA on the CPU whose process dies (os._exit) when it is prepared for an input of
seed 13, as a worker killed mid-run (OOM killer, node failure) would: no exception, no cleanup.
"""

from __future__ import annotations

import os

from harness.devices import ProcessInfo
from harness.devices._cpu import CpuDevice
from harness.kernels import KernelRegistry

__all__ = ["busy_cpu", "dies_on_seed_13", "registry"]

registry = KernelRegistry()


class _BusyCpu(CpuDevice):
    def other_processes(self):
        return [ProcessInfo(pid=4242, used_memory_bytes=2**30, name="someone-else")]


def busy_cpu(spec: str):
    return _BusyCpu(spec)


@registry.kernel("dies-on-seed-13", dtypes={"float32"}, devices={"cpu"})
def dies_on_seed_13(inputs):
    import torch.nn.functional as F

    if inputs.seed == 13:
        os._exit(9)
    q, k, v = inputs.q, inputs.k, inputs.v

    def launch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale,
                                              enable_gqa=q.shape[1] != k.shape[1])

    return launch
