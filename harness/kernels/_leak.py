"""The NaN-leak check of the gate: on a packed (varlen) or paged batch, a NaN in one sequence's q, k or v must
reach no other sequence's output.

Why: a kernel that loads a whole tile across a sequence boundary and masks the other sequence's keys by
multiplying their P by 0 computes the right numbers on finite inputs (0 x v = 0) and passes every comparison,
but 0 x NaN is NaN: one request's overflow then poisons its neighbours' outputs in a serving batch. The check
fills every other sequence (even, then odd) with NaN in q, k and v (their packed rows, or their pages of the
pool), launches once each, and requires every untouched sequence's output to stay finite.
"""

from __future__ import annotations

from harness.errors import GateFailure
from harness.inputs import sequences

__all__ = ["nan_leak_check", "poison_sequence"]


def _bounds(lengths, b: int) -> tuple[int, int]:
    start = sum(lengths[:b])
    return start, start + lengths[b]


def poison_sequence(inputs, b: int) -> None:
    """Fill sequence b's q, k and v with NaN in place: its packed rows, its pages of a paged pool, or its batch row."""
    import torch

    s = inputs.shape
    nan = float("nan")
    if s.packed:
        q0, q1 = _bounds(s.q_lengths(), b)
        inputs.q[:, :, q0:q1] = nan
    else:
        inputs.q[b] = nan
    if s.paged:
        pages = torch.tensor(inputs.page_table[b, :s.pages_per_sequence()[b]].tolist(), dtype=torch.long,
                             device=inputs.k.device)
        inputs.k[pages] = nan
        inputs.v[pages] = nan
    elif s.packed:
        k0, k1 = _bounds(s.kv_lengths(), b)
        inputs.k[:, :, k0:k1] = nan
        inputs.v[:, :, k0:k1] = nan
    else:
        inputs.k[b] = nan
        inputs.v[b] = nan


def nan_leak_check(kernel, inputs, launch, *, sync) -> None:
    """Raise `GateFailure` when a NaN in one sequence reaches another's output (module doc). Only for packed or
    paged batches of two sequences or more; q, k, v are restored whatever happens."""
    import torch

    s = inputs.shape
    if not (s.packed or s.paged) or s.batch < 2:
        return
    seqs = sequences(inputs)
    saved = [t.clone() for t in (inputs.q, inputs.k, inputs.v)]
    try:
        for parity in (0, 1):
            for seq in seqs:
                if seq.index % 2 == parity:
                    poison_sequence(inputs, seq.index)
            out = launch()
            sync(out)
            leaked = [seq.index for seq in seqs if seq.index % 2 != parity
                      and not bool(torch.isfinite(out[seq.rows]).all())]
            if leaked:
                poisoned = [seq.index for seq in seqs if seq.index % 2 == parity]
                raise GateFailure(
                    f"Kernel {kernel.name!r} leaks NaN across sequences on {inputs.source} ({s.label()}): with NaN in "
                    f"the q, k, v of sequence(s) {poisoned}, the output of sequence(s) {leaked}, whose own inputs are "
                    f"finite, holds NaN. It reads another sequence's keys or values (a tile loaded across a sequence "
                    f"boundary or a page it was not given) and masks them by multiplying by 0, which keeps a NaN. "
                    f"Mask by selecting (where / -inf before the exponential), not by multiplying. It is not timed.")
            for t, v in zip((inputs.q, inputs.k, inputs.v), saved):
                t.copy_(v)
    finally:
        for t, v in zip((inputs.q, inputs.k, inputs.v), saved):
            t.copy_(v)
