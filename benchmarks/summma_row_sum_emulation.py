"""CPU emulation of gluon-fp8-lean-summma's row sum against the exact one, one head (issue 19).

    PYTHONPATH=. python benchmarks/summma_row_sum_emulation.py [--bits 13] [--stride 16]

Same inputs (gaussian:0.1, bf16, e4m3 with power-of-two scales), same lean P, lazy rescale, block order
and descales as the kernel; the row-sum wgmma modelled as an FP8 QGMMA (k32) adds: C and 32 products
aligned to the largest exponent among them, each truncated toward zero to `--bits` fraction bits there
(13 is the accumulator width reported for Hopper's FP8 tensor cores), summed. Three row sums:
exact (fp64, what the plain kernel's fp32 adds of the codes give), chained (the running sum as the
wgmma's C: the first summma) and fresh (a zeroed accumulator per block, then l g + block in fp32: the
fix). Prints the rel. RMS error that the per-row scale l_exact / l alone puts on the output (rows
weighted by |o_row|^2 as the gate's RMS is), and l / l_exact along the rows of S=16384.
"""

from __future__ import annotations

import argparse
import math

import torch

from harness.kernels._quant import quantize_e4m3_pow2

TAU, SIGMA, BETA, BN, MAGIC = 0.125, 6.0, 0.35, 64, 8388608.0


def fp8_mma_add(c, terms, bits=13):
    """c + sum(terms) as one FP8 wgmma k-step adds them (aligned to the largest term, truncated)."""
    allt = torch.cat([c[:, None].double(), terms.double()], 1)
    amax = allt.abs().amax(1, keepdim=True)
    _, e = torch.frexp(amax)
    q = torch.where(amax > 0, torch.ldexp(torch.ones_like(amax), e - 1 - bits), torch.ones_like(amax))
    return (torch.trunc(allt / q) * q).sum(1).float()


def row_sums(S, causal, d, rows, *, bits=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = ((torch.randn(S, d, generator=g) * 0.1).bfloat16().float() for _ in range(3))
    q8, dq = quantize_e4m3_pow2(q)
    k8, dk = quantize_e4m3_pow2(k)
    qk_scale = torch.tensor(math.log2(math.e) * dq * dk / math.sqrt(d), dtype=torch.float32)
    qk = (q8.double()[rows] @ k8.double().T).float()
    n = len(rows)
    m = torch.full((n,), -1.0e30)
    exact = torch.zeros(n, dtype=torch.float64)
    chained, fresh, d_prev = torch.zeros(n), torch.zeros(n), None
    for j in range(math.ceil(S / BN)):
        cols = torch.arange(j * BN, min((j + 1) * BN, S))
        s = qk[:, cols]
        if causal:
            s = torch.where(rows[:, None] >= cols[None, :], s, torch.tensor(float("-inf")))
        live = (rows // 64 * 64 + 64 > j * BN) if causal else torch.ones(n, dtype=torch.bool)
        m_blk = s.amax(1) * qk_scale
        m_new = torch.where(m_blk > m + TAU, torch.maximum(m, m_blk), m)
        alpha = torch.exp2(m - m_new)
        o = torch.clamp(torch.floor(m_new - m_blk), 0.0, 24.0)
        c0 = 8.0 * (SIGMA + 7.0 + o - m_new) - BETA
        z = torch.clamp(torch.addcmul(c0[:, None], s, qk_scale * 8.0) + MAGIC, min=MAGIC)
        p = (z.view(torch.int32) & 0xFF).to(torch.uint8).view(torch.float8_e4m3fn).float()
        p = torch.nn.functional.pad(p, (0, BN - p.shape[1]))
        dn = torch.exp2(-SIGMA - o)
        gf = alpha * (d_prev / dn) if d_prev is not None else torch.zeros(n)
        e = exact * alpha.double() + p.double().sum(1) * dn.double()
        c = fp8_mma_add(fp8_mma_add(chained * gf, p[:, :32], bits), p[:, 32:], bits)
        blk = fp8_mma_add(fp8_mma_add(torch.zeros(n), p[:, :32], bits), p[:, 32:], bits)
        f = torch.addcmul(blk, fresh, gf)
        exact, chained, fresh = (torch.where(live, a, b) for a, b in ((e, exact), (c, chained), (f, fresh)))
        m = torch.where(live, m_new, m)
        d_prev = dn if d_prev is None else torch.where(live, dn, d_prev)
    sc = (q[rows].double() @ k.double().T) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(rows[:, None] < torch.arange(S)[None, :], float("-inf"))
    w = ((torch.softmax(sc, 1) @ v.double()) ** 2).sum(1)
    d_last = d_prev.double()
    return exact, chained.double() * d_last, fresh.double() * d_last, w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=13)
    ap.add_argument("--stride", type=int, default=16, help="every STRIDE-th row of S=16384 (all rows of the small shapes)")
    a = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    for S, causal, stride in ((1024, True, 1), (1088, False, 1), (16384, True, a.stride)):
        rows = torch.arange(0, S, stride)
        exact, chained, fresh, w = row_sums(S, causal, 128, rows, bits=a.bits)
        rel = {name: math.sqrt(float(((exact / l - 1) ** 2 * w).sum() / w.sum())) for name, l in
               (("chained", chained), ("fresh", fresh))}
        print(f"S={S} d128 {'causal' if causal else 'full'} ({a.bits} bits): output rel. RMS from the row scale: "
              f"chained {rel['chained']:.4f}, fresh {rel['fresh']:.2g}; min l/l_exact chained "
              f"{float((chained / exact).min()):.4f}, fresh {float((fresh / exact).min()):.6f}")
        if S == 16384:
            for i in range(0, len(rows), len(rows) // 8):
                print(f"  row {int(rows[i]):5d}: chained l/l_exact {float(chained[i] / exact[i]):.4f}")


if __name__ == "__main__":
    main()
