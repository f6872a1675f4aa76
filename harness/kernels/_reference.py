from __future__ import annotations

__all__ = ["reference_attention"]


def reference_attention(q, k, v, *, scale: float, causal: bool, block_rows: int = 1024, out_dtype=None):
    """Attention in fp64 on exactly the given tensors (any dtype, upcast), on their device.

    GQA is handled by mapping each query head to its KV head. Rows are processed in blocks so the
    score matrix of a 16K-token call never needs to exist whole. Returns fp64 unless `out_dtype`.
    """
    import torch

    B, Hq, S, _ = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=torch.float64, device=q.device)
    kd = k.to(torch.float64)
    vd = v.to(torch.float64)
    for h in range(Hq):
        kh = kd[:, h // group]  # [B, S, d]
        vh = vd[:, h // group]
        for r0 in range(0, S, block_rows):
            r1 = min(S, r0 + block_rows)
            qh = q[:, h, r0:r1].to(torch.float64)
            kv_end = r1 if causal else S
            scores = torch.matmul(qh, kh[:, :kv_end].transpose(-1, -2)) * scale
            if causal:
                rows = torch.arange(r0, r1, device=q.device)[:, None]
                cols = torch.arange(0, kv_end, device=q.device)[None, :]
                scores = scores.masked_fill(cols > rows, float("-inf"))
            p = torch.softmax(scores, dim=-1)
            out[:, h, r0:r1] = torch.matmul(p, vh[:, :kv_end])
    return out if out_dtype is None else out.to(out_dtype)
