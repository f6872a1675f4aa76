"""A tiny capture in the capture format, written without a model (transformers is not needed)."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_tiny_capture(root: Path, *, layer: int = 3, seq_len: int = 64) -> Path:
    """captures/tiny/text-S<seq>/layerNN.safetensors with its manifest: heavy-tailed q, k like real activations."""
    import torch

    from harness.capture._format import FORMAT, FORMAT_VERSION, STORED_DTYPE, write_layer, write_manifest

    g = torch.Generator().manual_seed(7)
    shapes = {"q": (1, 4, seq_len, 32), "k": (1, 2, seq_len, 32), "v": (1, 2, seq_len, 32)}
    tensors = {n: torch.randn(s, generator=g) * (3.0 if n != "v" else 0.5) for n, s in shapes.items()}
    tensors["k"][:, :, 0] *= 8  # an attention sink, as captured layers have
    directory = root / "tiny" / f"text-S{seq_len}"
    directory.mkdir(parents=True)
    written = write_layer(directory, layer, tensors, metadata={"format": FORMAT, "kind": "capture"})
    write_manifest(directory, {
        "format": FORMAT, "version": FORMAT_VERSION, "kind": "capture", "model": {"name": "tiny"},
        "text": {"name": "text"}, "seq_len": seq_len, "batch": 1, "stored_dtype": STORED_DTYPE,
        "layers": {str(layer): {**written, "layer": layer, "scale": 32 ** -0.5, "causal": True, "self_check": None,
                                "stats": {}}},
    })
    return directory / written["file"]


@pytest.fixture
def tiny_capture(tmp_path) -> Path:
    return write_tiny_capture(tmp_path / "captures")
