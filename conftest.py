"""Suite-wide settings for the CPU test machine (here, not in tests/: --doctest-modules would import a
tests/conftest.py as a module named `conftest` beside the subfolders' own)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.ordering import DURATIONS, file_order, read_durations

# One OpenMP thread per process: pytest-xdist runs two workers on a 2-CPU machine, and torch's default of
# one thread per CPU in each oversubscribes it; OpenMP's spinning barriers then stall a CPU "kernel" for
# seconds (past the tests' launch timeouts). Subprocesses inherit it. A value set by the caller is kept.
# A CPU run sets its own thread count (--threads, default 1: harness.config.CPU_THREADS); this covers the
# tests' own torch work and the processes started before a run applies it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported before this file (a plugin): its pool is sized already
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def _import_triton_interpreted() -> None:
    """Off a CUDA GPU the bundled Triton kernels run only in Triton's CPU interpreter, and whether a jit function is
    interpreted is fixed when it is decorated: triton's own (triton.language's helpers) when triton is imported,
    the kernels' when their module is. Under pytest-xdist every worker imports every test module while collecting,
    and any of them may import triton first, so tests/kernels/test_triton_kernels.py found it compiled-mode and
    skipped itself. Here, before any test module, triton and the kernels' jit modules are imported with
    TRITON_INTERPRET=1; the variable is then put back as found, so what the harness decides from it at run time
    (harness.suite: Triton kernels are CPU defaults only under the interpreter) is unchanged. Compiling for a GPU
    (the SASS tests) happens in subprocesses, which import triton afresh."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    import torch

    if torch.cuda.is_available():
        return
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton.language  # noqa: F401

        for module in ("_triton_common", "_triton_fp8_pipe", "_triton_decode", "_triton_mla"):
            importlib.import_module(f"kernels_under_test.{module}")
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved


_import_triton_interpreted()


# A kernel module that calls sys.exit when imported (tests/runner/test_isolation.py): --doctest-modules must
# not import it into a test process.
collect_ignore = ["tests/runner/exits_at_import.py"]


def pytest_configure(config):
    # pytest-xdist's loadfile hands out files in the order they were collected (loadscopereorder would order them by
    # their number of tests, which says little: one test may run a whole command for 30 s).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    # longest file first (tests/ordering.py; the seconds from tests/durations.json, which scripts/test_durations.py
    # writes)
    items[:] = file_order(items, read_durations(DURATIONS))


def _write_tiny_capture(root: Path, *, layer: int = 3, seq_len: int = 64, scale: float = 32**-0.5) -> Path:
    """captures/tiny/text-S<seq>/layerNN.safetensors with its manifest, written without a model (no
    transformers): heavy-tailed q, k like real activations, and the softmax scale the manifest records."""
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
        "layers": {str(layer): {**written, "layer": layer, "scale": scale, "causal": True, "self_check": None,
                                "stats": {}}},
    })
    return directory / written["file"]


@pytest.fixture(scope="session")
def tiny_capture_writer():
    """`write(root, layer=3, seq_len=64, scale=...)` -> the path of a tiny capture under `root` (a fixture,
    since tests cannot import this file by name: each test folder's conftest is a module `conftest` too)."""
    return _write_tiny_capture
