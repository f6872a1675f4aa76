"""Attention recomputed from captured tensors, in row blocks: the self-check and the statistics in one pass.

The recomputation uses only what the manifest records (scale, causal, head j of q reads KV head
j // (Hq/Hkv)), so a kernel fed the capture with those facts computes what the model computed.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass

__all__ = ["LayerStats", "recompute", "tensor_moments", "KEY_BLOCK", "SUBNORMAL_BINADES"]

KEY_BLOCK = 64  # keys per block, as in FlashAttention-style kernels and the lean-P block scaling
SUBNORMAL_BINADES = 8  # a block whose max is > 8 binades below its row max: e4m3 p goes subnormal or to 0


@dataclass(frozen=True, kw_only=True)
class LayerStats:
    q_std: float
    k_std: float
    v_std: float
    q_excess_kurtosis: float
    k_excess_kurtosis: float
    v_excess_kurtosis: float
    logit_std: float  # std of scale * q.k over the causal (attended) entries
    sink_mass: float  # mean over rows of p[:, 0], the attention on token 0
    deep_block_share: float  # share of (row, 64-key block) pairs whose block max < row max * 2^-8

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def tensor_moments(t) -> tuple[float, float]:
    """(std, excess kurtosis) over all elements, accumulated in fp64."""
    import torch

    x = t.detach().to(torch.float64).reshape(-1)
    mean = x.mean()
    d = x - mean
    var = float((d * d).mean())
    if var == 0.0:
        return 0.0, 0.0
    kurt = float((d**4).mean()) / var**2 - 3.0
    return math.sqrt(var), kurt


def recompute(q, k, v, *, scale: float, causal: bool = True, model_out=None, block_rows: int | None = None,
              device="cpu"):
    """Recompute attention from q, k, v (fp32) and gather statistics. q may hold fewer positions than k (a
    decode capture: the last S_q tokens of the S_kv the cache holds, the causal mask aligned to its end).

    Returns (max_abs_diff against `model_out` or None, LayerStats). Memory: one [block_rows, S] score
    block at a time, on `device` (one head of q, k, v, out is moved there at a time). On a GPU the
    products run in true fp32 (TF32 off for the duration), so the check means the same on both.
    """
    import torch

    device = torch.device(device)
    if block_rows is None:
        block_rows = 256 if device.type == "cpu" else 1024
    with _exact_fp32(device) if device.type == "cuda" else contextlib.nullcontext():
        return _recompute(q, k, v, scale=scale, causal=causal, model_out=model_out, block_rows=block_rows,
                          device=device)


@contextlib.contextmanager
def _exact_fp32(device):
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def _recompute(q, k, v, *, scale, causal, model_out, block_rows, device):
    import torch

    B, Hq, S, _ = q.shape
    Hkv, S_kv = k.shape[1], k.shape[2]
    offset = S_kv - S  # query row r sits at position offset + r
    group = Hq // Hkv
    log2e = 1.0 / math.log(2.0)
    max_diff = 0.0
    logit_sum = logit_sq = logit_n = 0.0
    sink_sum = 0.0
    deep = valid_blocks = 0
    for b in range(B):
        for h in range(Hq):
            kh = k[b, h // group].to(device).float()
            vh = v[b, h // group].to(device).float()
            qh = q[b, h].to(device).float()
            oh = model_out[b, h].to(device).float() if model_out is not None else None
            for r0 in range(0, S, block_rows):
                r1 = min(S, r0 + block_rows)
                kv_end = offset + r1 if causal else S_kv
                s = torch.matmul(qh[r0:r1], kh[:kv_end].T) * scale
                rows = torch.arange(offset + r0, offset + r1, device=device)[:, None]
                cols = torch.arange(kv_end, device=device)[None, :]
                allowed = cols <= rows if causal else torch.ones_like(s, dtype=torch.bool)
                s = s.masked_fill(~allowed, float("-inf"))
                m = s.amax(dim=-1, keepdim=True)
                e = torch.exp(s - m)
                l = e.sum(dim=-1, keepdim=True)
                p = e / l
                if model_out is not None:
                    o = torch.matmul(p, vh[:kv_end])
                    max_diff = max(max_diff, float((o - oh[r0:r1]).abs().max()))
                finite = torch.where(allowed, s, torch.zeros_like(s)).double()
                logit_sum += float(finite.sum())
                logit_sq += float((finite * finite).sum())
                logit_n += int(allowed.sum())
                sink_sum += float(p[:, 0].double().sum())
                deep_n, valid_n = _deep_blocks(s, m, offset + r0, causal=causal, log2e=log2e)
                deep += deep_n
                valid_blocks += valid_n
    rows_total = B * Hq * S
    mean = logit_sum / logit_n
    stats = {
        "logit_std": math.sqrt(max(logit_sq / logit_n - mean * mean, 0.0)),
        "sink_mass": sink_sum / rows_total,
        "deep_block_share": deep / valid_blocks if valid_blocks else 0.0,
    }
    for name, t in (("q", q), ("k", k), ("v", v)):
        std, kurt = tensor_moments(t)
        stats[f"{name}_std"], stats[f"{name}_excess_kurtosis"] = std, kurt
    return (max_diff if model_out is not None else None), LayerStats(**stats)


def _deep_blocks(s, m, r0: int, *, causal: bool, log2e: float) -> tuple[int, int]:
    """Count (row, key block) pairs with any attended key, and those whose max is > 8 binades below the
    row max. Blocks past the causal diagonal hold no attended key and are not counted."""
    import torch

    rows, width = s.shape
    nb = -(-width // KEY_BLOCK)
    padded = s
    if width % KEY_BLOCK:
        padded = torch.nn.functional.pad(s, (0, nb * KEY_BLOCK - width), value=float("-inf"))
    bmax = padded.view(rows, nb, KEY_BLOCK).amax(dim=-1)
    block_start = torch.arange(nb, device=s.device)[None, :] * KEY_BLOCK
    if causal:
        valid = block_start <= torch.arange(r0, r0 + rows, device=s.device)[:, None]
    else:
        valid = torch.ones((rows, nb), dtype=torch.bool, device=s.device)
    below = ((m - bmax) * log2e > SUBNORMAL_BINADES) & valid
    return int(below.sum()), int(valid.sum())
