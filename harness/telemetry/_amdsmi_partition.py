"""Which amdsmi GPU a HIP device is when the GPU is split into compute partitions (DPX, CPX).

Kept apart from the amdsmi plumbing in `_amdsmi_device`: it is used only by the ROCm device, once per
device, to learn the PCI bus id (with the partition's function) that telemetry and the busy check open.
"""

from __future__ import annotations

import os
from typing import Any

from harness.errors import DeviceError, TelemetryError
from harness.telemetry._amdsmi_device import amdsmi_error_text, close_amdsmi, import_amdsmi, init_amdsmi
from harness.telemetry._amdsmi_values import as_number
from harness.telemetry._vendor import normalize_pci_bus_id

__all__ = ["amdsmi_partition_bdf"]


def _uuid_key(value: Any) -> str | None:
    text = str(value or "").strip().lower()
    text = text.removeprefix("gpu-")
    text = text.replace("-", "")
    return text if text and text != "n/a" and set(text) != {"0"} else None


_VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def amdsmi_partition_bdf(pci_bus_id: str, *, hip_index: int, hip_uuid: str | None = None, amdsmi: Any = None) -> str:
    """amdsmi's PCI bus id for HIP device `hip_index`, whose PCI location (from HIP) is `pci_bus_id`.

    HIP reports domain, bus and device but no function, so `pci_bus_id` ends in `.0`. In a compute
    partition mode (DPX, CPX) one GPU is several HIP devices, and amdsmi puts each partition's id in the
    BDF function (ROCm amdsmi src/amd_smi/amd_smi_drm.cc), so `.0` is partition 0 whatever the device.
    When several amdsmi GPUs share the location, the partition is chosen by the HIP UUID
    (`amdsmi_get_gpu_enumeration_info()['hip_uuid']` against torch's `uuid`), else by its `hip_id`
    when no *_VISIBLE_DEVICES variable renumbers HIP's devices. Raises TelemetryError when amdsmi
    cannot be used, DeviceError when the partition cannot be told.

    >>> amdsmi_partition_bdf("0000:c1:00.0", hip_index=3)  # doctest: +SKIP
    '00000000:C1:00.3'
    """
    wanted = normalize_pci_bus_id(pci_bus_id)
    module, _ = import_amdsmi(amdsmi)
    init_amdsmi(module)
    try:
        try:
            handles = list(module.amdsmi_get_processor_handles())
        except module.AmdSmiException as e:
            raise TelemetryError(f"amdsmi could not list GPUs: {amdsmi_error_text(e)}") from None
        same = []
        for handle in handles:
            try:
                bdf = normalize_pci_bus_id(module.amdsmi_get_gpu_device_bdf(handle))
            except module.AmdSmiException:
                continue
            if bdf.rsplit(".", 1)[0] == wanted.rsplit(".", 1)[0]:
                same.append((bdf, handle))
        if len(same) <= 1:
            return same[0][0] if same else wanted  # one GPU, one function; none: opening explains it
        info = {}
        for bdf, handle in same:
            try:
                info[bdf] = module.amdsmi_get_gpu_enumeration_info(handle)
            except Exception:  # noqa: BLE001 - older amdsmi lacks the function; say so below
                info[bdf] = {}
        key = _uuid_key(hip_uuid)
        by_uuid = [b for b, e in info.items() if key is not None and _uuid_key(e.get("hip_uuid")) == key]
        if len(by_uuid) == 1:
            return by_uuid[0]
        renumbered = [v for v in _VISIBILITY_VARS if v in os.environ]
        by_id = [b for b, e in info.items() if as_number(e.get("hip_id")) == hip_index]
        if not renumbered and len(by_id) == 1:
            return by_id[0]
        raise DeviceError(
            f"GPU {wanted.rsplit('.', 1)[0]} is split into {len(same)} compute partitions ({', '.join(b for b, _ in same)}), "
            f"and amdsmi cannot say which one is HIP device {hip_index}: its enumeration info gave no matching hip_uuid"
            + (f", and {', '.join(renumbered)} renumbers HIP's devices, so hip_id cannot be used" if renumbered else
               " or hip_id") + f". Unset {', '.join(renumbered) or 'the *_VISIBLE_DEVICES variables'} so that amdsmi's "
            "hip_id matches PyTorch's index, and use an amdsmi that has amdsmi_get_gpu_enumeration_info (7.0.2 does); "
            "`amd-smi list` shows each partition's BDF and HIP id."
        )
    finally:
        close_amdsmi(module)
