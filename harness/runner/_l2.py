"""`--l2 cold`: each launch reads inputs the cache does not hold, with nothing added to the timed launches.

A decode kernel reads a few MB and runs for microseconds, so whether its KV cache sits in L2 (50 MB on the
H200) decides its figure: timed back to back on one copy of its inputs it reads them from L2 after the first
launch, which a serving engine never does (the next layer's cache comes in between). Flushing the cache between
launches (triton's do_bench writes a 256 MB buffer) puts the flush in the timed stream, where a CUDA graph of
many launches cannot leave it out. Instead the kernel is prepared on N copies of its inputs and its launches
rotate through them, so between two launches on one copy the other N - 1 copies, at least twice the cache, pass
through it: N = ceil(2 x cache / input bytes) + 1, and no copy at all when the inputs alone are twice the cache
(each launch then evicts what the next one reads first). There is no flush to time, so none is in the figures.
The copies are made after the gate (judged on the first copy) and each is the kernel's own, released with it.
A CUDA graph holds a whole number of rotations (`build_launcher` rounds to `rotation`).
"""

from __future__ import annotations

import glob
import math

from harness.errors import ConfigError
from harness.runner._sizes import estimate_bytes

__all__ = ["L2_STATES", "MAX_COPIES", "cache_bytes", "copies_needed", "cold_launch", "input_bytes"]

L2_STATES = ("warm", "cold")
# More copies than this is a shape far below the cache (a CPU's last-level cache is hundreds of MB): each is a
# prepare() of its own, and the rotation of a graph of launches would outgrow the graph.
MAX_COPIES = 4096


def cache_bytes(device) -> int:
    """The cache that `--l2 cold` must defeat: a GPU's L2, or a CPU's last-level cache (sysfs)."""
    if device.kind in ("cuda", "rocm"):
        import torch

        size = int(getattr(torch.cuda.get_device_properties(device.torch_device), "L2_cache_size", 0) or 0)
    else:
        size = 0
        for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
            try:
                with open(path) as f:
                    text = f.read().strip()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            size = max(size, int(text.rstrip("KMG") or 0) * scale)
    if size <= 0:
        raise ConfigError(f"--l2 cold needs the size of {device.spec}'s cache, which it does not report "
                          f"({'torch.cuda.get_device_properties' if device.kind != 'cpu' else '/sys/devices/system/cpu'}). "
                          f"Use --l2 warm.")
    return size


def input_bytes(inputs) -> int:
    tensors = [inputs.q, inputs.k, inputs.v, *inputs.index_tensors().values()]
    return sum(t.numel() * t.element_size() for t in tensors)


def copies_needed(nbytes: int, cache: int) -> int:
    """N copies so that N - 1 of them cover twice the cache; 1 when the inputs alone do.

    >>> copies_needed(4 << 20, 50 << 20), copies_needed(200 << 20, 50 << 20)
    (26, 1)
    """
    return 1 if nbytes >= 2 * cache else math.ceil(2 * cache / max(nbytes, 1)) + 1


def _copy(inputs):
    return inputs.copy()


def check_cold(specs, device) -> None:
    """Refuse `--l2 cold` before the run starts (a user error, exit 2) where the device reports no cache size or an
    input is too small to be rotated through enough copies; found at set-up for timing, it was each kernel's error."""
    cache = cache_bytes(device)
    for spec in specs:
        sizes = estimate_bytes(spec, gate=False)
        nbytes = sizes["q"] + sizes["k"] + sizes["v"]
        n = copies_needed(nbytes, cache)
        if n > MAX_COPIES:
            s = spec.shape
            raise ConfigError(
                f"--l2 cold: input {spec.label} ({s.label()}, {spec.dtype}) holds {nbytes / (1 << 20):.3g} MiB of q, k, v "
                f"and would need {n} copies to cover twice the {cache / (1 << 20):.3g} MiB cache of {device.spec}, more "
                f"than the {MAX_COPIES} the harness makes. Give a shape of at least "
                f"{math.ceil(2 * cache / (MAX_COPIES - 1)) / (1 << 20):.3g} MiB (--batch, --seq-len-kv, --heads) or "
                f"--l2 warm. Nothing was run.")


def cold_launch(kernel, inputs, launch, *, device):
    """`launch` (prepared on `inputs`) rotating with the same kernel prepared on copies of them (see the module
    docstring): a closure that carries `rotation` (N) and `note` (what was done, for the results)."""
    cache = cache_bytes(device)
    nbytes = input_bytes(inputs)
    n = copies_needed(nbytes, cache)
    mib = lambda b: f"{b / (1 << 20):.3g} MiB"  # noqa: E731
    if n > MAX_COPIES:
        raise ConfigError(f"--l2 cold: inputs of {mib(nbytes)} would need {n} copies to cover twice the {mib(cache)} "
                          f"cache of {device.spec}, more than the {MAX_COPIES} the harness makes. Give a larger shape "
                          f"(--batch, --seq-len-kv) or --l2 warm.")
    launches = [launch] + [kernel.prepare(_copy(inputs)) for _ in range(n - 1)]
    at = [0]

    def rotating():
        i = at[0]
        at[0] = (i + 1) % n
        return launches[i]()

    rotating.rotation = n
    rotating.note = (f"L2 cold: {n} copies of the {mib(nbytes)} inputs rotated ({mib(n * nbytes)}; cache {mib(cache)})"
                     if n > 1 else f"L2 cold: the {mib(nbytes)} inputs are over twice the {mib(cache)} cache, one copy")
    return rotating
