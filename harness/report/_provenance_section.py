"""Provenance as tables a reader can scan: the run, each GPU, the software, telemetry and the protocol,
one key per row (never a raw dict or one comma-joined line of forty settings)."""

from __future__ import annotations

import json

from harness.report._blocks import ReportTable, Section
from harness.report._markdown import _provenance

__all__ = ["provenance_section"]

_SPLIT = ("software", "telemetry", "protocol")


def _j(info: dict, key: str):
    try:
        return json.loads(info.get(key) or "null")
    except ValueError:
        return None


def _cell(v) -> str:
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_cell(x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(_cell(x) for x in v) or "none"
    return str(v)


def _kv(title: str, d, *, key: str = "setting") -> ReportTable | None:
    if not isinstance(d, dict) or not d:
        return None
    return ReportTable(title=title, columns=(key, "value"), rows=tuple((str(k), _cell(v)) for k, v in sorted(d.items())),
                       left=2)


def provenance_section(info: dict) -> Section:
    base = _provenance(info)
    rows = tuple(r for r in base.rows if r[0] not in _SPLIT)
    if info.get("allow_busy"):
        busy = _j(info, "busy_processes_json") or []
        rows = tuple(r if r[0] != "other processes" else (r[0], "allowed (--allow-busy): " + _cell(busy)) for r in rows)
    tables = [ReportTable(title="Run", columns=("what", "value"), rows=rows, left=2)]
    ids = [x for x in str(info.get("pci_bus_id") or "").split(",") if x]
    if len(ids) > 1:
        tables.append(ReportTable(title="GPUs", columns=("GPU", "PCI bus id"),
                                  rows=tuple((str(i), x) for i, x in enumerate(ids)), left=2))
    for title, key, col in (("Software", "versions_json", "package"), ("Telemetry: what answered", "telemetry_json",
                                                                      "reading"), ("Protocol", "protocol_json", "setting")):
        t = _kv(title, _j(info, key), key=col)
        if t is not None:
            tables.append(t)
    return Section(title="Provenance", tables=tuple(tables))
