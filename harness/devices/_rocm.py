"""One AMD GPU through PyTorch's ROCm (HIP) build.

PyTorch's HIP build exposes AMD GPUs through the `torch.cuda` API (`torch.version.hip` is set, tensors
live on `torch.device("cuda", i)`, `torch.cuda.Event` records HIP events). So this device times with
HIP events exactly as the CUDA device times with CUDA events, but identifies the GPU, lists its other
processes and reads its telemetry through amdsmi instead of NVML. `open_device` returns it for
`rocm:N`, `rocm:<PCI bus id>`, and for `cuda:...` when PyTorch is a HIP build.

Not yet run on AMD hardware here: built against the documented interfaces and tested with a fake HIP
`torch.cuda` surface and a fake amdsmi module.
"""

from __future__ import annotations

import os

from harness.devices._base import DeviceIdentity, ProcessInfo
from harness.devices._cuda import cuda_pci_bus_id, select_index
from harness.devices._events import TorchStreamTiming
from harness.errors import DeviceError, HarnessError
from harness.telemetry import (
    amdsmi_gpu_processes,
    amdsmi_partition_bdf,
    as_number,
    close_amdsmi,
    import_amdsmi,
    open_amdsmi_device,
)

__all__ = ["RocmDevice", "resolve_rocm_index", "is_hip_build", "KFD_PATH"]

KFD_PATH = "/dev/kfd"  # the ROCm compute device file: every HIP process opens it


def is_hip_build() -> bool:
    """True when the installed PyTorch is a ROCm (HIP) build."""
    import torch

    return bool(getattr(torch.version, "hip", None))


def _device_file_state(path: str) -> str:
    """"missing", "denied" or "ok" for a device file this user must open read-write."""
    if not os.path.exists(path):
        return "missing"
    return "ok" if os.access(path, os.R_OK | os.W_OK) else "denied"


def _no_gpu_message(spec: str, hip: str) -> str:
    state = _device_file_state(KFD_PATH)
    if state == "missing":
        return (f"--device {spec}: PyTorch (ROCm {hip}) sees no AMD GPU, and {KFD_PATH} does not exist: the amdgpu "
                "kernel driver is not loaded, or this machine has no AMD GPU. Check `amd-smi list` or `rocminfo`; in a "
                "container, start it with `--device /dev/kfd --device /dev/dri`. Without an AMD GPU use --device cpu.")
    if state == "denied":
        return (f"--device {spec}: PyTorch (ROCm {hip}) sees no AMD GPU because this user cannot open {KFD_PATH} "
                "(permission denied). Add the user to the render and video groups (`sudo usermod -aG render,video "
                "$USER`, then log in again), or in a container add `--group-add video --group-add render`.")
    hidden = {k: os.environ[k] for k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
              if k in os.environ}
    shown = ", ".join(f"{k}={v!r}" for k, v in hidden.items()) or "none of them is set"
    return (f"--device {spec}: PyTorch (ROCm {hip}) sees no AMD GPU although {KFD_PATH} is usable. Check "
            f"HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES ({shown}), and that this PyTorch "
            "build supports the GPU's architecture (`rocminfo | grep gfx`).")


def resolve_rocm_index(spec: str, rest: str) -> int:
    """The torch device index for `rest` ("" = 0, "N", or a PCI bus id), with a message a user can act on."""
    import torch

    hip = getattr(torch.version, "hip", None)
    if not hip:
        build = "a CPU-only build" if torch.version.cuda is None else f"a CUDA {torch.version.cuda} build"
        raise DeviceError(
            f"--device {spec} asks for an AMD GPU through ROCm, but this PyTorch ({torch.__version__}, {build}) is "
            "not a ROCm build. Install PyTorch for ROCm (pytorch.org lists the `--index-url .../whl/rocmX.Y` "
            "command), or use --device cuda:N on an NVIDIA GPU or --device cpu."
        )
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise DeviceError(_no_gpu_message(spec, hip))
    return select_index(spec, rest, count=count, noun="AMD GPUs visible to PyTorch", what="AMD GPU",
                        hint="`amd-smi list` shows every GPU's BDF.")


