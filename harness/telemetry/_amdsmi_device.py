"""amdsmi plumbing: importing it, and getting from a PCI bus id to a processor handle.

Shared by the amdsmi sampler, the ROCm device (identity, busy-GPU check) and `bench doctor`; every
error is one a user can act on.

The pip package `amdsmi` is a ctypes wrapper that loads ROCm's `libamd_smi.so` while it is being
imported, so how the import fails says what is wrong (seen with the 7.0.2 wheel on a machine without
ROCm, and in ROCm/amdsmi#186 for a package newer than its library):

- ImportError: the package is not installed.
- KeyError('libamd_smi.so'): the package is installed, the library is not found. The wrapper first
  prints "...cannot open shared object file..." on stdout; that text is captured and quoted instead.
- AttributeError "...undefined symbol: amdsmi_...": the library is older than the package.

Its values are read through `_amdsmi_values` ("N/A" for anything unsupported).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from importlib import metadata
from typing import Any

from harness.errors import TelemetryError
from harness.telemetry._amdsmi_values import as_number
from harness.telemetry._vendor import (
    ALTERNATIVES as _ALTERNATIVES,
    device_files_error,
    find_bus_id,
    normalize_pci_bus_id,
)

__all__ = [
    "CACHE_VAR",
    "import_amdsmi",
    "amdsmi_error_text",
    "amdsmi_status",
    "open_amdsmi_device",
    "close_amdsmi",
    "init_amdsmi",
    "amdsmi_gpu_processes",
    "amdsmi_versions",
]

CACHE_VAR = "AMDSMI_GPU_METRICS_CACHE_MS"
_REINSTALL = ("reinstall the copy that ships with your ROCm: `pip uninstall amdsmi` then "
              "`python3 -m pip install /opt/rocm/share/amd_smi` (or pin `amdsmi==<your ROCm version>`)")

# amdsmi_status_t values (amdsmi_wrapper.py, 7.0.2). Literal, so an older wrapper without a name still works.
NO_PERM, NOT_SUPPORTED, DRIVER_NOT_LOADED, NOT_FOUND, NO_DATA = 10, 2, 34, 31, 40
_LOAD_FAILURES = {4: "AMDSMI_STATUS_FAIL_LOAD_MODULE", 5: "AMDSMI_STATUS_FAIL_LOAD_SYMBOL", 18: "AMDSMI_STATUS_INIT_ERROR"}
_STATUS_NAMES = {
    1: "AMDSMI_STATUS_INVAL", NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED", 8: "AMDSMI_STATUS_TIMEOUT",
    9: "AMDSMI_STATUS_RETRY", NO_PERM: "AMDSMI_STATUS_NO_PERM", 12: "AMDSMI_STATUS_IO", 14: "AMDSMI_STATUS_FILE_ERROR",
    NOT_FOUND: "AMDSMI_STATUS_NOT_FOUND", 32: "AMDSMI_STATUS_NOT_INIT", DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED",
    NO_DATA: "AMDSMI_STATUS_NO_DATA", 52: "AMDSMI_STATUS_FILE_NOT_FOUND", **_LOAD_FAILURES,
}


def _package_version(module: Any = None) -> str | None:
    version = getattr(module, "__version__", None) if module is not None else None
    if isinstance(version, str) and version:
        return version
    try:
        return metadata.version("amdsmi")
    except Exception:
        return None


def _disable_metrics_cache(already_loaded: bool) -> str:
    """Set AMDSMI_GPU_METRICS_CACHE_MS=0 (a cached table would repeat readings) and say whether it can still work."""
    before = os.environ.get(CACHE_VAR)
    os.environ[CACHE_VAR] = "0"
    if before == "0":
        return "ok"
    if already_loaded:
        # PyTorch's ROCm build imports amdsmi itself, so in a benchmark process the library is usually loaded
        # before this line runs; AMD documents the variable as read "before the library loads".
        return (f"metrics cache: {CACHE_VAR} was {before or 'unset'} when amdsmi was already loaded (PyTorch's ROCm "
                f"build imports it), so setting it to 0 now may come too late. Start the run with {CACHE_VAR}=0 in "
                "the environment; repeated readings are dropped by firmware timestamp either way")
    return "ok" if before is None else f"ok: {CACHE_VAR} was {before}, set to 0 so no reading is served from a cache"


def import_amdsmi(amdsmi: Any = None) -> tuple[Any, str]:
    """(the amdsmi module, what happened to the metrics cache setting). The injected module wins (tests).

    Imported here, never at package import, and only after AMDSMI_GPU_METRICS_CACHE_MS is set.
    """
    loaded = amdsmi is not None or sys.modules.get("amdsmi") is not None
    cache_note = _disable_metrics_cache(loaded)
    if amdsmi is not None:
        return amdsmi, cache_note
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):  # the wrapper prints its load failure instead of raising it
            import amdsmi as module
    except ImportError as e:
        raise TelemetryError(
            f"AMD telemetry needs the amdsmi Python package, which is not importable here ({e}). Install the copy "
            "that matches your ROCm: `python3 -m pip install /opt/rocm/share/amd_smi` (or `pip install amdsmi==<your "
            f"ROCm version>`, e.g. 7.0.2 on ROCm 7.0.2); {_ALTERNATIVES}."
        ) from None
    except Exception as e:
        raise _import_error(e, printed.getvalue()) from None
    return module, cache_note


def _import_error(e: Exception, printed: str) -> TelemetryError:
    said = " ".join(printed.split())
    version = _package_version()
    package = f"amdsmi {version}" if version else "amdsmi"
    if (isinstance(e, KeyError) and "libamd_smi" in str(e)) or isinstance(e, OSError):
        detail = said or f"{type(e).__name__}: {e}"
        return TelemetryError(
            f"The {package} Python package is installed, but ROCm's libamd_smi.so cannot be loaded ({detail}). The "
            "package is only a wrapper: the library ships with ROCm (package amd-smi-lib). Install ROCm, or set "
            "ROCM_PATH to the ROCm that has it (the wrapper looks in $ROCM_PATH/lib, the linker path and "
            f"/opt/rocm/lib); check with `amd-smi version`; {_ALTERNATIVES}."
        )
    if isinstance(e, AttributeError) and "undefined symbol" in str(e):
        return TelemetryError(
            f"The {package} Python package does not match ROCm's libamd_smi.so: {e}. The package is newer than the "
            "library (it asks for a function the library lacks); this happens when `pip install amdsmi` pulls the "
            f"latest release onto an older ROCm. Fix: {_REINSTALL}; {_ALTERNATIVES}."
        )
    return TelemetryError(
        f"Importing the {package} Python package failed ({type(e).__name__}: {e}{'; it printed: ' + said if said else ''}). "
        f"Check that `amd-smi version` works, then {_REINSTALL}; {_ALTERNATIVES}."
    )


def amdsmi_status(err: BaseException) -> int | None:
    """The amdsmi_status_t of an AmdSmiLibraryException, None for any other error."""
    code = getattr(err, "err_code", None)
    return code if isinstance(code, int) else None


def amdsmi_error_text(err: BaseException) -> str:
    """`AMDSMI_STATUS_NO_PERM (10)` for a library error; the class and message for anything else."""
    code = amdsmi_status(err)
    if code is None:
        return f"{type(err).__name__}: {' '.join(str(err).split())}"
    return f"{_STATUS_NAMES.get(code, 'amdsmi status')} ({code})"


def _permission_error(err: BaseException, what: str) -> TelemetryError:
    return device_files_error(
        "amdsmi", f"while {what} ({amdsmi_error_text(err)})",
        "/dev/kfd and /dev/dri/renderD* must be readable and writable by you (groups `render` and `video` on most "
        "distributions: `sudo usermod -aG render,video $USER`, then log in again); in a container pass "
        "`--device /dev/kfd --device /dev/dri --group-add video --group-add render`",
    )


def _no_gpu_error(detail: str) -> TelemetryError:
    return TelemetryError(
        f"amdsmi sees no AMD GPU on this machine ({detail}). Check `amd-smi list`: the amdgpu kernel driver must be "
        "loaded (`lsmod | grep amdgpu`) and, in a container, /dev/kfd and /dev/dri must be passed in. On a machine "
        "without an AMD GPU use --device cpu, or --device cuda:N with --telemetry nvml on NVIDIA."
    )


# amdsmi_init/amdsmi_shut_down are a bool in libamd_smi (ROCm amdsmi src/amd_smi/amd_smi.cc: a second init
# is a no-op, the first shutdown tears everything down), so an identity or busy-GPU call that opens and
# closes amdsmi while a sampler holds a handle would invalidate that handle. The harness counts its own
# users per module object and calls the library only on the first open and the last close.
_USERS: dict[int, tuple[Any, int]] = {}  # id -> (the module, kept so its id is never reused; its users)
_USERS_LOCK = threading.Lock()


def init_amdsmi(amdsmi: Any) -> None:
    """amdsmi_init for one more user (the library itself is started only for the first); pair with close_amdsmi."""
    with _USERS_LOCK:
        users = _USERS.get(id(amdsmi), (amdsmi, 0))[1]
        if users == 0:
            _library_init(amdsmi)
        _USERS[id(amdsmi)] = (amdsmi, users + 1)


def _library_init(amdsmi: Any) -> None:
    try:
        amdsmi.amdsmi_init()
    except amdsmi.AmdSmiException as e:
        code = amdsmi_status(e)
        if code == NO_PERM:
            raise _permission_error(e, "starting (amdsmi_init)") from None
        if code == DRIVER_NOT_LOADED:
            raise TelemetryError(
                "AMD telemetry cannot start: the amdgpu kernel driver is not loaded (AMDSMI_STATUS_DRIVER_NOT_LOADED). "
                f"Check `lsmod | grep amdgpu` and `dmesg | grep amdgpu`; load the driver (or reboot after installing "
                f"it), {_ALTERNATIVES}."
            ) from None
        if code in (NOT_FOUND, NO_DATA):
            raise _no_gpu_error(f"amdsmi_init: {amdsmi_error_text(e)}") from None
        if code in _LOAD_FAILURES:
            raise TelemetryError(
                f"libamd_smi.so loaded but could not initialise ({amdsmi_error_text(e)}): one of its own components "
                "is missing or from another ROCm version. Check that `amd-smi version` works; if it does, the Python "
                f"package is the odd one out: {_REINSTALL}; {_ALTERNATIVES}."
            ) from None
        raise TelemetryError(
            f"AMD telemetry cannot start: amdsmi_init failed with {amdsmi_error_text(e)}. Check that `amd-smi list` "
            f"works on this machine, {_ALTERNATIVES}."
        ) from None


def close_amdsmi(amdsmi: Any) -> None:
    """Release one user of amdsmi; the last one calls amdsmi_shut_down (errors ignored: nothing is left to fix)."""
    with _USERS_LOCK:
        users = _USERS.get(id(amdsmi), (amdsmi, 0))[1]
        if users > 1:
            _USERS[id(amdsmi)] = (amdsmi, users - 1)
            return
        _USERS.pop(id(amdsmi), None)
        try:
            amdsmi.amdsmi_shut_down()
        except Exception:
            pass


def open_amdsmi_device(amdsmi: Any, pci_bus_id: str | None) -> tuple[Any, str]:
    """amdsmi_init, then the handle of the GPU at `pci_bus_id`; returns (handle, normalised id).

    GPUs are matched by enumerating amdsmi's own list (`find_bus_id`) rather than by
    amdsmi_get_processor_handle_from_bdf. On any error amdsmi is shut down again before raising.
    """
    if pci_bus_id is None:
        raise TelemetryError(
            "AMD telemetry needs the GPU's PCI bus id, and none is known for this device (PyTorch did not report "
            f"one). Pass the device by its bus id (e.g. --device rocm:0000:c1:00.0), {_ALTERNATIVES}."
        )
    wanted = normalize_pci_bus_id(pci_bus_id)
    init_amdsmi(amdsmi)
    try:
        try:
            handles = list(amdsmi.amdsmi_get_processor_handles())
        except amdsmi.AmdSmiException as e:
            if amdsmi_status(e) == NO_PERM:
                raise _permission_error(e, "listing GPUs") from None
            if amdsmi_status(e) in (NOT_FOUND, NO_DATA):
                raise _no_gpu_error(f"amdsmi_get_processor_handles: {amdsmi_error_text(e)}") from None
            raise TelemetryError(
                f"amdsmi started but could not list GPUs: {amdsmi_error_text(e)}. Check `amd-smi list`, {_ALTERNATIVES}."
            ) from None
        found, notes = [], []
        for index, handle in enumerate(handles):
            try:
                found.append((normalize_pci_bus_id(amdsmi.amdsmi_get_gpu_device_bdf(handle)), handle))
            except amdsmi.AmdSmiException as e:
                notes.append(f"GPU {index}: {amdsmi_error_text(e)}")
        if not found and not notes:
            raise _no_gpu_error("amdsmi_get_processor_handles returned none")
        return find_bus_id(found, notes, wanted=wanted, asked=pci_bus_id, library="amdsmi",
                           ignores="HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES", listing="amd-smi list")
    except BaseException:
        close_amdsmi(amdsmi)
        raise


def _field(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, dict) else getattr(entry, key, None)


def amdsmi_gpu_processes(pci_bus_id: str | None, *, amdsmi: Any = None) -> list[tuple[int, int | None, str | None]]:
    """(pid, GPU memory in bytes or None, name or None) of every process amdsmi lists on the GPU at `pci_bus_id`.

    An empty list means nothing else runs there (the caller removes its own pid). Raises `TelemetryError`
    when amdsmi cannot be used, so a caller can tell "nobody else is here" from "cannot tell".

    >>> amdsmi_gpu_processes("0000:c1:00.0")  # doctest: +SKIP
    [(4242, 1073741824, 'python3')]
    """
    module, _ = import_amdsmi(amdsmi)
    handle, bus_id = open_amdsmi_device(module, pci_bus_id)
    try:
        try:
            procs = module.amdsmi_get_gpu_process_list(handle)
        except module.AmdSmiException as e:
            if amdsmi_status(e) == NO_PERM:
                raise _permission_error(e, f"listing the processes on GPU {bus_id}") from None
            raise TelemetryError(
                f"amdsmi could not list the processes on GPU {bus_id}: {amdsmi_error_text(e)}. Without this list the "
                "harness cannot check that the GPU is otherwise idle; run `amd-smi process` to check by hand."
            ) from None
        out: list[tuple[int, int | None, str | None]] = []
        for p in procs:
            mem, name = as_number(_field(p, "mem")), _field(p, "name")
            out.append((int(_field(p, "pid")), None if mem is None else int(mem),
                        name if isinstance(name, str) and name != "N/A" else None))
        return out
    finally:
        close_amdsmi(module)


def amdsmi_versions(amdsmi: Any) -> dict[str, str | None]:
    """{"package", "library", "rocm"} versions, each a string or None; "*_error" keys say why one is missing.

    The PyPI package follows ROCm's numbering (7.0.2 for ROCm 7.0.2); libamd_smi.so has its own (26.x on
    ROCm 7), so the match that matters is package against ROCm. The library version needs amdsmi_init.
    """
    out: dict[str, str | None] = {"package": _package_version(amdsmi), "library": None, "rocm": None}
    try:
        ok, text = amdsmi.amdsmi_get_rocm_version()
        out["rocm" if ok else "rocm_error"] = str(text)
    except Exception as e:
        out["rocm_error"] = amdsmi_error_text(e)
    try:
        init_amdsmi(amdsmi)
    except TelemetryError as e:
        out["library_error"] = str(e)
        return out
    try:
        v = amdsmi.amdsmi_get_lib_version()
        # "build" is left out: the 7.0.2 wheel reads one character of the C string (build.contents.value).
        out["library"] = f"{v['major']}.{v['minor']}.{v['release']}"
    except Exception as e:
        out["library_error"] = amdsmi_error_text(e)
    finally:
        close_amdsmi(amdsmi)
    return out

