from __future__ import annotations

import os

from harness.devices._base import DeviceIdentity, ProcessInfo
from harness.devices._events import TorchStreamTiming
from harness.errors import DeviceError
from harness.telemetry import normalize_pci_bus_id, nvml_compute_processes

__all__ = ["CudaDevice", "cuda_pci_bus_id", "resolve_cuda_index", "select_index"]


def cuda_pci_bus_id(index: int) -> str | None:
    import torch

    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return normalize_pci_bus_id(f"{props.pci_domain_id:x}:{bus:x}:{props.pci_device_id:x}.0")


class CudaDevice(TorchStreamTiming):
    """One CUDA GPU, chosen by index; its PCI bus id is what identifies it in NVML and in the results."""

    kind = "cuda"
    supports_graphs = True

    def __init__(self, spec: str, index: int, *, nvml=None) -> None:
        self.spec = spec
        self.index = index
        self._nvml = nvml
        self._pci = cuda_pci_bus_id(index)

    @property
    def torch_device(self):
        import torch

        return torch.device("cuda", self.index)

    @property
    def pci_bus_id(self) -> str | None:
        return self._pci

    def identity(self) -> DeviceIdentity:
        import torch

        return self._torch_identity(kind="cuda", runtime=f"cuda {torch.version.cuda}",
                                    compute_capability=lambda p: f"{p.major}.{p.minor}", **self._nvml_identity())

    def _nvml_identity(self) -> dict:
        """Driver, power limit, max clock and the rest of the fingerprint (serial, VBIOS, ECC, MIG, clock policy)
        come from NVML, read only; without it, or where a call is not supported, they are recorded as unknown."""
        nvml = self._nvml
        try:
            if nvml is None:
                import pynvml as nvml
            nvml.nvmlInit()
        except Exception:
            return {}
        out: dict = {}
        try:
            h = nvml.nvmlDeviceGetHandleByPciBusId(self._pci) if self._pci else nvml.nvmlDeviceGetHandleByIndex(self.index)
            for key, fn in (
                ("driver", lambda: nvml.nvmlSystemGetDriverVersion()),
                ("power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
                ("max_sm_clock_mhz", lambda: float(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))),
                ("serial", lambda: nvml.nvmlDeviceGetSerial(h)),
                ("vbios", lambda: nvml.nvmlDeviceGetVbiosVersion(h)),
                ("ecc", lambda: _mode(nvml.nvmlDeviceGetEccMode(h))),
                ("mig", lambda: _mode(nvml.nvmlDeviceGetMigMode(h))),
                ("clock_policy", lambda: _clock_policy(nvml, h)),
            ):
                try:
                    value = fn()
                    out[key] = value.decode() if isinstance(value, bytes) else value
                except Exception:
                    pass
        finally:
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass
        return out

    def other_processes(self) -> list[ProcessInfo]:
        me = os.getpid()
        return [ProcessInfo(pid, mem) for pid, mem in nvml_compute_processes(self._pci, nvml=self._nvml) if pid != me]

    def default_telemetry(self) -> str:
        return "nvml"


def _mode(pair) -> str:
    """NVML's (current, pending) mode pair as text: "on", "off", or "on, off pending" when a change awaits a reset."""
    current, pending = (pair if isinstance(pair, (tuple, list)) else (pair, pair))[:2]
    text = "on" if current else "off"
    return text if bool(pending) == bool(current) else f"{text}, {'on' if pending else 'off'} pending"


def _clock_policy(nvml, h) -> str:
    """"default" when the SM and memory application clocks are their defaults (the automatic policy the protocol
    times under), else the clocks that differ: a changed policy is a machine event in the history."""
    differ = []
    for name, kind in (("SM", nvml.NVML_CLOCK_SM), ("memory", nvml.NVML_CLOCK_MEM)):
        now, default = nvml.nvmlDeviceGetApplicationsClock(h, kind), nvml.nvmlDeviceGetDefaultApplicationsClock(h, kind)
        if now != default:
            differ.append(f"{name} application clock {now} MHz (default {default})")
    return "; ".join(differ) or "default"


def resolve_cuda_index(spec: str, rest: str) -> int:
    import torch

    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"a CUDA {torch.version.cuda} build"
        raise DeviceError(
            f"--device {spec} asks for a CUDA GPU, but PyTorch ({torch.__version__}, {build}) sees none. "
            f"Run on a machine with an NVIDIA GPU and a CUDA build of PyTorch, or use --device cpu."
        )
    return select_index(spec, rest, count=torch.cuda.device_count(), noun="CUDA devices")


def select_index(spec: str, rest: str, *, count: int, noun: str, what: str = "GPU", hint: str = "") -> int:
    """`rest` of `--device kind:rest` as a torch index: "" is 0, "N" an index, anything else a PCI bus id."""
    if rest == "":
        return 0
    if rest.isdigit():
        index = int(rest)
        if index >= count:
            raise DeviceError(f"--device {spec}: there are {count} {noun} (0..{count - 1}).")
        return index
    wanted = normalize_pci_bus_id(rest)
    present = {cuda_pci_bus_id(i): i for i in range(count)}
    if wanted in present:
        return present[wanted]
    raise DeviceError(
        f"--device {spec}: no {what} with PCI bus id {wanted}. Present: {', '.join(str(p) for p in present) or 'none'}."
        + (f" {hint}" if hint else "")
    )
