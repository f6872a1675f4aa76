"""A recipe emulated: attention computed the way a low-precision kernel declares it computes, and how far a
correct kernel may be from that emulation.

`operands` applies the recipe to q, k, v (Hadamard rotation, K smoothing, Q smoothing, then each operand's
quantization); `attend` is attention on those operands, row block by row block, with P rounded as declared
relative to the exact row max, divided by the declared row sum, PV accumulated exactly or in fp32 per key block
(each block's product rounded to fp32 and added to an fp32 running sum: ZYFA's emulation of the accumulator).
In fp64 it is the reference; in fp32 it is the bundled emulated kernels themselves.

`attend(..., bounds=...)` also returns, per output element, how far a correct kernel of the recipe may land:
- bounds="exact" (the kernel rounds P against the exact row max, as the bundled ones do): it computes the same
  values in fp32 instead of fp64, so a score moves by at most gamma sum |q_i k_i| (gamma = (d + 2) 2^-24, plus a
  declared MMA error) and a transformed operand by its fp32 error; a P, or a quantized operand, can then round
  differently only within the envelope of rounding the values and the scale sources shifted by those amounts
  (rounding is monotone in the value for a fixed scale, and each scale is monotone in its source's amax, so the
  four corners bound every outcome). Most keys sit far from a rounding boundary and get no allowance at all,
  which is why a wrong block size or a scale rounded the wrong way, tiny next to FP4's own rounding, still fails.
- bounds="running" (an online-softmax kernel rounds P against its running max): each P may round at another
  point; the per-key bound 2 (u p + floor) enters the gate's Hoeffding / Cauchy-Schwarz allowance, as for the
  FP8 kernels (harness.kernels._gate.compare_declared).
Both add the fp32 accumulation's bound (recursive summation within and across key blocks, doubled so a kernel
with twice the block length fits) and the output's rounding (by the gate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.numerics._formats import element_format, unit_roundoff
from harness.numerics._lean import quantize_p_scaled
from harness.numerics._recipe import ZYFA_P, Recipe
from harness.numerics._scaled import OperandFormat, quantize

__all__ = ["hadamard", "Operands", "operands", "attend", "Attended", "STAGES", "stage_outputs", "U32"]

U32 = 2.0**-24  # fp32 unit roundoff
STAGES = ("q", "k", "v", "input", "p", "accumulation")  # bench error's stages of a recipe, in order
_AXES = {"q": -1, "k": -1, "v": -2}  # each operand's contraction axis: head dim for QK^T, keys for PV
_LEAN_REL = {"lean": 0.075, "zyfa-exact": 2.0**-4}  # a stored P's relative error in the normal range
_LEAN_FLOOR = {"lean": 2.0**-7, "zyfa-exact": 2.0**-10}  # below the normal range, in units of 2^-(o + sigma)


def hadamard(d: int, *, dtype, device):
    """The normalized Walsh-Hadamard matrix of order d (Sylvester's construction): H H^T = I, entries +-1/sqrt(d)."""
    import torch

    if d < 1 or d & (d - 1):
        raise ConfigError(f"A Hadamard rotation needs a power-of-two head dim; this one is {d}. Declare the recipe "
                          f"without hadamard, or pad the head dim.")
    h = torch.ones((1, 1), dtype=dtype, device=device)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(d)


@dataclass(frozen=True, kw_only=True, eq=False)
class Operands:
    """What the kernel multiplies: q, k, v after the recipe; qbar the mean query of Q smoothing (its term
    qbar k^T is added to every score row), or None; wq, wk, wv, wqbar: how far a kernel's own fp32 transform can
    move each element (its envelope, module doc), or None where nothing can move."""

    q: object
    k: object
    v: object
    qbar: object = None
    wq: object = None
    wk: object = None
    wv: object = None
    wqbar: object = None


def _add(a, b):
    return b if a is None else a + b


def operands(recipe: Recipe, q, k, v, *, dtype, quantized=("q", "k", "v"), envelope: bool = False) -> Operands:
    """Apply `recipe` to q [B,Hq,S,d], k [B,Hkv,S,d], v [B,Hkv,S,dv] in `dtype`, quantizing only the operands named
    in `quantized` (bench error's stages quantize one at a time). `envelope`: also each element's envelope."""
    import torch

    x = {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype)}
    err = {"q": None, "k": None, "v": None}  # absolute error of a kernel's fp32 transform, per element
    if recipe.hadamard:
        h = hadamard(q.shape[-1], dtype=dtype, device=q.device)
        for n in ("q", "k"):
            src = x[n]
            x[n] = src @ h
            err[n] = (q.shape[-1] + 2) * U32 * src.abs().sum(-1, keepdim=True) / math.sqrt(q.shape[-1])
    qbar = wqbar = None
    for n, on in (("k", recipe.k_smooth), ("q", recipe.q_smooth)):
        if not on:
            continue
        src = x[n]
        mean = src.mean(-2, keepdim=True).to(torch.float32).to(dtype)  # a kernel keeps the mean in fp32
        x[n] = src - mean
        mean_err = (src.shape[-2] + 2) * U32 * src.abs().mean(-2, keepdim=True)
        if err[n] is not None:  # the rotation's error carried into the mean
            mean_err = mean_err + err[n].mean(-2, keepdim=True)
        err[n] = _add(err[n], mean_err + U32 * x[n].abs())
        if n == "q":
            qbar, wqbar = mean, mean_err
    out, width = {}, {}
    for n in ("q", "k", "v"):
        fmt = getattr(recipe, n)
        e = None if err[n] is None else err[n] + 2 * U32 * x[n].abs()  # plus its own fp32 rounding
        if fmt is None or n not in quantized:
            out[n], width[n] = x[n], e
            continue
        out[n] = quantize(x[n], fmt, axis=_AXES[n])
        width[n] = _envelope(x[n], e, fmt, _AXES[n], out[n]) if envelope and e is not None else None
    return Operands(q=out["q"], k=out["k"], v=out["v"], qbar=qbar, wq=width["q"], wk=width["k"], wv=width["v"],
                    wqbar=wqbar if envelope else None)


