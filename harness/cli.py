"""The `bench` command: parse, build a frozen config, call the library, render. No logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness._cli_common import SUITE_OPTIONS as _OPT, command_line as _command, console as _console, fail as _fail
from harness._cli_common import input_specs as _input_specs

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sustained-clock benchmarks of GPU attention kernels.")
list_app = typer.Typer(no_args_is_help=True, help="List kernels, models, telemetry backends and input sources.")
app.add_typer(list_app, name="list")
inputs_app = typer.Typer(no_args_is_help=True, help="Make inputs: controls shaped like a capture.")
app.add_typer(inputs_app, name="inputs")


@app.command()
def sustained(
    kernel: List[str] = _OPT["kernel"],
    input_: List[str] = _OPT["input_"],
    batch: int = _OPT["batch"],
    heads: int = _OPT["heads"],
    heads_kv: Optional[int] = _OPT["heads_kv"],
    seq_len: Optional[int] = _OPT["seq_len"],
    head_dim: int = _OPT["head_dim"],
    head_dim_v: Optional[int] = _OPT["head_dim_v"],
    dtype: str = _OPT["dtype"],
    causal: bool = _OPT["causal"],
    seed: int = _OPT["seed"],
    device: str = _OPT["device"],
    telemetry: str = typer.Option("auto", help="auto (the device's own: nvml / amdsmi / host), nvml, amdsmi, host, none"),
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
    launch_timeout_s: Optional[float] = typer.Option(None, help="a kernel's first call or chunk may take this long, then it is stopped as timeout (default 60)"),
    gate: bool = typer.Option(True, "--gate/--no-gate", help="correctness gate before timing"),
    model: Optional[str] = _OPT["model"],
    layer: List[int] = _OPT["layer"],
    control: List[str] = _OPT["control"],
    text: str = _OPT["text"],
    weights: Optional[Path] = _OPT["weights"],
    captures: Path = _OPT["captures"],
    gpus: Optional[str] = typer.Option(None, help="all, indices (0,2) or PCI bus ids: one worker process per GPU (instead of --device)"),
    replicate: bool = typer.Option(False, help="with --gpus: the whole suite on every GPU, to measure the spread between GPUs"),
) -> None:
    """Time kernels back to back until the clock settles, then over a window, with telemetry."""
    from harness.config import RunConfig, SustainedProtocol
    from harness.errors import ConfigError, HarnessError

    console = _console()
    try:
        overrides = {k: v for k, v in dict(
            repeats=repeats, window_s=window_s, warmin_cap_s=warmin_cap_s, idle_before_kernel_s=idle_s, chunk_s=chunk_s,
            sample_period_s=sample_period_ms / 1000 if sample_period_ms else None, probe=probe,
            launch_timeout_s=launch_timeout_s,
        ).items() if v is not None}
        protocol = SustainedProtocol.quick(**overrides) if quick else SustainedProtocol(**overrides)
        inputs = _input_specs(console, input_=input_, batch=batch, heads=heads, heads_kv=heads_kv, seq_len=seq_len,
                              head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype, causal=causal, seed=seed,
                              device=device, model=model, layer=layer, control=control, text=text, weights=weights,
                              captures=captures)
        kernels = tuple(kernel) or _default_kernels(device)
        config = RunConfig(
            kernels=kernels, inputs=inputs,
            device=device, telemetry=telemetry, protocol=protocol, results_dir=results, run_name=name, launch=launch,
            allow_busy=allow_busy, gate=gate,
        )
        if gpus:
            from harness._cli_multigpu import run_multi_and_render

            run_multi_and_render(config, gpus=gpus, replicate=replicate, console=console)
        elif replicate:
            raise ConfigError("--replicate runs the suite on every GPU of --gpus; name them with --gpus.")
        else:
            _run_and_render(config, console)
    except HarnessError as exc:
        _fail(exc)


def _default_kernels(device: str) -> tuple[str, ...]:
    kind = device.partition(":")[0]
    return {"cpu": ("sdpa-cpu",), "rocm": ("sdpa-flash", "sdpa-efficient")}.get(kind, ("sdpa-cudnn", "sdpa-flash"))


def _run_and_render(config, console) -> None:
    from harness.analysis import aggregate_repeats
    from harness.report import LiveView, sustained_tables
    from harness.errors import RunStopped
    from harness.runner import run_sustained

    view = LiveView(console)
    command = _command()
    try:
        result = run_sustained(config, observer=view, command=command)
    except KeyboardInterrupt as exc:
        name, code = (exc.signal_name, 128 + exc.signum) if isinstance(exc, RunStopped) else ("Ctrl-C", 130)
        console.print(f"[yellow]stopped by {name}: finished measurements are kept; the run is marked incomplete.[/]")
        raise typer.Exit(code)
    for table in sustained_tables(aggregate_repeats(result.measurements), title=f"{result.run_id} ({result.status})"):
        console.print(table)
    console.print(f"results: {result.path}")
    if result.nothing_timed:
        console.print(f"[bold red]nothing was timed[/] ({result.untimed_summary()}): every kernel x input failed the "
                      f"gate, errored or timed out; the reasons are above and in the results.", highlight=False)
        raise typer.Exit(1)


@app.command("capture")
def capture_cmd(
    model: str = typer.Option("smollm2-135m", help="registered model name, a local HF folder or a .gguf file"),
    layers: str = typer.Option("3,15", help="comma-separated layer indices"),
    seq_len: int = typer.Option(2048),
    text: str = typer.Option("pydoc", help="pydoc, wikitext2:PATH or a text file"),
    weights: Optional[Path] = typer.Option(None),
    root: Path = typer.Option(Path("captures"), "--captures", help="captures root directory"),
    dtype: str = typer.Option("float32", help="dtype of the forward pass (saved as bf16)"),
    device: str = typer.Option("cpu"),
    list_: bool = typer.Option(False, "--list", help="list existing captures instead"),
) -> None:
    """Capture the post-RoPE q, k, v a model's attention receives, verified against the model's output."""
    from harness.capture import CaptureConfig, capture, capture_progress, list_captures
    from harness.errors import HarnessError

    console = _console()
    try:
        if list_:
            for info in list_captures(root):
                console.print(info)
            return
        config = CaptureConfig(model=model, layers=layers, seq_len=seq_len, text=text, weights=weights, root=root,
                               dtype=dtype, device=device)
        with capture_progress(console) as progress:
            result = capture(config, progress=progress)
    except HarnessError as exc:
        _fail(exc)
    for layer in result.layers:
        st = layer.stats
        console.print(
            f"layer {layer.layer:2d}: {layer.path}  self-check max |diff| {layer.self_check_max_abs_diff:.3g} "
            f"(tolerance {layer.tolerance:.3g})  q std {st.q_std:.3g}  k std {st.k_std:.3g}  logit std "
            f"{st.logit_std:.3g}  sink mass {st.sink_mass:.3g}"
        )
    console.print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings_s.items()))


@inputs_app.command("synth")
def inputs_synth(
    like: Path = typer.Option(..., help="a capture layer file"),
    dist: str = typer.Option("gaussian:0.1", help="gaussian:STD, gaussian:matched, zeros, constant:C, randbits"),
    seed: int = typer.Option(0),
) -> None:
    """Write a control with the shapes and dtype of a capture."""
    from harness.capture import save_like
    from harness.errors import HarnessError

    try:
        path = save_like(like, dist=dist, seed=seed)
    except HarnessError as exc:
        _fail(exc)
    _console().print(f"wrote {path}")


@list_app.command("models")
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
    _console().print(t)


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
        ("amdsmi", "AMD Instinct GPUs through amdsmi: per-XCD clocks, socket power, energy, residency limiters "
                   "(not yet run on AMD hardware)"),
        ("host", "the CPU through Linux sysfs: frequency, RAPL energy, temperature where exposed"),
        ("replay", "plays back a recorded samples file; for tests and offline analysis only"),
        ("none", "no telemetry: times only"),
    ):
        typer.echo(f"{name:8} {text}")


from harness import _cli_analysis  # noqa: E402  (command functions only; nothing heavy at import)

app.command("compare")(_cli_analysis.compare)
app.command("report")(_cli_analysis.report)
app.command("burst")(_cli_analysis.burst)

from harness import _cli_commits  # noqa: E402  (command functions only; nothing heavy at import)

app.command("commits")(_cli_commits.commits)
app.command("nightly")(_cli_commits.nightly)

from harness import _cli_profiling  # noqa: E402  (command functions only; nothing heavy at import)

app.command("trace")(_cli_profiling.trace)
app.command("peaks")(_cli_profiling.peaks)

from harness import _cli_multigpu  # noqa: E402  (command functions only; nothing heavy at import)

app.command("slurm")(_cli_multigpu.slurm)
app.command("merge")(_cli_multigpu.merge)

from harness import _cli_kernels  # noqa: E402  (command functions only; nothing heavy at import)

app.command("error")(_cli_kernels.error)
app.command("repro")(_cli_kernels.repro)


def main() -> None:
    import os

    # amdsmi caches GPU metrics for a while unless told not to, and PyTorch's ROCm build loads amdsmi
    # when torch is imported: set it before anything imports torch. No effect on other machines.
    os.environ.setdefault("AMDSMI_GPU_METRICS_CACHE_MS", "0")
    app()


if __name__ == "__main__":
    main()
