from __future__ import annotations

from harness.devices._base import Device
from harness.devices._cpu import CpuDevice
from harness.devices._cuda import CudaDevice, resolve_cuda_index
from harness.devices._rocm import RocmDevice, is_hip_build, resolve_rocm_index
from harness.errors import DeviceBusyError, DeviceError, TelemetryError

__all__ = ["open_device", "check_idle"]


def open_device(spec: str, *, nvml=None, amdsmi=None) -> Device:
    """A device from `cpu`, `cuda[:N|:<PCI bus id>]` or `rocm[:N|:<PCI bus id>]`.

    On PyTorch's ROCm (HIP) build `cuda:...` names an AMD GPU (HIP keeps the torch.cuda API), so it
    opens the ROCm device, identified and monitored through amdsmi, not NVML; its `kind` is "rocm".
    `nvml` / `amdsmi` inject stand-ins for the vendor modules (tests).
    """
    kind, _, rest = spec.partition(":")
    if kind == "cpu":
        return CpuDevice(spec)
    if kind == "rocm":
        return RocmDevice(spec, resolve_rocm_index(spec, rest), amdsmi=amdsmi)
    if kind == "cuda":
        if is_hip_build():
            return RocmDevice(spec, resolve_rocm_index(spec, rest), amdsmi=amdsmi)
        return CudaDevice(spec, resolve_cuda_index(spec, rest), nvml=nvml)
    raise DeviceError(
        f"Unknown device {spec!r}. Use cpu, cuda, cuda:N or cuda:<PCI bus id> (e.g. cuda:0000:1B:00.0) for NVIDIA, "
        "or rocm, rocm:N or rocm:<PCI bus id> for AMD."
    )


def check_idle(device: Device, *, allow_busy: bool) -> list:
    """Refuse a GPU that other compute processes are using, unless `allow_busy` (then return them)."""
    try:
        others = device.other_processes()
    except TelemetryError as exc:
        if allow_busy:
            return []
        raise DeviceBusyError(
            f"Cannot tell whether other processes are using {device.spec}: {exc} The harness refuses to measure a "
            f"GPU it cannot check. Make {'amdsmi' if device.kind == 'rocm' else 'NVML'} usable, or pass --allow-busy to "
            f"run unchecked (recorded in the results)."
        ) from None
    if others and not allow_busy:
        listing = ", ".join(
            f"pid {p.pid}" + (f" ({p.used_memory_bytes / 2**20:.0f} MiB)" if p.used_memory_bytes else "") for p in others
        )
        raise DeviceBusyError(
            f"{device.spec} is busy: other compute processes are on it ({listing}). Their work would change the "
            f"clock and power this run measures. Wait for them to finish or pick another GPU; --allow-busy runs "
            f"anyway and records the processes in the results."
        )
    return others