def _envelope(x, e, fmt: OperandFormat, axis: int, nominal):
    """The largest |quantized - nominal| over values within x +- e and scales from magnitudes up or down by e."""
    import torch

    up, down = x + e * torch.sign(x), x - e * torch.sign(x)
    width = torch.zeros_like(x)
    for val in (x - e, x + e):
        for src in (up, down):
            width = torch.maximum(width, (quantize(val, fmt, axis=axis, amax_from=src) - nominal).abs())
    return width


@dataclass(frozen=True, kw_only=True, eq=False)
class Attended:
    """out [B, Hq, S, dv] (dtype of the computation); with bounds also `exact` (fp64 attention on the same
    operands with P unrounded and exact sums), `spread`, `bound` (the P allowance's terms, module doc) and
    `accumulation` (the fp32 accumulation's and the operands' envelopes' share), all fp64."""

    out: object
    exact: object = None
    spread: object = None
    bound: object = None
    accumulation: object = None


def _round_p(recipe: Recipe, t, p, *, t_from=None, p_from=None):
    """P as the recipe rounds it, relative to the exact row max (scaled like p: the row max's p is 1)."""
    if recipe.p in ZYFA_P:
        mode = "lean" if recipe.p == "lean" else "exact"
        return quantize_p_scaled(t, p_mode=mode, block=recipe.p_block, sigma=recipe.sigma, beta=recipe.beta,
                                 offsets_from=t_from)[0].to(p.dtype)
    return quantize(p, recipe.p, axis=-1, amax_from=p_from)


