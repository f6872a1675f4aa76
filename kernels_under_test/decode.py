"""Decode kernels: attention of a few queries per sequence against a KV cache, paged or not, of equal or
different lengths (`harness.inputs.AttentionShape`'s workloads).

- `sdpa-kvcache`: torch SDPA on the cache, the way a model runs decode without a paged kernel. A dense cache
  is read in place; a paged or packed one is first gathered, inside the timed launch, into a padded batch
  [B, Hkv, L_max, d] (one extra read and write of the keys and values that a paged kernel avoids: what the
  comparison with `triton-splitkv` shows). A boolean mask carries the causal alignment to the end of the cache,
  the window and the lengths where one is needed; without one (one query per sequence, equal lengths, no
  window) the call takes none. On CUDA the backends are flash, then efficient, then math (PyTorch's order among
  them; cuDNN is left out so that PyTorch's changing default cannot change what is measured): flash wherever no
  mask is needed.
- `sdpa-kvcache-cudnn`: the same with SDPA's cuDNN backend alone, the yardstick a decode kernel is held to on a
  dense cache (PyTorch never picks it for decode by itself).
- `triton-splitkv`: flash-decoding in Triton (`_triton_decode`): each program takes one KV head's group of
  query heads (GQA shares every key load) and one split of the sequence, walks its keys through the page table
  token by token, and a second kernel merges the splits' partial softmaxes. It runs in Triton's CPU
  interpreter for tests (TRITON_INTERPRET=1).
- `triton-mla`: MLA decode in the absorbed form (`--mla`, `_triton_mla`): one latent KV head, each latent tile
  loaded once and used as K (its latent and RoPE dims, both dots in one pass) and as V (its latent dims), split-KV,
  paged or not; the query heads in blocks whose programs run side by side, so DRAM sees the cache once.
"""

from __future__ import annotations

import functools

from harness.inputs import FEATURES  # triton-splitkv: every workload but MLA's latent cache
from harness.kernels import WORKLOADS, Kernel, KernelRegistry
from kernels_under_test._decode_configs import (
    MLA_CANDIDATES,
    MLA_CONFIG,
    MLA_CONFIG_NARROW,
    MLA_CONFIG_NARROW_POINTERS,
    MLA_CONFIG_POINTERS,
    SPLITKV_CANDIDATES,
    SPLITKV_CANDIDATES_PAGED,
    SPLITKV_CONFIG,
    SPLITKV_CONFIG_PAGED,
    SPLITKV_MAX_QUERIES,
)
from kernels_under_test.triton_bf16 import triton_availability

# The tuned configurations are exported for tuning sweeps: a registered kernel's prepare(inputs, config=...) takes one.
__all__ = ["registry", "padded_indices", "decode_mask", "SPLITKV_MAX_QUERIES", "MLA_CONFIG", "MLA_CONFIG_NARROW",
           "MLA_CONFIG_POINTERS", "MLA_CONFIG_NARROW_POINTERS", "MLA_CANDIDATES",
           "SPLITKV_CANDIDATES", "SPLITKV_CANDIDATES_PAGED", "SPLITKV_CONFIG", "SPLITKV_CONFIG_PAGED"]

registry = KernelRegistry()