class RocmDevice(TorchStreamTiming):
    """One AMD GPU, chosen by index; its PCI bus id is what identifies it in amdsmi and in the results.

    `amdsmi` injects a stand-in for the amdsmi module (tests). Identity extras (driver, power cap, max
    clock) come from amdsmi when it works and are recorded as unknown otherwise.

    >>> dev = RocmDevice("rocm:0", 0)  # doctest: +SKIP
    >>> dev.identity().name, dev.default_telemetry()  # doctest: +SKIP
    ('AMD Instinct MI355X', 'amdsmi')
    """

    kind = "rocm"
    supports_graphs = True  # HIP graphs, through torch.cuda.CUDAGraph on the HIP build

    def __init__(self, spec: str, index: int, *, amdsmi=None) -> None:
        self.spec = spec
        self.index = index
        self._amdsmi = amdsmi
        self._hip_pci = cuda_pci_bus_id(index)  # hipDeviceProp_t carries the same PCI fields as CUDA's, no function
        self._partition_pci: str | None = None  # None: not asked yet, or amdsmi could not be used
        self._partition_asked = False

    @property
    def _pci(self) -> str | None:
        """The PCI bus id amdsmi knows this device by: in a partition mode (DPX/CPX) the function is the
        partition id, which HIP does not report. Asked of amdsmi once; without amdsmi, HIP's `.0` form."""
        if not self._partition_asked and self._hip_pci is not None:
            import torch

            uuid = getattr(torch.cuda.get_device_properties(self.index), "uuid", None)
            try:
                self._partition_pci = amdsmi_partition_bdf(self._hip_pci, hip_index=self.index,
                                                           hip_uuid=None if uuid is None else str(uuid), amdsmi=self._amdsmi)
            except DeviceError as exc:
                raise DeviceError(f"--device {self.spec}: {exc}") from None
            except HarnessError:
                pass  # amdsmi unusable: telemetry and the busy check say why when they open it
            self._partition_asked = True
        return self._partition_pci or self._hip_pci

    @property
    def torch_device(self):
        import torch

        return torch.device("cuda", self.index)  # the HIP build's name for its GPUs

    @property
    def pci_bus_id(self) -> str | None:
        return self._pci

    def identity(self) -> DeviceIdentity:
        import torch

        def arch(props):  # "gfx950:sramecc+:xnack-" -> "gfx950"
            name = getattr(props, "gcnArchName", None)
            return name.split(":")[0] if name else None

        return self._torch_identity(kind="rocm", runtime=f"hip {torch.version.hip}", compute_capability=arch,
                                    **self._amdsmi_identity())

    def _amdsmi_identity(self) -> dict:
        """Driver, power cap and max GFX clock from amdsmi; without it they are recorded as unknown."""
        try:
            amd, _ = import_amdsmi(self._amdsmi)
            handle, _ = open_amdsmi_device(amd, self._pci)
        except HarnessError:
            return {}
        out: dict = {}
        try:
            for key, fn in (
                ("driver", lambda: amd.amdsmi_get_gpu_driver_info(handle)["driver_version"]),
                # power_cap is in microwatts (amd-smi); a value under 1e5 can only be watts
                ("power_limit_w", lambda: _watts(amd.amdsmi_get_power_cap_info(handle)["power_cap"])),
                ("max_sm_clock_mhz", lambda: as_number(
                    amd.amdsmi_get_clock_info(handle, amd.AmdSmiClkType.GFX)["max_clk"])),
            ):
                try:
                    value = fn()
                except Exception:
                    continue
                if value is not None and value != "N/A":
                    out[key] = float(value) if key != "driver" else str(value)
        finally:
            close_amdsmi(amd)
        return out

    def other_processes(self) -> list[ProcessInfo]:
        me = os.getpid()  # amdsmi lists this process too once it has opened the GPU
        return [ProcessInfo(pid, mem, name) for pid, mem, name in amdsmi_gpu_processes(self._pci, amdsmi=self._amdsmi)
                if pid != me]

    def default_telemetry(self) -> str:
        return "amdsmi"


def _watts(value) -> float | None:
    number = as_number(value)
    if number is None or number <= 0:
        return None
    return number / 1e6 if number >= 1e5 else float(number)
