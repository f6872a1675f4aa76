"""The `bench` command: one module per command family, each command parsing its options, building a
frozen config through `harness.suite`, calling one library function and rendering what it returns.

| module | commands |
|---|---|
| `sustained` | `bench sustained` (and `--gpus` through `multigpu`) |
| `capture` | `bench capture`, `bench inputs synth` |
| `kernels` | `bench error`, `bench repro` |
| `analysis` | `bench compare`, `bench report`, `bench burst` |
| `commits` | `bench commits`, `bench nightly` |
| `profiling` | `bench trace`, `bench peaks` |
| `multigpu` | `bench slurm`, `bench merge` |
| `listing` | `bench doctor`, `bench list ...` |

Options shared by several commands are declared once in `common_args`.
"""

from __future__ import annotations

import typer

from harness.cli import analysis, capture, commits, kernels, listing, multigpu, profiling, sustained

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sustained-clock benchmarks of GPU attention kernels.")
_list = typer.Typer(no_args_is_help=True, help="List kernels, models, telemetry backends and input sources.")
_inputs = typer.Typer(no_args_is_help=True, help="Make inputs: controls shaped like a capture.")
app.add_typer(_list, name="list")
app.add_typer(_inputs, name="inputs")

for _name, _fn in (
    ("sustained", sustained.sustained),
    ("capture", capture.capture_cmd),
    ("doctor", listing.doctor),
    ("compare", analysis.compare),
    ("report", analysis.report),
    ("burst", analysis.burst),
    ("commits", commits.commits),
    ("nightly", commits.nightly),
    ("trace", profiling.trace),
    ("peaks", profiling.peaks),
    ("slurm", multigpu.slurm),
    ("merge", multigpu.merge),
    ("error", kernels.error),
    ("repro", kernels.repro),
):
    app.command(_name)(_fn)
_inputs.command("synth")(capture.inputs_synth)
for _name, _fn in (("models", listing.list_models), ("kernels", listing.list_kernels),
                   ("inputs", listing.list_inputs), ("telemetry", listing.list_telemetry)):
    _list.command(_name)(_fn)


def main() -> None:
    import os

    # amdsmi caches GPU metrics for a while unless told not to, and PyTorch's ROCm build loads amdsmi
    # when torch is imported: set it before anything imports torch. No effect on other machines.
    os.environ.setdefault("AMDSMI_GPU_METRICS_CACHE_MS", "0")
    app()
