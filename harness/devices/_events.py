from __future__ import annotations

from harness.devices._base import Mark

__all__ = ["TorchStreamTiming"]


class TorchStreamTiming:
    """Timing on the current torch stream: CUDA events, which are HIP events on PyTorch's ROCm build.

    Mixed into the GPU devices; needs `self.index`.
    """

    index: int

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.index)

    def mark(self) -> Mark:
        import torch

        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return Mark(e)

    def wait(self, mark: Mark) -> None:
        mark.handle.synchronize()

    def elapsed_ns(self, start: Mark, end: Mark) -> int:
        return int(round(start.handle.elapsed_time(end.handle) * 1e6))
