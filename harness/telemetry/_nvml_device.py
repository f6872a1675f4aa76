"""Getting from "pynvml and a PCI bus id" to an NVML device handle, with errors a user can act on.

Shared by the NVML sampler and `nvml_compute_processes` (the devices package's busy-GPU check).
"""

from __future__ import annotations

from typing import Any

from harness.errors import TelemetryError
from harness.telemetry._vendor import (
    ALTERNATIVES as _ALTERNATIVES,
    device_files_error,
    find_bus_id,
    normalize_pci_bus_id,
)

__all__ = [
    "import_nvml",
    "nvml_error_name",
    "open_nvml_device",
    "close_nvml",
    "nvml_compute_processes",
]

def import_nvml(nvml: Any = None) -> Any:
    """The injected module, else `pynvml`; imported here, never at package import."""
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError as e:
        raise TelemetryError(
            "NVML telemetry needs the nvidia-ml-py package (module pynvml), which is not importable "
            f"here ({e}). Install it with `pip install nvidia-ml-py` (or `pip install harness[nvidia]`), "
            f"{_ALTERNATIVES}."
        ) from None
    return pynvml


def nvml_error_name(nvml: Any, err: BaseException) -> str:
    """`NVML_ERROR_NOT_SUPPORTED` for an NVMLError of that value; the class name for anything else."""
    value = getattr(err, "value", None)
    if value is not None:
        for name in dir(nvml):
            if name.startswith("NVML_ERROR_") and getattr(nvml, name) == value:
                return name
    return type(err).__name__


def _is(nvml: Any, err: BaseException, const: str) -> bool:
    return getattr(err, "value", object()) == getattr(nvml, const, object())


def _init(nvml: Any) -> None:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise _init_error(nvml, e) from None


def _init_error(nvml: Any, e: BaseException) -> TelemetryError:
    if _is(nvml, e, "NVML_ERROR_LIBRARY_NOT_FOUND"):
        return TelemetryError(
            "NVML telemetry cannot start: libnvidia-ml.so.1, which ships with the NVIDIA driver, was not "
            "found. Install the NVIDIA driver; in a container, start it with the NVIDIA container toolkit "
            f"(e.g. `docker run --gpus all`) so the driver library is mounted; {_ALTERNATIVES}."
        )
    if _is(nvml, e, "NVML_ERROR_DRIVER_NOT_LOADED"):
        return TelemetryError(
            "NVML telemetry cannot start: the NVIDIA kernel driver is not loaded (NVML_ERROR_DRIVER_NOT_LOADED). "
            f"Check `nvidia-smi`; load the driver (or reboot after installing it), {_ALTERNATIVES}."
        )
    if _is(nvml, e, "NVML_ERROR_NO_PERMISSION"):
        return _permission_error(nvml, e)
    if _is(nvml, e, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"):
        return TelemetryError(
            "NVML telemetry cannot start: the NVML library and the loaded kernel driver are different "
            "versions (usually after a driver upgrade without a reboot). Reboot, or reload the nvidia "
            f"kernel modules, {_ALTERNATIVES}."
        )
    return TelemetryError(
        f"NVML telemetry cannot start: nvmlInit failed with {nvml_error_name(nvml, e)} ({e}). "
        f"Check that `nvidia-smi` works on this machine, {_ALTERNATIVES}."
    )


def _permission_error(nvml: Any, e: BaseException) -> TelemetryError:
    return device_files_error("NVML", f"({nvml_error_name(nvml, e)}: {e})",
                              "check that /dev/nvidiactl and /dev/nvidia* are readable and writable by you (group "
                              "`video` on some systems), or that the container was given the GPU")


def _visible_devices(nvml: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    """(normalised id, handle) of every device NVML lists, and one note per device it would not open."""
    found: list[tuple[str, Any]] = []
    notes: list[str] = []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            found.append((normalize_pci_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId), handle))
        except nvml.NVMLError as e:
            notes.append(f"device {index}: {nvml_error_name(nvml, e)}")
    return found, notes


def open_nvml_device(nvml: Any, pci_bus_id: str | None) -> tuple[Any, str]:
    """nvmlInit, then the handle of the device at `pci_bus_id`; returns (handle, normalised id).

    Devices are matched by enumerating NVML's own list (`find_bus_id`) rather than passing our string to
    `nvmlDeviceGetHandleByPciBusId`. On any error NVML is shut down again before raising.
    """
    if pci_bus_id is None:
        raise TelemetryError(
            "NVML telemetry needs the GPU's PCI bus id, and none is known for this device (PyTorch did not "
            "report one). Pass the device as its bus id (e.g. --device cuda:0000:1B:00.0), "
            f"{_ALTERNATIVES}."
        )
    wanted = normalize_pci_bus_id(pci_bus_id)
    _init(nvml)
    try:
        try:
            found, notes = _visible_devices(nvml)
        except nvml.NVMLError as e:
            if _is(nvml, e, "NVML_ERROR_NO_PERMISSION"):
                raise _permission_error(nvml, e) from None
            raise TelemetryError(
                f"NVML started but could not list devices: {nvml_error_name(nvml, e)} ({e}). "
                f"Check `nvidia-smi`, {_ALTERNATIVES}."
            ) from None
        return find_bus_id(found, notes, wanted=wanted, asked=pci_bus_id, library="NVML",
                           ignores="CUDA_VISIBLE_DEVICES", listing="nvidia-smi --query-gpu=pci.bus_id --format=csv")
    except BaseException:
        close_nvml(nvml)
        raise


def close_nvml(nvml: Any) -> None:
    """nvmlShutdown, ignoring errors: it is reference counted, and a failed shutdown leaves nothing to fix."""
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass


def nvml_compute_processes(pci_bus_id: str | None, *, nvml: Any = None) -> list[tuple[int, int | None]]:
    """(pid, used GPU memory in bytes or None) of every compute process on the GPU at `pci_bus_id`.

    Graphics-only processes are not listed (NVML reports them separately). Raises `TelemetryError`
    when NVML cannot be used, so a caller can tell "nobody else is here" from "cannot tell".

    >>> nvml_compute_processes("0000:1B:00.0")  # doctest: +SKIP
    [(4242, 1073741824)]
    """
    nvml = import_nvml(nvml)
    handle, _ = open_nvml_device(nvml, pci_bus_id)
    try:
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError as e:
            raise TelemetryError(
                f"NVML could not list the processes on GPU {pci_bus_id}: {nvml_error_name(nvml, e)} ({e}). "
                "Without this list the harness cannot check that the GPU is otherwise idle; run "
                "`nvidia-smi` to check by hand."
            ) from None
        out: list[tuple[int, int | None]] = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append((int(p.pid), None if used is None else int(used)))
        return out
    finally:
        close_nvml(nvml)