def padded_indices(shape, *, page_table=None, device):
    """(key index [B * L_max] into the flattened cache, query index [B * S_q_max] into the packed queries or
    None, output index [total_q] into the padded output or None): how `sdpa-kvcache` gathers a paged or packed
    workload into a padded batch and packs the output back. Padding entries repeat a sequence's first token."""
    import torch

    s = shape
    lk, lq = s.kv_lengths(), s.q_lengths()
    L, Q = max(lk), max(lq)
    t = torch.arange(L)
    keys = []
    ck = 0
    for b, n in enumerate(lk):
        tt = torch.where(t < n, t, torch.zeros_like(t))
        if s.paged:
            row = page_table[b].to("cpu", torch.long)
            keys.append(row[tt // s.page_size] * s.page_size + tt % s.page_size)
        else:
            keys.append(ck + tt)
        ck += n
    key_index = torch.cat(keys).to(device)
    if not s.packed:
        return key_index, None, None
    i = torch.arange(Q)
    cq, queries, back = 0, [], []
    for b, n in enumerate(lq):
        queries.append(cq + torch.where(i < n, i, torch.zeros_like(i)))
        back.append(b * Q + torch.arange(n))
        cq += n
    return key_index, torch.cat(queries).to(device), torch.cat(back).to(device)


def decode_mask(shape, *, device):
    """The boolean mask [B, 1, S_q_max, L_max] (True: attend) of a workload laid out as a padded batch, or None
    where every query sees every key of its cache. Query i of a sequence with lq queries and L keys sits at
    position L - lq + i; a padding query sees key 0 (so no row is empty)."""
    import torch

    s = shape
    lk, lq = s.kv_lengths(), s.q_lengths()
    L, Q = max(lk), max(lq)
    if (not s.causal or Q == 1) and s.window is None and len(set(lk)) == 1:
        return None
    j = torch.arange(L)[None, :]
    rows = []
    for n, m in zip(lk, lq):
        pos = (n - m + torch.arange(Q))[:, None]
        ok = j < n
        if s.causal:
            ok = ok & (j <= pos)
        if s.window is not None:
            ok = ok & (j > pos - s.window)
            if not s.causal:
                ok = ok & (j < pos + s.window)
        ok = torch.where(torch.arange(Q)[:, None] < m, ok, j == 0)
        rows.append(ok)
    return torch.stack(rows)[:, None].to(device)


def _sdpa_kvcache(inputs, *, backends=("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s = inputs.shape
    q, k, v = inputs.q, inputs.k, inputs.v
    gqa = s.heads_q != s.heads_kv
    backends = [getattr(SDPBackend, b) for b in backends]
    square = not s.features()  # dense self-attention: SDPA's own causal flag
    mask = None if square else decode_mask(s, device=q.device)
    B, L, Q = s.batch, max(s.kv_lengths()), max(s.q_lengths())
    key_index, query_index, back = (padded_indices(s, page_table=inputs.page_table, device=q.device)
                                    if s.paged or s.packed else (None, None, None))

    def cache(t):
        if key_index is None:
            return t
        flat = t.view(-1, s.heads_kv, t.shape[-1]) if s.paged else t[0].transpose(0, 1)  # [slots, Hkv, d]
        return flat.index_select(0, key_index).view(B, L, s.heads_kv, t.shape[-1]).transpose(1, 2)

    def launch():
        qq = q if query_index is None else q[0].index_select(1, query_index).view(s.heads_q, B, Q, -1).transpose(0, 1)
        with sdpa_kernel(backends):
            out = F.scaled_dot_product_attention(qq, cache(k), cache(v), attn_mask=mask, is_causal=square and s.causal,
                                                 scale=inputs.scale, enable_gqa=gqa)
        if back is None:
            return out
        return out.transpose(0, 1).reshape(s.heads_q, B * Q, -1).index_select(1, back).unsqueeze(0)

    with torch.no_grad():  # fail here, in setup, when no backend takes the call
        launch()
    return launch


registry.add(Kernel(
    name="sdpa-kvcache", prepare=_sdpa_kvcache, dtypes=frozenset({"bfloat16", "float16", "float32"}),
    devices=frozenset({"cpu", "cuda", "rocm"}), workloads=WORKLOADS, source=f"{__name__}:_sdpa_kvcache",
    description="torch SDPA on a KV cache: paged or packed caches gathered into a padded batch inside the launch, "
                "a boolean mask where the alignment, window or lengths need one",
))


def _sdpa_kvcache_cudnn(inputs):
    return _sdpa_kvcache(inputs, backends=("CUDNN_ATTENTION",))


def _cudnn_ok(device_kind: str) -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    return None if torch.backends.cudnn.is_available() else "PyTorch was built without cuDNN"


registry.add(Kernel(
    name="sdpa-kvcache-cudnn", prepare=_sdpa_kvcache_cudnn, dtypes=frozenset({"bfloat16", "float16"}),
    devices=frozenset({"cuda"}), workloads=WORKLOADS, source=f"{__name__}:_sdpa_kvcache_cudnn", availability=_cudnn_ok,
    description="cuDNN's fused attention (torch SDPA's cuDNN backend alone) on a KV cache, laid out as sdpa-kvcache "
                "lays it out: a dense cache read in place (the yardstick of a decode kernel: 4.5 TB/s of K+V on the "
                "H200 at B16 Hkv8 d128 S_kv 32768), a paged or packed one gathered first",
))


def _splitkv(inputs, *, config: dict | None = None):
    from kernels_under_test import _triton_decode

    return _triton_decode.prepare(inputs, config=config)


registry.add(Kernel(
    name="triton-splitkv", prepare=_splitkv, dtypes=frozenset({"bfloat16", "float16"}),
    devices=frozenset({"cuda", "cpu"}), workloads=FEATURES, source=f"{__name__}:_splitkv",
    availability=functools.partial(triton_availability, min_capability=(8, 0)),
    description=f"Triton split-KV (flash-decoding): GQA groups per program, page table read per token, splits "
                f"merged by a second kernel; up to {SPLITKV_MAX_QUERIES} queries per sequence",
    extra={"interpreted": "TRITON_INTERPRET=1 on the CPU (tests)"},
))


def _mla(inputs, *, config: dict | None = None):
    from kernels_under_test import _triton_mla

    return _triton_mla.prepare(inputs, config=config)


registry.add(Kernel(
    name="triton-mla", prepare=_mla, dtypes=frozenset({"bfloat16", "float16"}),
    devices=frozenset({"cuda", "cpu"}), workloads=WORKLOADS, source=f"{__name__}:_mla",
    availability=functools.partial(triton_availability, min_capability=(8, 0)),
    description=f"Triton MLA decode (absorbed form, --mla): the latent cache read once (latent + RoPE dims scored "
                f"in one pass, the latent tile reused as V), split-KV, paged; up to {SPLITKV_MAX_QUERIES} queries "
                f"per sequence",
    extra={"interpreted": "TRITON_INTERPRET=1 on the CPU (tests)", "latent_kv_only": True},
))
