from __future__ import annotations

from harness.devices._base import DeviceIdentity, Mark

__all__ = ["TorchStreamTiming"]


class TorchStreamTiming:
    """Timing on the current torch stream: CUDA events, which are HIP events on PyTorch's ROCm build.

    Mixed into the GPU devices; needs `self.index` and `self._pci`.
    """

    index: int
    _pci: str | None

    def _torch_identity(self, *, kind: str, runtime: str, compute_capability, **vendor) -> DeviceIdentity:
        """What PyTorch knows of the device, with the vendor library's fields (driver, limits) in `vendor`."""
        import torch

        props = torch.cuda.get_device_properties(self.index)
        return DeviceIdentity(
            kind=kind, index=self.index, name=props.name, pci_bus_id=self._pci,
            uuid=str(getattr(props, "uuid", "")) or None, runtime=runtime,
            compute_capability=compute_capability(props) if callable(compute_capability) else compute_capability,
            sm_count=props.multi_processor_count,  # compute units on ROCm
            memory_bytes=props.total_memory, **vendor,
        )

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
