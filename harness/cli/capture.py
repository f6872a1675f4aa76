"""`bench capture` and `bench inputs synth`: parse, call harness.capture, render."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from harness.capture import capture, capture_progress, format_listing, list_captures, save_like
from harness.cli.common_args import console, fail, split_list
from harness.errors import HarnessError
from harness.suite import (
    CAPTURE_DEVICE,
    CAPTURE_SEQ_LEN,
    CAPTURE_WINDOWS,
    CAPTURES_ROOT,
    DEFAULT_CONTROLS,
    DEFAULT_SEED,
    DEFAULT_TEXT,
    capture_config,
)

__all__ = ["capture_cmd", "inputs_synth"]


def capture_cmd(
    model: Optional[str] = typer.Option(None, help="registered model name, a local HF folder or a .gguf file "
                                                   "(default: the registry's default, see `bench list models`)"),
    layers: Optional[List[str]] = typer.Option(None, "--layers", "--layer", callback=split_list,
                                               help="layer indices, comma-separated or repeated (--layers 3,15 or "
                                                    "--layers 3 --layers 15; default: an early and a middle one)"),
    seq_len: Optional[int] = typer.Option(None, help=f"tokens of text per captured window (default {CAPTURE_SEQ_LEN})"),
    windows: Optional[int] = typer.Option(None, help=f"consecutive text windows stacked along the batch (default "
                                                     f"{CAPTURE_WINDOWS})"),
    decode_steps: Optional[int] = typer.Option(None, help="the last N of the --seq-len tokens decoded greedily, one "
                                                          "forward pass each with the model's KV cache; q holds those "
                                                          "N steps (S_q = N, S_kv = --seq-len; default 0, a prefill)"),
    text: Optional[str] = typer.Option(None, help=f"{DEFAULT_TEXT} (default), wikitext2:PATH or a text file"),
    weights: Optional[Path] = typer.Option(None, help="model weights (folder or GGUF file)"),
    root: Optional[Path] = typer.Option(None, "--captures", help=f"captures root directory (default {CAPTURES_ROOT})"),
    dtype: Optional[str] = typer.Option(None, help="dtype of the forward pass (default bf16 on a GPU, fp32 on the CPU; "
                                                  "saved as bf16)"),
    device: Optional[str] = typer.Option(None, help=f"device of the forward pass (cpu, cuda:N; default "
                                                    f"{CAPTURE_DEVICE})"),
    random_weights: bool = typer.Option(False, help="the registered architecture with seeded random weights (no "
                                                    "download; labelled, refused as timing input)"),
    seed: int = typer.Option(DEFAULT_SEED, help="seed of --random-weights"),
    recapture: bool = typer.Option(False, help="replace layer files that fail their checksum"),
    list_: bool = typer.Option(False, "--list", help="list the captures under --captures and verify each file"),
) -> None:
    """Capture the post-RoPE q, k, v a model's attention receives, verified against the model's output."""
    out = console()
    try:
        if list_:
            infos = list_captures(CAPTURES_ROOT if root is None else root, verify=True)
            typer.echo(format_listing(infos), nl=False)
            if any(i.status != "ok" for i in infos):
                raise typer.Exit(2)
            return
        config = capture_config(model=model, layers=",".join(layers) if layers else None, seq_len=seq_len,
                                windows=windows, decode_steps=decode_steps, text=text, weights=weights, root=root,
                                dtype=dtype, device=device, random_weights=random_weights, seed=seed,
                                recapture=recapture)
        with capture_progress(out) as progress:
            result = capture(config, progress=progress, on_estimate=lambda e: out.print(e.describe(), highlight=False))
    except HarnessError as exc:
        fail(exc)
    for layer in result.layers:
        st = layer.stats
        out.print(
            f"layer {layer.layer:2d}: {layer.path}  self-check max |diff| {layer.self_check_max_abs_diff:.3g} "
            f"(tolerance {layer.tolerance:.3g})  q std {st.q_std:.3g}  k std {st.k_std:.3g}  logit std "
            f"{st.logit_std:.3g}  sink mass {st.sink_mass:.3g}"
        )
    out.print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings_s.items()))


def inputs_synth(
    like: Path = typer.Option(..., help="a capture layer file"),
    dist: str = typer.Option(DEFAULT_CONTROLS[0], help="gaussian:STD, gaussian:matched, zeros, constant:C, randbits"),
    seed: int = typer.Option(DEFAULT_SEED, help="seed of the control's values"),
) -> None:
    """Write a control with the shapes and dtype of a capture."""
    try:
        path = save_like(like, dist=dist, seed=seed)
    except HarnessError as exc:
        fail(exc)
    console().print(f"wrote {path}")