def _acc_fp32(p, v, block: int):
    """sum_j p_j v_j as an fp32 accumulator forms it: each block of keys' product rounded to fp32, then added to
    the running fp32 sum in key order. p [..., R, n], v [..., n, dv]; the blocks' products in one batched matmul."""
    import torch

    n = p.shape[-1]
    pad = (-n) % block
    if pad:
        p = torch.nn.functional.pad(p, (0, pad))
        v = torch.nn.functional.pad(v, (0, 0, 0, pad))
    nb = (n + pad) // block
    pb = p.reshape(*p.shape[:-1], nb, block).movedim(-2, -3)  # [..., nb, R, block]
    vb = v.reshape(*v.shape[:-2], nb, block, v.shape[-1])  # [..., nb, block, dv]
    parts = (pb @ vb).to(torch.float32)  # [..., nb, R, dv]
    acc = parts[..., 0, :, :].clone()
    for j in range(1, nb):
        acc = acc + parts[..., j, :, :]
    return acc


def _rows_per_block(shape, n_keys: int, *, on_gpu: bool, fp64: bool) -> int:
    """Query rows per block so one [B, H, rows, S] temporary stays near 1 GB on a GPU, 16 MB on a CPU (halved in
    fp64, where the gate's bounds keep a dozen of them alive)."""
    budget = (1 << 28 if on_gpu else 1 << 22) >> (1 if fp64 else 0)
    return max(16, min(shape[2], budget // max(1, shape[0] * shape[1] * n_keys)))


def _heads(t, group: int):
    """A KV-head tensor [B, Hkv, ...] laid out per query head [B, Hq, ...] (GQA)."""
    return None if t is None else t.repeat_interleave(group, dim=1) if group > 1 else t


def attend(recipe: Recipe, ops: Operands, *, scale: float, causal: bool, round_p: bool = True,
           acc32: bool | None = None, bounds: str | None = None, block_rows: int | None = None) -> Attended:
    """Attention on `ops` as `recipe` declares (module doc). `round_p` False: P unrounded; `acc32` None: as declared;
    `bounds`: None, "exact" or "running" (fp64 operands only). Every head at once, a block of query rows at a time
    (`block_rows`, default sized to memory); GQA by head index; the causal mask is the lower triangle."""
    import torch

    q, dtype = ops.q, ops.q.dtype
    if bounds is not None and dtype != torch.float64:
        raise ValueError("bounds are computed on the fp64 emulation")
    acc32 = recipe.accumulation == "fp32" if acc32 is None else acc32
    B, Hq, S, _ = q.shape
    group = Hq // ops.k.shape[1]
    k, v = _heads(ops.k, group), _heads(ops.v, group)
    block_rows = block_rows or _rows_per_block(q.shape, S, on_gpu=q.is_cuda, fp64=dtype == torch.float64)
    c = scale * math.log2(math.e)
    out = torch.empty((B, Hq, S, v.shape[-1]), dtype=dtype, device=q.device)
    extra = {n: torch.zeros((B, Hq, S, v.shape[-1]), dtype=torch.float64, device=q.device)
             for n in ("exact", "spread", "bound", "accumulation")} if bounds else {}
    comp = ops.qbar @ k.transpose(-1, -2) if ops.qbar is not None else None  # [B, Hq, 1, S]
    for r0 in range(0, S, block_rows):
        r1 = min(S, r0 + block_rows)
        n = r1 if causal else S
        t = q[:, :, r0:r1] @ k[:, :, :n].transpose(-1, -2)
        if comp is not None:
            t = t + comp[..., :n]
        t = t * c
        if causal:
            hidden = torch.arange(n, device=q.device)[None, :] > torch.arange(r0, r1, device=q.device)[:, None]
            t = t.masked_fill(hidden, -math.inf)
        p = torch.exp2(t - t.amax(-1, keepdim=True))
        ph = _round_p(recipe, t, p) if round_p and recipe.p is not None else p
        l_sum = (ph if recipe.row_sum == "rounded" or not round_p else p).sum(-1, keepdim=True)
        vb = v[:, :, :n]
        if acc32:
            o = (_acc_fp32(ph, vb, recipe.acc_block) / l_sum.to(torch.float32)).to(dtype)
        else:
            o = (ph @ vb) / l_sum
        out[:, :, r0:r1] = o
        if bounds:
            parts = _bounds(recipe, ops, bounds, group=group, rows=(r0, r1), t=t, p=p, ph=ph, l_sum=l_sum, o=o, vb=vb,
                            kb=k[:, :, :n], c=c, round_p=round_p, acc32=acc32)
            for name, value in parts.items():
                extra[name][:, :, r0:r1] = value
    return Attended(out=out, **extra)


def _bounds(recipe, ops, mode, *, group, rows, t, p, ph, l_sum, o, vb, kb, c, round_p, acc32) -> dict:
    """The per-element terms of the gate's allowance for one block of rows, every head (module doc)."""
    import torch

    n = t.shape[-1]
    exact = (p @ vb) / p.sum(-1, keepdim=True)
    va = vb.abs()
    wv = _heads(ops.wv, group)[:, :, :n] if ops.wv is not None else None
    v_term = (ph @ wv) / l_sum if wv is not None else torch.zeros_like(o)
    n_blocks = -(-n // recipe.acc_block)
    gamma_acc = (2 * recipe.acc_block + 2 * n_blocks + 4) * U32 + recipe.mma_rel_error * (n_blocks + 1)
    acc = (gamma_acc * (ph.abs() @ va) / l_sum + (n + 3) * U32 * o.abs()) if acc32 else torch.zeros_like(o)
    masked = torch.isneginf(t)
    if mode == "exact":
        delta = _score_shift(ops, group=group, rows=rows, kb=kb, c=c, mma=recipe.mma_rel_error)
        delta = delta.masked_fill(masked, 0.0)
        delta = delta + delta.amax(-1, keepdim=True) + 4 * U32
        # the row's maximum is exp2(0) = 1 exactly in any precision (its score minus itself): it cannot move,
        # and neither can a block scale set by it
        delta = delta.masked_fill(t == t.amax(-1, keepdim=True), 0.0)
        w_raw = p * (torch.exp2(delta) - 1)  # the unrounded P's own movement
        if round_p and recipe.p is not None:
            lo, hi = t - delta, t + delta
            m = t.amax(-1, keepdim=True)
            w = torch.zeros_like(p)
            for a in (lo, hi):
                for b in (lo, hi):
                    pa, pb = torch.exp2(a - m), torch.exp2(b - m)
                    w = torch.maximum(w, (_round_p(recipe, a, pa, t_from=b, p_from=pb) - ph).abs())
        else:
            w = w_raw
        sum_w = (w if recipe.row_sum == "rounded" or not round_p else w_raw).sum(-1, keepdim=True)
        term = (w @ va + o.abs() * sum_w) / l_sum + v_term
        return {"exact": exact, "spread": term / 2, "bound": term / 2, "accumulation": acc}
    w = _running_width(recipe, t, p, ph, round_p)
    sums = {}
    for key, a in (("w2", w * w), ("w", w)):
        # sum_j a_j (v_j - o)^2 = a @ v^2 - 2 o (a @ v) + o^2 sum a, all fp64
        sums[key] = (a @ (vb * vb) - 2 * o * (a @ vb) + o * o * a.sum(-1, keepdim=True)).clamp_min(0)
    spread = sums["w2"].sqrt() / l_sum
    bound = (sums["w"] * w.sum(-1, keepdim=True)).sqrt() / l_sum
    return {"exact": exact, "spread": spread, "bound": bound, "accumulation": acc + v_term}


def _score_shift(ops, *, group, rows, kb, c, mma):
    """How far an fp32 kernel's base-2 score can be from the emulation's: gamma sum |q_i k_i| and the
    operands' envelopes carried through the product (module doc)."""
    r0, r1 = rows
    n = kb.shape[2]
    qa, ka = ops.q[:, :, r0:r1].abs(), kb.abs()
    wq = ops.wq[:, :, r0:r1] if ops.wq is not None else None
    wk = _heads(ops.wk, group)[:, :, :n] if ops.wk is not None else None
    gamma = (qa.shape[-1] + 2) * U32 + mma
    qs, ks = _add(wq, qa), _add(wk, ka)
    shift = gamma * (qs @ ks.transpose(-1, -2))
    if wq is not None:
        shift = shift + wq @ ks.transpose(-1, -2)
    if wk is not None:
        shift = shift + qa @ wk.transpose(-1, -2)
    if ops.qbar is not None:
        qb = ops.qbar.abs()
        shift = shift + gamma * (qb @ ks.transpose(-1, -2))
        if ops.wqbar is not None:
            shift = shift + ops.wqbar @ ks.transpose(-1, -2)
        if wk is not None:
            shift = shift + qb @ wk.transpose(-1, -2)
    return c * shift


def _running_width(recipe, t, p, ph, round_p):
    """Per key, the bound on how far one rounding of P at another reference point can land from this one:
    2 (u p + floor), floor the format's smallest step at the granule's scale (module doc)."""
    import torch

    if not round_p or recipe.p is None:
        return torch.zeros_like(p)
    if recipe.p in ZYFA_P:
        _, e = quantize_p_scaled(t, p_mode="lean" if recipe.p == "lean" else "exact", block=recipe.p_block,
                                 sigma=recipe.sigma, beta=recipe.beta)
        return _LEAN_REL[recipe.p] * p + 2 * _LEAN_FLOOR[recipe.p] * torch.exp2(-e)
    fmt = recipe.p
    f = element_format(fmt.element)
    step = 2.0 ** (f.emin - f.mbits)  # the smallest positive element value
    # the granule's scale, from the largest rounded P in it: its value / its element (>= the granule's amax / max)
    block = fmt.block or p.shape[-1]
    pad = (-p.shape[-1]) % block
    pp = torch.nn.functional.pad(p, (0, pad)) if pad else p
    amax = pp.reshape(*pp.shape[:-1], -1, block).amax(-1, keepdim=True)
    unit = (amax / f.max_finite).expand(*pp.shape[:-1], -1, block).reshape(pp.shape)[..., :p.shape[-1]]
    floor = 2 * step * unit  # a scale up to twice another's (e8m0 and pow2 scales move by binades)
    lost = unit * 6.0 < 2.0**-8 if fmt.scale == "nvfp4" else torch.zeros_like(p, dtype=torch.bool)
    w = 2 * (unit_roundoff(f) * p + floor)
    return torch.where(lost, torch.maximum(w, p), w)  # an E4M3 block scale near 0 may lose the block's P


def stage_outputs(recipe: Recipe, q, k, v, *, scale: float, causal: bool, block_rows: int | None = None) -> dict:
    """fp64 outputs of the recipe taken apart, for `bench error`: "exact" (nothing quantized), "q", "k", "v" (that
    operand alone quantized), "input" (all three), "p" (and P rounded), "full" (and the declared accumulation)."""
    import torch

    def run(quantized, *, round_p=False, acc32=False):
        ops = operands(recipe, q, k, v, dtype=torch.float64, quantized=quantized)
        return attend(recipe, ops, scale=scale, causal=causal, round_p=round_p, acc32=acc32,
                      block_rows=block_rows).out

    out = {"exact": run(())}
    for n in ("q", "k", "v"):
        out[n] = run((n,))
    out["input"] = run(("q", "k", "v"))
    out["p"] = run(("q", "k", "v"), round_p=True)
    out["full"] = run(("q", "k", "v"), round_p=True, acc32=recipe.accumulation == "fp32")
    return out
