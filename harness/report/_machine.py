"""`bench doctor --json` and `bench list ... --json`: what this machine can measure, as data for a CI preflight.

One document, `machine.schema.json` beside this module (versioned by `MACHINE_SCHEMA_VERSION`): `schema`,
`schema_version`, `harness_version`, `command` (`doctor`, `list kernels`, ...), `device` (the one checked, or
null), `device_missing` (doctor: why the named device cannot be used, else null), `exit_code` and `items` (doctor:
its checks; list: its rows).

>>> doc = machine_document("doctor", [{"name": "torch", "status": "ok", "detail": "2.13"}], device="cpu")
>>> doc["schema"], doc["exit_code"], doc["device_missing"]
('harness.machine', 0, None)
"""

from __future__ import annotations

from pathlib import Path

from harness import __version__

__all__ = ["MACHINE_SCHEMA", "MACHINE_SCHEMA_VERSION", "machine_document"]

MACHINE_SCHEMA_VERSION = 1
MACHINE_SCHEMA = Path(__file__).with_name("machine.schema.json")


def machine_document(command: str, items: list[dict], *, device: str | None = None, device_missing: str | None = None,
                     exit_code: int = 0) -> dict:
    """The JSON document of `machine.schema.json` (see the module docstring)."""
    return {"schema": "harness.machine", "schema_version": MACHINE_SCHEMA_VERSION, "harness_version": __version__,
            "command": command, "device": device, "device_missing": device_missing, "exit_code": int(exit_code),
            "items": list(items)}
