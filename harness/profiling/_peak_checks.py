"""The second, independent timing of each peak, made in the same `bench peaks` run right after the sustained one.

The sustained protocol times a peak as it times attention (CUDA-graph replays where a graph captures). That is the
figure of record, and it can be wrong in ways the protocol cannot see: a device-to-device `copy_` captured in a
graph becomes a copy-engine memcpy node and read 35 % below what the same copy moves eagerly (H200, 2026-12-04).
So each peak kernel names a second method (`Kernel.extra["check"]`, made by `extra["check_prepare"]`):
- the copy: the runtime's own eager device-to-device copy (`dst.copy_(src)`), a different implementation timed a
  different way;
- every other peak: the same kernel launched eagerly, back to back, timed with device events around batches.
Each second timing warms for `warm_s` (so a memory stream is at its steady clock; a power-capped GEMM may still
read a little faster than its settled window), then takes the median of `batches` batches of about `batch_s`.
The two rates are shown side by side and a disagreement over `DISAGREE_FRAC` is flagged.
"""

from __future__ import annotations

import time
from statistics import median

from harness.inputs import make_inputs

__all__ = ["time_check"]


def time_check(kernel, device, spec, *, warm_s: float = 1.0, batches: int = 5, batch_s: float = 0.1) -> dict:
    """{"check_method", "check_time_ns"}: the kernel's second method, timed per launch on `device` (a
    `harness.devices.Device`); `spec` is the run's input (`peak_input_spec`), which only carries the device."""
    inputs = make_inputs(spec, device=device.torch_device)
    launch = kernel.extra["check_prepare"](inputs)
    launch()  # compile / allocate outside the timing
    device.synchronize()
    start = device.mark()
    launch()
    end = device.mark()
    device.wait(end)
    n = max(1, int(batch_s * 1e9 / max(device.elapsed_ns(start, end), 1)))
    until = time.monotonic() + warm_s
    while time.monotonic() < until:
        for _ in range(n):
            launch()
        device.synchronize()
    per_launch = []
    for _ in range(batches):
        start = device.mark()
        for _ in range(n):
            launch()
        end = device.mark()
        device.wait(end)
        per_launch.append(device.elapsed_ns(start, end) / n)
    del launch, inputs
    return {"check_method": kernel.extra["check"], "check_time_ns": median(per_launch)}
