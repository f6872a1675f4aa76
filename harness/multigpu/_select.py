"""Which GPUs the workers measure: `--gpus all|0,2|PCI-IDS` resolved to slots identified by PCI bus id.

The enumeration is injected (`present=`) so the selection logic is tested with fake GPU lists, and CPU
stand-ins (`cpu_stand_ins`) let the worker processes run on a machine without a GPU. Stand-ins are only
ever used when a caller passes them; nothing falls back to the CPU on its own.

>>> from harness.multigpu import GpuSlot, select_gpus
>>> present = [GpuSlot(index=i, gpu_id=f"00000000:{0x19 + i:02X}:00.0", device=f"cuda:00000000:{0x19 + i:02X}:00.0")
...            for i in range(2)]
>>> [s.gpu_id for s in select_gpus("1", present=present)]
['00000000:1A:00.0']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.devices import cuda_pci_bus_id
from harness.errors import ConfigError, DeviceError, TelemetryError
from harness.telemetry import normalize_pci_bus_id
from harness.workers import child_env

__all__ = [
    "MULTICAST_OFF",
    "GpuSlot",
    "cpu_stand_ins",
    "enumerate_cuda_gpus",
    "parse_gpus",
    "select_gpus",
    "worker_env",
]

# NVLink multicast stays off in every worker: the harness runs no collective at all (each worker times its
# own GPU alone), and a program that does use multicast can take a shared host's GPUs out of service.
MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True, kw_only=True)
class GpuSlot:
    """One GPU a worker measures: how the worker finds it, and the id the results name it by.

    `gpu_id` is the PCI bus id in NVML's form for a real GPU. `visible` maps environment variables
    (CUDA_VISIBLE_DEVICES) to the value that shows the worker this GPU alone. `device` is what the worker
    opens; `cuda:<PCI bus id>` makes the worker check that it was given the GPU it was meant to get.
    `device_factory` ("module:function", called with `device`) replaces `open_device`: tests only.
    """

    index: int
    gpu_id: str
    device: str
    name: str = ""
    visible: dict[str, str] = field(default_factory=dict)
    device_factory: str | None = None

    def __post_init__(self) -> None:
        if "#" in self.gpu_id:  # '#' separates the GPU from the measurement id in merged runs
            raise ConfigError(f"GPU id {self.gpu_id!r} may not contain '#'.")


def cpu_stand_ins(count: int, *, device_factory: str | None = None, busy: Sequence[int] = (),
                  busy_factory: str | None = None) -> list[GpuSlot]:
    """`count` slots whose workers measure the CPU: the worker-process path without a GPU (tests, dry runs).

    Slots in `busy` open `busy_factory` instead of `device_factory` (a device that reports another process).
    """
    return [GpuSlot(index=i, gpu_id=f"cpu{i}", device="cpu", name="CPU stand-in",
                    device_factory=busy_factory if i in busy else device_factory) for i in range(count)]


def enumerate_cuda_gpus() -> list[GpuSlot]:
    """Every GPU PyTorch sees, in its order, with its PCI bus id (from the device properties) and UUID.

    Only device properties are read here; the workers open the GPUs. A worker is shown its GPU by UUID
    (`CUDA_VISIBLE_DEVICES=GPU-<uuid>`): an index would be read in the worker's own enumeration, which a
    CUDA_VISIBLE_DEVICES already set in this process (Slurm sets one) or CUDA_DEVICE_ORDER would shift.
    """
    import torch

    if not torch.cuda.is_available():
        raise DeviceError(
            "--gpus asks for CUDA GPUs, but PyTorch sees none. Run on a machine with NVIDIA GPUs and a CUDA build "
            "of PyTorch, or run one process on the CPU with --device cpu (without --gpus)."
        )
    parent_visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    slots = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        pci = cuda_pci_bus_id(i)
        if pci is None:
            raise DeviceError(f"PyTorch reports no PCI bus id for CUDA device {i}; --gpus identifies GPUs by it.")
        uuid = str(getattr(props, "uuid", "") or "")
        if uuid:
            visible = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        else:  # an older PyTorch: translate through the list this process was given, if any
            visible = parent_visible[i] if i < len(parent_visible) else str(i)
        slots.append(GpuSlot(index=i, gpu_id=pci, device=f"cuda:{pci}", name=props.name,
                             visible={"CUDA_VISIBLE_DEVICES": visible}))
    return slots


def parse_gpus(text: str) -> str | tuple[int | str, ...]:
    """`all`, or a tuple of indices (int) and PCI bus ids (NVML form). A `cuda:` prefix is accepted."""
    text = (text or "").strip()
    if text.lower() == "all":
        return "all"
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    if not tokens:
        raise ConfigError("--gpus is empty. Use all, indices (0,2) or PCI bus ids (0000:19:00.0,0000:3B:00.0).")
    out: list[int | str] = []
    for token in tokens:
        bare = token[5:] if token.lower().startswith("cuda:") else token
        if bare.isdigit():
            out.append(int(bare))
            continue
        try:
            out.append(normalize_pci_bus_id(bare))
        except TelemetryError:
            raise ConfigError(f"--gpus {text}: {token!r} is neither a GPU index nor a PCI bus id (e.g. 0000:19:00.0).") from None
    return tuple(out)


def select_gpus(text: str, *, present: Sequence[GpuSlot]) -> list[GpuSlot]:
    """The slots `--gpus text` names among `present`, in the order given. One worker per GPU."""
    wanted = parse_gpus(text)
    listing = ", ".join(f"{s.index}={s.gpu_id}" for s in present) or "none"
    if not present:
        raise DeviceError(f"--gpus {text}: no GPU is present.")
    if wanted == "all":
        return list(present)
    if len(wanted) > len(present):
        raise DeviceError(
            f"--gpus {text} asks for {len(wanted)} workers, but {len(present)} GPU(s) are present ({listing}). "
            f"One worker runs per GPU: name at most {len(present)}."
        )
    by_pci = {s.gpu_id: s for s in present}
    chosen: list[GpuSlot] = []
    for w in wanted:
        if isinstance(w, int):
            if w >= len(present):
                raise DeviceError(f"--gpus {text}: there is no GPU {w}; {len(present)} are present ({listing}).")
            slot = present[w]
        elif w in by_pci:
            slot = by_pci[w]
        else:
            raise DeviceError(f"--gpus {text}: no GPU has PCI bus id {w}. Present: {listing}.")
        if any(c.gpu_id == slot.gpu_id for c in chosen):
            raise ConfigError(
                f"--gpus {text} names GPU {slot.index} ({slot.gpu_id}) twice. One worker runs per GPU: two workers on "
                f"one GPU would share its clock and power budget and measure each other."
            )
        chosen.append(slot)
    return chosen


def worker_env(slot: GpuSlot, *, base: dict[str, str] | None = None, pythonpath: str | None = None) -> dict[str, str]:
    """The environment of the worker for `slot`: its GPU alone visible, multicast off."""
    env = child_env(base, root=pythonpath) if pythonpath else dict(os.environ if base is None else base)
    env.update(slot.visible)
    env.update(MULTICAST_OFF)
    return env
