"""The `bench` command: parse, build a frozen config, call the library, render. No logic of its own."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sustained-clock benchmarks of GPU attention kernels.")
list_app = typer.Typer(no_args_is_help=True, help="List kernels, telemetry backends and input sources.")
app.add_typer(list_app, name="list")


def _console():
    from rich.console import Console

    return Console()


def _fail(exc) -> None:
    _console().print(f"[bold red]error:[/] {exc}", highlight=False)
    raise typer.Exit(2)


@app.command()
def sustained(
    kernel: List[str] = typer.Option([], "--kernel", "-k", help="kernel name or module:function (repeatable)"),
    input_: List[str] = typer.Option(["gaussian:0.1", "gaussian:1"], "--input", "-i", help="input source (repeatable)"),
    batch: int = typer.Option(1, help="B"),
    heads: int = typer.Option(32, help="Hq"),
    heads_kv: Optional[int] = typer.Option(None, help="Hkv (default: Hq)"),
    seq_len: int = typer.Option(16384, help="S"),
    head_dim: int = typer.Option(128, help="dqk"),
    head_dim_v: Optional[int] = typer.Option(None, help="dv (default: dqk)"),
    dtype: str = typer.Option("bf16"),
    causal: bool = typer.Option(True, "--causal/--no-causal"),
    seed: int = typer.Option(0),
    device: str = typer.Option("cuda:0", help="cpu, cuda:N or cuda:<PCI bus id>"),
    telemetry: str = typer.Option("auto", help="auto (the device's own: nvml / host), nvml, host, none"),
    results: Path = typer.Option(Path("results"), help="results root directory"),
    name: Optional[str] = typer.Option(None, help="a name for the run id"),
    launch: str = typer.Option("auto", help="auto, graph or loop"),
    allow_busy: bool = typer.Option(False, help="run even if other processes use the GPU (recorded)"),
    quick: bool = typer.Option(False, help="short protocol for dry runs (not sustained figures)"),
    probe: Optional[bool] = typer.Option(None, "--probe/--no-probe", help="in-band clock probe (default on)"),
    repeats: Optional[int] = typer.Option(None),
    window_s: Optional[float] = typer.Option(None),
    warmin_cap_s: Optional[float] = typer.Option(None),
    idle_s: Optional[float] = typer.Option(None, help="idle before each kernel"),
    chunk_s: Optional[float] = typer.Option(None),
    sample_period_ms: Optional[float] = typer.Option(None),
    gate: bool = typer.Option(True, "--gate/--no-gate", help="correctness gate before timing"),
) -> None:
    """Time kernels back to back until the clock settles, then over a window, with telemetry."""
    from harness.config import RunConfig, SustainedProtocol
    from harness.errors import HarnessError
    from harness.inputs import AttentionShape, InputSpec

    console = _console()
    try:
        overrides = {k: v for k, v in dict(
            repeats=repeats, window_s=window_s, warmin_cap_s=warmin_cap_s, idle_before_kernel_s=idle_s, chunk_s=chunk_s,
            sample_period_s=sample_period_ms / 1000 if sample_period_ms else None, probe=probe,
        ).items() if v is not None}
        protocol = SustainedProtocol.quick(**overrides) if quick else SustainedProtocol(**overrides)
        shape = AttentionShape(batch=batch, heads_q=heads, heads_kv=heads_kv or heads, seq_len=seq_len,
                               head_dim_qk=head_dim, head_dim_v=head_dim_v, causal=causal)
        kernels = tuple(kernel) or (("sdpa-cpu",) if device == "cpu" else ("sdpa-cudnn", "sdpa-flash"))
        config = RunConfig(
            kernels=kernels, inputs=tuple(InputSpec(shape=shape, dtype=dtype, source=s, seed=seed) for s in input_),
            device=device, telemetry=telemetry, protocol=protocol, results_dir=results, run_name=name, launch=launch,
            allow_busy=allow_busy, gate=gate,
        )
        _run_and_render(config, console)
    except HarnessError as exc:
        _fail(exc)


def _run_and_render(config, console) -> None:
    from harness.analysis import aggregate_repeats
    from harness.report import LiveView, sustained_tables
    from harness.runner import run_sustained

    view = LiveView(console)
    command = " ".join(shlex.quote(a) for a in ["bench", *sys.argv[1:]])
    try:
        result = run_sustained(config, observer=view, command=command)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: finished measurements are kept; the run is marked incomplete.[/]")
        raise typer.Exit(130)
    for table in sustained_tables(aggregate_repeats(result.measurements), title=f"{result.run_id} ({result.status})"):
        console.print(table)
    console.print(f"results: {result.path}")


@app.command()
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
    _console().print(t)


@list_app.command("kernels")
def list_kernels(device: str = typer.Option("cuda", help="device kind to check availability for")) -> None:
    """Every registered kernel with its availability on this machine."""
    from rich.table import Table

    from harness.kernels import default_registry

    reg = default_registry()
    t = Table(title="kernels", title_justify="left")
    for c in ("name", "dtypes", "head dims", "devices", f"available ({device})", "description"):
        t.add_column(c, overflow="fold")
    for k in reg:
        dims = "any" if k.head_dims is None else ", ".join(f"{a}/{b}" if a != b else str(a) for a, b in sorted(k.head_dims))
        reason = k.unavailable_reason(device.split(":")[0])
        t.add_row(k.name, ", ".join(sorted(k.dtypes)), dims, ", ".join(sorted(k.devices)),
                  "[green]yes[/]" if reason is None else f"[red]no[/]: {reason}", k.description)
    console = _console()
    console.print(t)
    for spec, err in reg.plugin_errors.items():
        console.print(f"[red]plugin {spec} failed to load:[/] {err}")


@list_app.command("inputs")
def list_inputs() -> None:
    """Synthetic input sources (captured activations: see `bench capture`)."""
    from harness.inputs import SYNTHETIC_SOURCES

    for k, v in SYNTHETIC_SOURCES.items():
        typer.echo(f"{k:16} {v}")


@list_app.command("telemetry")
def list_telemetry() -> None:
    """Telemetry backends."""
    for name, text in (
        ("nvml", "NVIDIA GPUs through pynvml (nvidia-ml-py): SM clock, power, energy, temperature, limiters, GPM"),
        ("host", "the CPU through Linux sysfs: frequency, RAPL energy, temperature where exposed"),
        ("replay", "plays back a recorded samples file; for tests and offline analysis only"),
        ("none", "no telemetry: times only"),
    ):
        typer.echo(f"{name:8} {text}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
