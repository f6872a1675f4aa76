"""Devices: what a device is, how it is timed, and whether anything else is using it.

`open_device("cuda:0")`, `open_device("cuda:0000:1B:00.0")` (by PCI bus id) or `open_device("cpu")`.
Nothing touches a GPU until `open_device` is called.

>>> from harness.devices import open_device
>>> cpu = open_device("cpu")
>>> cpu.kind, cpu.supports_graphs
('cpu', False)
"""

from harness.devices._base import Device, DeviceIdentity, Mark, ProcessInfo, normalize_pci_bus_id
from harness.devices._cuda import cuda_pci_bus_id
from harness.devices._open import check_idle, open_device

__all__ = [
    "cuda_pci_bus_id",
    "Device",
    "DeviceIdentity",
    "Mark",
    "ProcessInfo",
    "check_idle",
    "normalize_pci_bus_id",
    "open_device",
]
