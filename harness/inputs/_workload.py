"""Serving-shaped inputs: a KV cache in shuffled pages, sequences of different lengths packed along S, and
the per-sequence views every reference and check reads them through.

`lay_out` draws the values of one workload (`AttentionShape`: decode, paged, varlen) and places them the way a
serving engine leaves them; `sequences` undoes that for one sequence at a time, so the fp64 reference, the
gate and the checks never need to know the layout, and never hold more than one sequence in fp64.

The logical values come from the source in a fixed order (q, then k, then v, each over every sequence), so a
paged workload holds exactly the values of the same workload unpaged (same seed): the page layout is the only
difference a kernel sees. Slots of the pool that no sequence uses (its spare pages, the tail of each
sequence's last page) hold N(0, 1) values unlike any source's, so a kernel that reads past a sequence's
length, or through a page the table does not give it, moves its output and fails the gate.

>>> import torch
>>> from harness.inputs import AttentionShape, InputSpec, make_inputs
>>> s = AttentionShape(batch=2, heads_q=2, heads_kv=1, seq_len=1, seq_len_kv=10, head_dim_qk=4, page_size=4)
>>> x = make_inputs(InputSpec(shape=s, dtype="float32"), device="cpu")
>>> tuple(x.k.shape), tuple(x.page_table.shape), x.kv_lens.tolist()
((7, 4, 1, 4), (2, 3), [10, 10])
>>> [tuple(seq.k.shape) for seq in sequences(x)]
[(1, 1, 10, 4), (1, 1, 10, 4)]
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.inputs._synthetic import synthesize

__all__ = ["lay_out", "paged_cache", "sequences", "Sequence", "valid_rms", "INDEX_TENSORS", "VARLEN_FORMS", "varlen_lengths"]

# The integer tensors of a workload, by the names kernels receive them under (docs/workloads.md: what a plain function receives).
INDEX_TENSORS = ("page_table", "kv_lens", "cu_seqlens_q", "cu_seqlens_kv")


# How --varlen states its lengths (docs/workloads.md); `none` is no varlen, for a sweep that includes it.
VARLEN_FORMS = {
    "uniform": "each sequence's KV length uniform in 1..S_kv (flashinfer's random actual lengths)",
    "uniform:F": "uniform in ceil(F S_kv)..S_kv, 0 < F <= 1",
    "lengths:L1/L2/...": "the lengths given, one per sequence (--batch of them)",
    "none": "every sequence S_kv long",
}


def varlen_lengths(form: str, *, batch: int, seq_len_kv: int, seed: int,
                   flag: str = "--varlen") -> tuple[tuple[int, ...] | None, str | None]:
    """(lengths, how they were chosen) of a --varlen form, drawn with Python's own generator seeded by `seed`
    (no torch: the suite decides shapes before anything is allocated); (None, None) for `none`.

    >>> varlen_lengths("lengths:3/1/4", batch=3, seq_len_kv=8, seed=0)
    ((3, 1, 4), 'lengths:3/1/4')
    >>> varlen_lengths("uniform:0.5", batch=4, seq_len_kv=100, seed=1)[1]
    'uniform:0.5 seed 1'
    """
    kind, _, arg = form.strip().partition(":")
    forms = "; ".join(f"{k}: {v}" for k, v in VARLEN_FORMS.items())
    if kind == "none" and not arg:
        return None, None
    if kind == "lengths":
        try:
            lengths = tuple(int(x) for x in arg.split("/"))
        except ValueError:
            raise ConfigError(f"{flag} {form!r}: the lengths must be integers separated by '/', e.g. "
                              f"lengths:512/1024/4096.") from None
        if len(lengths) != batch:
            raise ConfigError(f"{flag} {form!r} gives {len(lengths)} lengths for --batch {batch}: give one per sequence.")
        return lengths, form.strip()
    if kind == "uniform":
        try:
            frac = float(arg) if arg else None
        except ValueError:
            frac = -1.0
        if frac is not None and not 0 < frac <= 1:
            raise ConfigError(f"{flag} {form!r}: F in uniform:F is the shortest length as a fraction of --seq-len-kv, "
                              f"0 < F <= 1.")
        lo = 1 if frac is None else max(1, math.ceil(round(frac * seq_len_kv, 6)))
        rng = random.Random(seed)
        return tuple(rng.randint(lo, seq_len_kv) for _ in range(batch)), f"{form.strip()} seed {seed}"
    raise ConfigError(f"{flag} {form!r} is not a length distribution. The forms are {forms}.")


def _cumulative(lengths) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def lay_out(shape, *, source: str, dtype, device, generator) -> dict[str, Any]:
    """q, k, v and the index tensors of a paged or varlen workload (see the module docstring)."""
    import torch

    s = shape
    lk = s.kv_lengths()
    ints = dict(dtype=torch.int32, device=device)
    out: dict[str, Any] = {"q": synthesize(source, s.q_shape(), dtype=dtype, device=device, generator=generator,
                                           group=s.heads_q // s.heads_kv)}
    logical = (1, s.heads_kv, sum(lk)) if s.packed else (s.batch, s.heads_kv, s.seq_len_kv)
    k = synthesize(source, (*logical, s.head_dim_qk), dtype=dtype, device=device, generator=generator, role="k")
    v = k[..., :s.head_dim_v] if s.latent_kv else synthesize(source, (*logical, s.head_dim_v), dtype=dtype,
                                                              device=device, generator=generator, role="v")
    if s.packed:
        out["cu_seqlens_q"] = torch.tensor(_cumulative(s.q_lengths()), **ints)
        out["cu_seqlens_kv"] = torch.tensor(_cumulative(lk), **ints)
    if s.paged or s.packed:
        out["kv_lens"] = torch.tensor(lk, **ints)
    if not s.paged:
        out.update(k=k, v=v)
        return out
    return {**out, **paged_cache(s, k, v, generator=generator)}


def paged_cache(shape, k, v, *, generator) -> dict[str, Any]:
    """k and v (logical: [B, Hkv, S_kv, d], or packed [1, Hkv, total, d]) placed in a pool of shuffled pages
    (`lay_out`'s layout), with the page table and lengths: {"k", "v", "page_table", "kv_lens"}. Captured
    caches go through it too, so a capture and its control sit in pages the same way."""
    import torch

    s = shape
    lk = s.kv_lengths()
    dtype, device = k.dtype, k.device
    ints = dict(dtype=torch.int32, device=device)
    out: dict[str, Any] = {"kv_lens": torch.tensor(lk, **ints)}
    P, pages = s.page_size, s.pages_per_sequence()
    order = torch.randperm(s.num_pages, generator=generator).tolist()
    used, spare = order[:sum(pages)], order[sum(pages):]
    table = [[0] * s.max_pages for _ in range(s.batch)]
    at = 0
    for b, n in enumerate(pages):
        table[b] = used[at:at + n] + [spare[j % len(spare)] for j in range(s.max_pages - n)]
        at += n
    out["page_table"] = torch.tensor(table, **ints)
    # Every token's slot in the pool (page * P + offset), in the order of the logical tokens: sequence by
    # sequence, position by position.
    t = torch.tensor(table, dtype=torch.int64)
    slots = torch.cat([t[b, torch.arange(n) // P] * P + torch.arange(n) % P for b, n in enumerate(lk)])
    for name, values, d in (("k", k, s.head_dim_qk), ("v", v, s.head_dim_v))[:1 if s.latent_kv else 2]:
        tokens = values.permute(0, 2, 1, 3).reshape(-1, s.heads_kv, d)  # [tokens, Hkv, d], sequence-major
        pool = torch.empty((s.num_pages * P, s.heads_kv, d), dtype=dtype, device=device)
        free = torch.ones(s.num_pages * P, dtype=torch.bool)
        free[slots] = False
        junk = torch.randn((int(free.sum()), s.heads_kv, d), generator=generator, dtype=torch.float32)
        pool[free.to(device)] = junk.to(device=device, dtype=dtype)
        pool[slots.to(device)] = tokens
        out[name] = pool.view(s.num_pages, P, s.heads_kv, d)
    if s.latent_kv:  # V is the latent part of K, in the same pages
        out["v"] = out["k"][..., :s.head_dim_v]
    return out


@dataclass(frozen=True)
class Sequence:
    """One sequence of a workload: q [1, Hq, lq, dqk], k [1, Hkv, lkv, dqk], v [1, Hkv, lkv, dv] (views of the
    inputs, or gathered copies from a paged pool) and `rows`, the index of its rows in the output."""

    index: int
    q: Any
    k: Any
    v: Any
    rows: tuple


def sequences(inputs, q=None, k=None, v=None) -> list[Sequence]:
    """Each sequence of `inputs` (or of `q`, `k`, `v` laid out like them, e.g. quantized copies) on its own."""
    import torch

    s = inputs.shape
    q, k, v = (inputs.q if q is None else q), (inputs.k if k is None else k), (inputs.v if v is None else v)
    cq, ck = _cumulative(s.q_lengths()), _cumulative(s.kv_lengths())
    table = inputs.page_table.tolist() if s.paged else None
    out = []
    for b, lkv in enumerate(s.kv_lengths()):
        rows = (slice(None), slice(None), slice(cq[b], cq[b + 1])) if s.packed else (slice(b, b + 1),)
        if s.paged:
            n = s.pages_per_sequence()[b]
            pages = torch.tensor(table[b][:n], dtype=torch.long, device=k.device)
            kb, vb = ((t[pages].reshape(n * s.page_size, s.heads_kv, t.shape[-1])[:lkv].permute(1, 0, 2).unsqueeze(0))
                      for t in (k, v))
        elif s.packed:
            kb, vb = k[:, :, ck[b]:ck[b + 1]], v[:, :, ck[b]:ck[b + 1]]
        else:
            kb, vb = k[b:b + 1], v[b:b + 1]
        out.append(Sequence(index=b, q=q[rows], k=kb, v=vb, rows=rows))
    return out


def valid_rms(inputs, name: str) -> float:
    """The RMS of the values of `name` ("k" or "v") that belong to a sequence (a paged pool's unused slots
    hold other values on purpose)."""
    if not inputs.shape.paged:
        return float(getattr(inputs, name).double().pow(2).mean().sqrt())
    total, count = 0.0, 0
    for seq in sequences(inputs):
        t = getattr(seq, name).double()
        total += float(t.pow(2).sum())
        count += t.numel()
    return (total / count) ** 0.5 if count else 0.0
