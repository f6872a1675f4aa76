"""Two kernels that must not take a run with them (issue 31), named by `benchmarks/h200/isolation.sh` as
`benchmarks/h200/isolation_kernels.py:NAME`. Each runs in a process of its own (`--isolation auto`).

- `exits`: ends its own process with os._exit(0) in its first call: no exception, nothing to catch.
- `spins_on_gpu`: queues a CUDA kernel that never finishes (torch.cuda._sleep: a clock64 spin of 2^62 cycles,
  74 years at 1.98 GHz), then attention; the synchronize after its first call never returns, and SIGALRM
  cannot interrupt it. On the CPU (the script's dry run) it blocks SIGALRM and sleeps: the same hang, in C.
"""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.nn.functional as F


def exits(q, k, v, is_causal=True, scale=None):
    os._exit(0)


def spins_on_gpu(q, k, v, is_causal=True, scale=None):
    if q.is_cuda:
        torch.cuda._sleep(1 << 62)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            time.sleep(3600)
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
