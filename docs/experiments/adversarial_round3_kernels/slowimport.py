"""A kernel module whose import takes 5 s (adversarial round 3: a signal while it is imported)."""
import time

import torch.nn.functional as F

time.sleep(5)


def attn(q, k, v, is_causal=True, scale=None):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
