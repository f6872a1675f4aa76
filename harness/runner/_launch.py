"""How launches reach the device: one CUDA graph of many launches replayed back to back, or a loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from harness.errors import KernelError

__all__ = ["Launcher", "build_launcher", "estimate_launch_ns"]


def _nothing():
    return None


@dataclass(frozen=True, kw_only=True)
class Launcher:
    """`enqueue()` issues `launches_per_call` launches of the kernel on the current stream; `last()` is the
    output of the last launch enqueued (read after a synchronize) and `again()` one more call outside any
    timing, returning its output: the output is checked after each window (`runner._watch`)."""

    enqueue: Callable[[], None]
    launches_per_call: int
    strategy: str  # "graph" or "loop"
    note: str = ""  # why this strategy (e.g. the error that made graph capture impossible)
    last: Callable[[], object] = _nothing
    again: Callable[[], object] = _nothing


def estimate_launch_ns(device, launch, *, repeats: int = 5) -> int:
    """Rough device time of one launch (after a warm-up launch), used only to size graphs and chunks."""
    launch()
    device.synchronize()
    start = device.mark()
    for _ in range(repeats):
        launch()
    end = device.mark()
    device.wait(end)
    return max(1, device.elapsed_ns(start, end) // repeats)


def _loop(launch, n: int, note: str = "") -> Launcher:
    held = [None]

    def enqueue() -> None:
        # The last launch's output is kept for the check after the window: one store per call of n launches.
        for _ in range(n - 1):
            launch()
        held[0] = launch()

    return Launcher(enqueue=enqueue, launches_per_call=n, strategy="loop", note=note, last=lambda: held[0],
                    again=launch)


def _graph(device, launch, n: int) -> Launcher:
    import torch

    # Warm up on a side stream first: capture must not be the first run of lazily initialised kernels
    # (cuDNN picks its plan on first call), and torch requires it for the allocator's graph pool.
    side = torch.cuda.Stream(device=device.torch_device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            launch()
    torch.cuda.current_stream().wait_stream(side)
    device.synchronize()
    graph = torch.cuda.CUDAGraph()
    held = [None]
    with torch.cuda.graph(graph):
        for _ in range(n):
            held[0] = launch()  # the last one's output is the graph's: every replay rewrites it
    device.synchronize()

    def again():
        graph.replay()
        device.synchronize()
        return held[0]

    return Launcher(enqueue=graph.replay, launches_per_call=n, strategy="graph", last=lambda: held[0], again=again)


def build_launcher(device, kernel, launch, *, strategy: str, target_s: float, max_launches: int) -> Launcher:
    """Choose launches per call so one call lasts about `target_s`, and capture a graph where allowed.

    `auto` uses a graph on devices that have them when the kernel declares itself graph-safe, and a loop
    otherwise; when capture fails under `auto` the loop is used and the reason is kept in `note` (and in
    the results), so the choice is never silent. An explicit `graph` that cannot be captured is an error.
    """
    est = estimate_launch_ns(device, launch)
    n = max(1, min(max_launches, round(target_s * 1e9 / est)))
    # A launch that rotates through input copies (`--l2 cold`, runner._l2): a whole number of rotations per call,
    # so a replayed graph never reuses a copy sooner than the others.
    rotation = getattr(launch, "rotation", 1)
    rotation = rotation if isinstance(rotation, int) and rotation > 0 else 1
    n = max(rotation, n - n % rotation)
    launcher = _launcher(device, kernel, launch, n, strategy=strategy)
    note = getattr(launch, "note", "")
    note = note if isinstance(note, str) else ""
    return dataclasses.replace(launcher, note="; ".join(x for x in (launcher.note, note) if x)) if note else launcher


def _launcher(device, kernel, launch, n: int, *, strategy: str) -> Launcher:
    want_graph = strategy == "graph" or (strategy == "auto" and device.supports_graphs and kernel.graph_safe)
    if not want_graph:
        why = "" if strategy == "loop" else ("device has no graphs" if not device.supports_graphs else "kernel is not graph-safe")
        return _loop(launch, n, note=why)
    if not device.supports_graphs:
        raise KernelError(f"--launch graph needs a CUDA device; {device.spec} has no graphs. Use --launch loop.")
    try:
        return _graph(device, launch, n)
    except Exception as exc:
        if strategy == "graph":
            raise KernelError(
                f"Kernel {kernel.name!r} could not be captured into a CUDA graph ({type(exc).__name__}: {exc}). "
                f"Use --launch loop or --launch auto."
            ) from None
        device.synchronize()
        return _loop(launch, n, note=f"graph capture failed: {type(exc).__name__}: {str(exc)[:200]}")
