"""Getting from "pynvml and a PCI bus id" to an NVML device handle, with errors a user can act on.

Shared by the NVML sampler and `nvml_compute_processes` (the devices package's busy-GPU check).
"""

from __future__ import annotations

import re
from typing import Any

from harness.errors import TelemetryError

__all__ = [
    "import_nvml",
    "normalize_pci_bus_id",
    "nvml_error_name",
    "open_nvml_device",
    "close_nvml",
    "nvml_compute_processes",
]

_ALTERNATIVES = "or choose another telemetry backend (--telemetry host, or --telemetry none)"


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


def normalize_pci_bus_id(bus_id: str | bytes) -> str:
    """NVML's form `DDDDDDDD:BB:DD.F`, upper case, from torch's `0000:1b:00.0`, NVML's own, or `1b:00.0`.

    >>> normalize_pci_bus_id("0000:1b:00.0")
    '00000000:1B:00.0'
    """
    s = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    s = s.strip().rstrip("\x00").upper()
    m = re.fullmatch(r"(?:([0-9A-F]{1,8}):)?([0-9A-F]{1,2}):([0-9A-F]{1,2})(?:\.([0-7]))?", s)
    if m is None:
        raise TelemetryError(
            f"{bus_id!r} is not a PCI bus id. Expected the form DDDD:BB:DD.F in hex, e.g. 0000:1B:00.0 "
            "(what `nvidia-smi --query-gpu=pci.bus_id --format=csv` prints)."
        )
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{fn or '0'}"


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
    return TelemetryError(
        f"NVML refused access ({nvml_error_name(nvml, e)}: {e}). This user cannot open the GPU's device "
        "files: check that /dev/nvidiactl and /dev/nvidia* are readable and writable by you (group "
        "`video` on some systems), or that the container was given the GPU; "
        f"{_ALTERNATIVES}."
    )


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

    Devices are matched by enumerating NVML's own list rather than passing our string to
    `nvmlDeviceGetHandleByPciBusId`, so the error can say which ids do exist. On any error NVML is
    shut down again before raising.
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
        for bus_id, handle in found:
            if bus_id == wanted:
                return handle, bus_id
        seen = ", ".join(b for b, _ in found) or "none"
        extra = f" ({'; '.join(notes)})" if notes else ""
        raise TelemetryError(
            f"NVML sees no GPU with PCI bus id {wanted} (asked for {pci_bus_id!r}). The PCI ids NVML sees "
            f"are: {seen}{extra}. NVML ignores CUDA_VISIBLE_DEVICES, so this is every GPU the machine exposes: "
            "check the --device argument against `nvidia-smi --query-gpu=pci.bus_id --format=csv`."
        )
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
