"""What every `bench` command module shares: the console, the one-paragraph error exit, the command line, and
the options and input resolution of the commands that take a suite (`sustained`, `error`, `repro`).

The options are `typer.Option` objects used as defaults in several signatures, so the three commands
cannot drift apart in a flag's name, default or help."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["console", "fail", "command_line", "input_specs", "SUITE_OPTIONS"]

# The kernels and inputs of a suite, as `bench sustained`, `bench error` and `bench repro` take them.
SUITE_OPTIONS = dict(
    kernel=typer.Option([], "--kernel", "-k", help="kernel name or module:function (repeatable)"),
    input_=typer.Option(["gaussian:0.1", "gaussian:1"], "--input", "-i", help="input source (repeatable)"),
    batch=typer.Option(1, help="B"),
    heads=typer.Option(32, help="Hq"),
    heads_kv=typer.Option(None, help="Hkv (default: Hq)"),
    seq_len=typer.Option(None, help="S (default 16384; with --model 8192 on a GPU, 1024 on the CPU)"),
    head_dim=typer.Option(128, help="dqk"),
    head_dim_v=typer.Option(None, help="dv (default: dqk)"),
    dtype=typer.Option("bf16"),
    causal=typer.Option(True, "--causal/--no-causal"),
    seed=typer.Option(0),
    device=typer.Option("cuda:0", help="cpu, cuda:N, rocm:N, or cuda:/rocm:<PCI bus id>"),
    model=typer.Option(None, help="captured activations of this model (see `bench list models`)"),
    layer=typer.Option([], "--layer", help="captured layer (repeatable; default: an early and a middle one)"),
    control=typer.Option(["gaussian:0.1"], "--control", help="control input of the capture's shape (repeatable)"),
    text=typer.Option("pydoc", help="text for captures: pydoc, wikitext2:PATH or a file"),
    weights=typer.Option(None, help="model weights (folder or GGUF file)"),
    captures=typer.Option(Path("captures"), help="captures root directory"),
)


def console():
    from rich.console import Console

    return Console()


def fail(exc) -> None:
    """Print a HarnessError's paragraph and exit 2: bad input, never a traceback."""
    console().print(f"[bold red]error:[/] {exc}", highlight=False)
    raise typer.Exit(2)


def command_line() -> str:
    """The command as typed, for the run row's provenance."""
    return " ".join(shlex.quote(a) for a in ["bench", *sys.argv[1:]])


def input_specs(console, *, input_: List[str], batch: int, heads: int, heads_kv: Optional[int], seq_len: Optional[int],
                head_dim: int, head_dim_v: Optional[int], dtype: str, causal: bool, seed: int, device: str,
                model: Optional[str], layer: List[int], control: List[str], text: str, weights: Optional[Path],
                captures: Path) -> tuple:
    """The suite's InputSpecs: a model's captures and their controls (captured first if missing, with
    progress), else the synthetic sources at the shape the options give."""
    from harness.inputs import AttentionShape, InputSpec

    if model:
        from harness.capture import capture_progress, model_input_specs

        with capture_progress(console) as progress:
            return model_input_specs(
                model, layers=tuple(layer), seq_len=seq_len or (1024 if device == "cpu" else 8192), text=text,
                weights=weights, root=captures, controls=tuple(control), dtype=dtype, seed=seed, progress=progress,
            )
    shape = AttentionShape(batch=batch, heads_q=heads, heads_kv=heads_kv or heads, seq_len=seq_len or 16384,
                           head_dim_qk=head_dim, head_dim_v=head_dim_v, causal=causal)
    return tuple(InputSpec(shape=shape, dtype=dtype, source=s, seed=seed) for s in input_)
