"""Checksums of q, k, v, so a kernel that writes into its inputs is caught.

Every kernel of a configuration is handed the same q, k, v tensors (and CUDA graphs capture their
addresses), so a kernel that modifies them in place would hand the next kernel, and the gate of the
next kernel, whatever it left there. The run loop takes `fingerprint(inputs)` before a kernel runs and
compares it after; `restore` puts the spec's values back into the same storage.

The checksum is computed where the tensors live (no copy to the host): each tensor's raw words (its
bits as integers of the element's size) summed plainly and weighted by position modulo a prime, in
int64 (wrapping, which integer addition does the same way in any order, so it is deterministic on every
device). A changed, moved or swapped value changes it; NaN bit patterns are compared as bits.

>>> import torch
>>> from harness.inputs import AttentionShape, InputSpec, make_inputs
>>> x = make_inputs(InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=8, head_dim_qk=4),
...                           dtype="float32"), device="cpu")
>>> before = fingerprint(x)
>>> _ = x.k.zero_()
>>> changed(before, fingerprint(x))
['k']
"""

from __future__ import annotations

from harness.inputs._spec import make_inputs

__all__ = ["fingerprint", "changed", "restore"]

_NAMES = ("q", "k", "v")
_CHUNK = 1 << 24  # elements per pass: bounds the int64 temporaries to 128 MiB x 3
_PRIME = 65521


def _words(t):
    import torch

    by_size = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    flat = t.detach().reshape(-1)
    return flat.view(by_size[flat.element_size()]) if flat.element_size() in by_size else flat


def _checksum(t) -> str:
    import torch

    w = _words(t)
    plain, weighted = 0, 0
    for start in range(0, w.numel(), _CHUNK):
        part = w[start:start + _CHUNK].to(torch.int64)
        pos = torch.arange(start, start + part.numel(), device=part.device, dtype=torch.int64) % _PRIME + 1
        plain += int(part.sum())
        weighted += int((part * pos).sum())
    return f"{plain & 0xFFFFFFFFFFFFFFFF:016x}{weighted & 0xFFFFFFFFFFFFFFFF:016x}"


def _tensors(inputs) -> dict:
    index = inputs.index_tensors() if hasattr(inputs, "index_tensors") else {}
    return {**{name: getattr(inputs, name) for name in _NAMES}, **index}


def fingerprint(inputs) -> dict[str, str]:
    """{"q": hex, "k": hex, "v": hex}: a checksum of each tensor's bits (see the module docstring); a paged or
    varlen workload's page table and lengths too, by their names (a kernel that rewrote them would send the
    next kernel to other pages)."""
    return {name: _checksum(t) for name, t in _tensors(inputs).items()}


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The names of the tensors whose checksum differs."""
    return [name for name in dict.fromkeys([*before, *after]) if before.get(name) != after.get(name)]


def restore(inputs, spec) -> None:
    """Put `spec`'s values back into `inputs`' own tensors (their storage, which launch closures and CUDA
    graphs hold, is kept): the inputs are made afresh from the spec and copied in."""
    fresh = make_inputs(spec, device=inputs.q.device)
    for name, t in _tensors(inputs).items():
        t.copy_(getattr(fresh, name))
