"""`bench doctor` and `bench list kernels|models|inputs|telemetry`: what this machine can measure."""

from __future__ import annotations

from typing import Optional

import typer

from pathlib import Path

from harness.cli.common_args import console, fail
from harness.suite import RESULTS_ROOT

__all__ = ["doctor", "list_models", "list_kernels", "list_inputs", "list_runs", "list_telemetry", "TELEMETRY_BACKENDS"]

TELEMETRY_BACKENDS = (
    ("nvml", "NVIDIA GPUs through pynvml (nvidia-ml-py): SM clock, power, energy, temperature, limiters, GPM"),
    ("amdsmi", "AMD Instinct GPUs through amdsmi: per-XCD clocks, socket power, energy, residency limiters "
               "(not yet run on AMD hardware)"),
    ("host", "the CPU through Linux sysfs: frequency, RAPL energy, temperature where exposed"),
    ("replay", "plays back a recorded samples file; for tests and offline analysis only"),
    ("none", "no telemetry: times only"),
)


def list_models() -> None:
    """Models whose attention inputs can be captured."""
    from rich.table import Table

    from harness.capture import MODELS

    t = Table(title="models", title_justify="left")
    for c in ("name", "source", "layers", "Hq/Hkv", "dqk/dv", "max S", "kind"):
        t.add_column(c)
    for m in MODELS.values():
        t.add_row(m.name, m.hf_id or m.wheel or "", str(m.num_layers), f"{m.heads_q}/{m.heads_kv}",
                  f"{m.head_dim_qk}/{m.head_dim_v}", str(m.max_positions), m.attention_kind + (" +qk-norm" if m.qk_norm else ""))
    console().print(t)


def doctor(device: Optional[str] = typer.Option(None, help="device to check (default: cuda:0 if present, else cpu)")) -> None:
    """What this machine can measure, and what is missing."""
    from rich.table import Table

    from harness.doctor import diagnose

    t = Table(title="bench doctor", title_justify="left")
    for c in ("check", "status", "detail"):
        t.add_column(c, overflow="fold")
    colors = {"ok": "green", "missing": "red", "warn": "yellow", "info": "cyan"}
    for c in diagnose(device=device):
        t.add_row(c.name, f"[{colors[c.status]}]{c.status}[/]", c.detail)
    console().print(t)


def list_kernels(device: Optional[str] = typer.Option(None, help="device to check availability on: cpu, cuda, rocm "
                                                                    "(default: this machine's own, cuda:0 if PyTorch "
                                                                    "sees a GPU, else cpu)")) -> None:
    """Every registered kernel with its availability on this machine."""
    from rich.table import Table

    from harness.errors import HarnessError
    from harness.kernels import default_registry
    from harness.suite import device_kind, machine_device

    try:
        kind = device_kind(device or machine_device())
    except HarnessError as exc:
        fail(exc)
    device = kind
    reg = default_registry()
    t = Table(title="kernels", title_justify="left")
    for c in ("name", "dtypes", "head dims", "devices", f"available ({device})", "description"):
        t.add_column(c, overflow="fold")
    for k in reg:
        dims = "any" if k.head_dims is None else ", ".join(f"{a}/{b}" if a != b else str(a) for a, b in sorted(k.head_dims))
        reason = k.unavailable_reason(device.split(":")[0])
        t.add_row(k.name, ", ".join(sorted(k.dtypes)), dims, ", ".join(sorted(k.devices)),
                  "[green]yes[/]" if reason is None else f"[red]no[/]: {reason}", k.description)
    out = console()
    out.print(t)
    for spec, err in reg.plugin_errors.items():
        out.print(f"[red]plugin {spec} failed to load:[/] {err}")


def list_inputs() -> None:
    """Synthetic input sources (captured activations: see `bench capture`)."""
    from harness.inputs import SYNTHETIC_SOURCES

    for k, v in SYNTHETIC_SOURCES.items():
        typer.echo(f"{k:16} {v}")


def list_telemetry() -> None:
    """Telemetry backends."""
    for name, text in TELEMETRY_BACKENDS:
        typer.echo(f"{name:8} {text}")


def list_runs(results: Path = typer.Option(RESULTS_ROOT, help="results root directory")) -> None:
    """The runs under --results with how each ended; a run left `running` by a process that is gone says so."""
    from harness.errors import HarnessError
    from harness.report import ReportTable
    from harness.results import read_rows, run_process_state

    out = console()
    try:
        if not results.is_dir():
            from harness.errors import ResultsError

            raise ResultsError(f"--results {results}: no such folder, so no runs. Name the folder runs were written to.")
        rows = []
        for run in sorted(d for d in results.iterdir() if (d / "runs.parquet").is_file()):
            try:
                info = read_rows(run, "runs")[0]
            except (HarnessError, IndexError) as exc:
                rows.append((run.name, "unreadable", "-", str(exc)))
                continue
            status, detail = info.get("status") or "?", info.get("status_detail") or ""
            if status == "running":
                state, words = run_process_state(run)
                status = {"gone": "running, process gone", "alive": "running"}.get(state, "running?")
                detail = "; ".join(x for x in (detail, words) if x)
            rows.append((run.name, status, (info.get("started_at") or "-")[:19], detail or "-"))
    except HarnessError as exc:
        fail(exc)
    out.print(ReportTable(title=f"runs under {results}", columns=("run", "status", "started (UTC)", "detail"),
                          rows=tuple(rows), left=4, prose_columns=("detail",)).to_rich())
