"""Where a capture's forward pass runs and in what dtype: the run's GPU in bf16, or the CPU in fp32."""

from __future__ import annotations

from harness.devices import open_device
from harness.errors import CaptureError, HarnessError

__all__ = ["choose_capture_device", "default_capture_dtype", "torch_device_name", "peak_memory"]


def choose_capture_device(run_device: str = "cpu", capture_device: str | None = None) -> str:
    """The device a capture runs on: `capture_device` when given (not "auto"), else the run's device.

    A capture on the run's GPU takes seconds where the CPU takes minutes (a 7B model at S = 8192 is
    ~30 GB of fp32 weights on a CPU), and the run needs that GPU anyway.

    >>> choose_capture_device("cuda:0"), choose_capture_device("cpu"), choose_capture_device("cuda:1", "cpu")
    ('cuda:0', 'cpu', 'cpu')
    """
    chosen = run_device if capture_device in (None, "", "auto") else capture_device
    kind = chosen.partition(":")[0]
    if kind not in ("cpu", "cuda", "rocm"):
        raise CaptureError(
            f"--capture-device {chosen!r} is not a device: use cpu, cuda, cuda:N, rocm:N or cuda:<PCI bus id>, "
            f"or auto (the run's device, {run_device})."
        )
    return chosen


def default_capture_dtype(device: str) -> str:
    """bf16 on a GPU (the dtype models are served in, and half the weight memory); fp32 on a CPU, which
    is faster than bf16 on CPUs without bf16 units and gives the self-check its tightest tolerance."""
    return "float32" if device == "cpu" else "bfloat16"


def torch_device_name(device: str) -> str:
    """The torch device string for a harness device spec (`rocm:0`, `cuda:<PCI bus id>` resolve here)."""
    if device == "cpu":
        return "cpu"
    try:
        return str(open_device(device).torch_device)
    except HarnessError as exc:
        raise CaptureError(
            f"Cannot capture on {device!r}: {exc} Pass --capture-device cpu to run the forward pass on the CPU "
            f"(fp32), or name a GPU this machine has."
        ) from None


def peak_memory(device: str, *, reset: bool = False) -> int | None:
    """Peak bytes allocated by torch on a GPU since the last reset (None on the CPU)."""
    if device == "cpu":
        return None
    import torch

    if reset:
        torch.cuda.reset_peak_memory_stats(torch.device(device))
        return None
    return int(torch.cuda.max_memory_allocated(torch.device(device)))
