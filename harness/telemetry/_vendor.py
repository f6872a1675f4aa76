"""What the two GPU backends, NVML and amdsmi, share: PCI bus ids, finding one among the GPUs a vendor
library lists, the wording of the errors both can raise, and the open / probe / close lifecycle of their
samplers. Nothing here imports a vendor library.

>>> normalize_pci_bus_id("0000:1b:00.0")
'00000000:1B:00.0'
"""

from __future__ import annotations

import re
from typing import Any

from harness.errors import TelemetryError

__all__ = ["ALTERNATIVES", "normalize_pci_bus_id", "find_bus_id", "device_files_error", "VendorSampler"]

ALTERNATIVES = "or choose another telemetry backend (--telemetry host, or --telemetry none)"


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


def find_bus_id(found: list[tuple[str, Any]], notes: list[str], *, wanted: str, asked: str, library: str,
                ignores: str, listing: str) -> tuple[Any, str]:
    """(handle, bus id) of the GPU listed as `wanted` among `found` (normalised id, handle).

    GPUs are matched by enumerating the library's own list rather than asking it for one id, so the
    error can say which ids exist (`notes`: one per GPU the library listed but would not open).
    """
    for bus_id, handle in found:
        if bus_id == wanted:
            return handle, bus_id
    seen = ", ".join(b for b, _ in found) or "none"
    extra = f" ({'; '.join(notes)})" if notes else ""
    raise TelemetryError(
        f"{library} sees no GPU with PCI bus id {wanted} (asked for {asked!r}). The PCI ids {library} sees are: "
        f"{seen}{extra}. {library} ignores {ignores}, so this is every GPU the machine exposes: check the --device "
        f"argument against `{listing}`."
    )


def device_files_error(library: str, refused: str, files: str) -> TelemetryError:
    """The library refused access (`refused`: when, and its error): this user cannot open the device files."""
    return TelemetryError(
        f"{library} refused access {refused}. This user cannot open the GPU's device files: {files}; {ALTERNATIVES}."
    )


class VendorSampler:
    """The lifecycle of a sampler over a vendor library's device handle (`NvmlSampler`, `AmdsmiSampler`).

    `open()` connects (`_connect`: import the library, open the GPU, set `_handle`; returns the normalised
    bus id), then learns what this GPU reports (`_probe_all`). A probe that fails closes again, so a
    failed open leaves the library as it found it. `close()` keeps `describe()`'s answer readable after the
    handle is gone, then `_disconnect()`s. Both are idempotent.
    """

    pci_bus_id: str
    _handle: Any
    _caps: dict[str, str]

    def open(self) -> None:
        if self._handle is not None:
            return
        bus_id = self._connect()
        try:
            self._probe_all()
        except BaseException:
            self.close()
            raise
        self.pci_bus_id = bus_id

    def close(self) -> None:
        if self._handle is None:
            return
        self._caps = self.describe()  # what this GPU reported stays readable after close
        try:
            self._disconnect()
        finally:
            self._handle = None

    def _connect(self) -> str:
        raise NotImplementedError

    def _probe_all(self) -> None:
        raise NotImplementedError

    def _disconnect(self) -> None:
        raise NotImplementedError
