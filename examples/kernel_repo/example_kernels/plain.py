"""Plain attention functions, as a kernel author writes them: no harness import, no registration.

The harness calls them with torch SDPA's convention (q, k, v [B, H, S, d]; `causal`/`is_causal` and `scale`
keywords found in the signature), or flash-attn's [B, S, H, d] when the layout is declared
(`-k example_kernels.plain:attention_bshd@bshd`, or `--layout bshd` on the command line).
"""

import torch.nn.functional as F

__all__ = ["attention", "attention_bshd"]


def attention(q, k, v, causal=True, scale=None, enable_gqa=False):
    """Causal attention through torch's scaled_dot_product_attention."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)


def attention_bshd(q, k, v, causal=True, softmax_scale=None):
    """The same in flash-attn's layout: q, k, v and the output are [B, S, H, d]."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                                         scale=softmax_scale, enable_gqa=q.shape[2] != k.shape[2])
    return out.transpose(1, 2)
