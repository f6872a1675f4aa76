"""Stress inputs for low-precision attention (`--input outliers:M`, `sinks:L`, `heavytail:NU`): the three ways
real activations break a quantizer sized on Gaussian data, each drawn from a stated distribution so a result can
be reproduced and reasoned about. q, k, v are drawn in that order from the run's generator, as every synthetic
source is; the structure shared by q and k (which channels are outliers, the sink's direction) comes from a second
generator seeded from the first one's seed, so q and k agree on it and the same seed gives the same inputs.

- `outliers:M` (default 20): every element N(0, 1), except in max(1, d/16) channels per KV head (the same channels
  for that head's queries and keys, drawn without replacement): there k = M + (M/4) N(0, 1) (a large per-channel
  bias, what K smoothing removes; the "massive" key channels of LLMs) and q = (M/4) N(0, 1). v is N(0, 1).
  A per-tensor scale is then set by the outlier channels, and the others keep few bits.
- `sinks:L` (default 8): an attention sink at key 0 of every sequence. With u a unit vector per KV head:
  q = N(0, 1) + sqrt(d) u for every query (d = the head dim), k_0 = L u, the other keys and v N(0, 1).
  Under the default softmax scale 1/sqrt(d) a query scores key 0 at L + N(0, L^2/d) and every other key at
  N(0, 2): at S = 1024 (non-causal) key 0 takes about 15 % of each row's weight at L = 6, 30 % at L = 7 and
  half at L = 8, the default (SmolLM2's layer-15 sink takes ~45 %). Packed and paged layouts get it at key 0 of the first sequence only.
- `heavytail:NU` (default 3): every element of q, k and v i.i.d. Student-t with NU degrees of freedom, scaled to
  unit variance for NU > 2 (x sqrt((NU - 2) / NU)): rare values many standard deviations out, which a block scale
  must cover while the rest of its block keeps few bits.
"""

from __future__ import annotations

import math

__all__ = ["STRESS_KINDS", "stress"]

STRESS_KINDS = {
    "outliers": ("M", 20.0, "N(0, 1) except d/16 channels per KV head: k = M + (M/4) N(0, 1), q = (M/4) N(0, 1) there"),
    "sinks": ("L", 8.0, "an attention sink at key 0 scoring ~L nats above the other keys for every query"),
    "heavytail": ("NU", 3.0, "i.i.d. Student-t with NU degrees of freedom, unit variance for NU > 2"),
}


def _structure(generator):
    import torch

    return torch.Generator().manual_seed((generator.initial_seed() * 1_000_003 + 7) % (2**63 - 1))


def stress(kind: str, value: float, shape: tuple[int, ...], *, role: str, group: int, generator):
    """One fp32 CPU tensor of a stress source (module doc). `role`: "q", "k" or "v"; `group`: query heads per KV
    head (for q), so a query head shares its KV head's outlier channels and sink direction."""
    import torch

    if kind == "heavytail":
        t = _student_t(value, shape, generator)
        return t * math.sqrt((value - 2) / value) if value > 2 else t
    base = torch.randn(shape, generator=generator, dtype=torch.float32)
    if role == "v":
        return base
    heads, d = shape[1], shape[-1]
    kv_heads = heads // group if role == "q" else heads
    s = _structure(generator)
    if kind == "outliers":
        n = max(1, d // 16)
        channels = torch.stack([torch.randperm(d, generator=s)[:n] for _ in range(kv_heads)])  # [Hkv, n]
        mask = torch.zeros((kv_heads, d), dtype=torch.bool)
        mask[torch.arange(kv_heads)[:, None], channels] = True
        mask = mask.repeat_interleave(group if role == "q" else 1, 0)[None, :, None, :]  # [1, H, 1, d]
        wide = base * (value / 4)
        return torch.where(mask, wide + (value if role == "k" else 0.0), base)
    u = torch.randn((kv_heads, d), generator=s, dtype=torch.float32)
    u = (u / u.norm(dim=-1, keepdim=True)).repeat_interleave(group if role == "q" else 1, 0)[None, :, None, :]
    if role == "q":
        return base + math.sqrt(d) * u
    out = base.clone()
    out[:, :, :1] = value * u
    return out


def _student_t(nu: float, shape, generator):
    """Student-t draws from the generator: N(0, 1) / sqrt(chi2(nu) / nu), chi2 as a Gamma(nu / 2, 2) via torch's
    generator-driven standard gamma."""
    import torch

    z = torch.randn(shape, generator=generator, dtype=torch.float32)
    # torch._standard_gamma takes no generator: draw it through a seeded fork instead, seeded from this generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        chi2 = 2.0 * torch._standard_gamma(torch.full(shape, nu / 2.0, dtype=torch.float32))
    return z / torch.sqrt(chi2 / nu)
