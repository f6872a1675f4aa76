"""What `bench list kernels` shows of each registered kernel, as data (its table and `--json` both read this).

>>> from harness.kernels import Kernel, KernelRegistry
>>> reg = KernelRegistry()
>>> _ = reg.add(Kernel(name="k", prepare=lambda x: None, dtypes=frozenset({"bf16"}), devices=frozenset({"cuda"}),
...                workloads=frozenset({"decode", "paged"})))
>>> (row,) = kernel_rows(reg, "cpu")
>>> row["computes"], row["available"], row["unavailable_reason"]
(['dense', 'decode', 'paged'], False, 'runs on cuda, not cpu')
"""

from __future__ import annotations

__all__ = ["kernel_rows"]


def kernel_rows(registry, device_kind: str) -> list[dict]:
    """One dict per kernel of `registry`, in its order: name, what it computes (`Kernel.computes`: dense, decode,
    paged, varlen, window, mla), dtypes, head dims (None: any), devices, whether it is available on `device_kind`
    and why not, description and source."""
    rows = []
    for k in registry:
        reason = k.unavailable_reason(device_kind)
        rows.append({
            "name": k.name, "computes": list(k.computes()), "dtypes": sorted(k.dtypes),
            "head_dims": None if k.head_dims is None else [list(d) for d in sorted(k.head_dims)],
            "devices": sorted(k.devices), "available": reason is None, "unavailable_reason": reason,
            "causal_only": k.causal_only, "description": k.description, "source": k.source,
        })
    return rows
