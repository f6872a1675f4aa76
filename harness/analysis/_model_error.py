"""The model-level error's figures from its stored rows (the `model_error` table): per kernel x scope, the
mean KL divergence of the next-token distribution, its p99 over tokens, the top-1 agreement and dNLL (the text's
next-token negative log-likelihood under the kernel's model minus under the reference's), each with a
percentile bootstrap interval over documents, and the mean KL over the floor's (the second correct BF16
kernel's) in the same scope, paired: one resample of the documents serves every kernel and scope.

The band (ZYFA's Figs 19 and 24): the upper end of the floor's KL interval, i.e. how far two correct BF16
attentions' models drift apart at 95 %. With the reference a BF16 kernel's model, the floor's KL is that of two
different correct BF16 kernels; each kernel is then "in band" (its mean KL at most the band), "above band" (even
its interval's lower end above it) or "not resolved" (above, but its interval reaches into the band).

Pure functions of the rows: the same rows and seed give the same figures.

>>> rows = [dict(kernel=k, role=r, scope="all", layer=None, document=d, kl_nats=[x * (d + 1)] * 4,
...              top1_match=[True, True, True, d == 0]) for k, r, x in (("f", "floor", 1e-4), ("k", "kernel", 4e-4))
...         for d in range(3)]
>>> s = model_error_summary(rows, resamples=200)
>>> [(r["kernel"], round(r["kl_mean_nats"], 6), r["top1_agreement"], round(r["kl_vs_floor"], 3)) for r in s]
[('f', 0.0002, 0.8333333333333334, 1.0), ('k', 0.0008, 0.8333333333333334, 4.0)]
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["model_error_summary", "band_verdict", "P_TAIL", "BAND_VERDICTS"]

BAND_VERDICTS = ("in band", "above band", "not resolved")

P_TAIL = 0.01  # p99: the smallest KL that at least 1 % of the tokens reach


def _upper_tail(kl_sorted_desc, weights_cum, total, frac: float):
    """The value at the first sorted position where the cumulative weight reaches frac x total."""
    import numpy as np

    need = np.maximum(np.ceil(frac * total - 1e-9), 1.0)
    idx = np.argmax(weights_cum >= need[:, None], axis=1)
    return kl_sorted_desc[idx]


def _interval(values, level: float) -> tuple[float, float]:
    import numpy as np

    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def model_error_summary(rows: Sequence[dict], *, resamples: int = 1000, level: float = 0.95, seed: int = 0,
                        chunk: int = 100) -> list[dict]:
    """One dict per (kernel, role, scope, layer), the floor first in each scope, scopes "all" then by layer.

    Keys: kernel, role, scope, layer, reference, documents, tokens; kl_mean_nats (total KL over total tokens),
    kl_p99_nats (the smallest KL that at least 1 % of the tokens reach), top1_agreement (share of tokens
    whose top-1 token agrees), dnll_mean_nats (mean dNLL per predicted token; None for runs that kept none),
    kl_vs_floor (kl_mean over the floor's in the same scope), each with `_lo` and `_hi`: the percentile bootstrap
    interval at `level` over `resamples` resamples of the documents (with replacement; the same resamples for
    every group); band_nats (the floor's kl_mean_hi_nats in the scope) and band_verdict (module doc; None for the
    floor and where there is no floor); resamples, level.
    """
    import numpy as np

    if not rows:
        return []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kernel"], r["role"], r["scope"], r["layer"]), []).append(r)
    docs = sorted({r["document"] for r in rows})
    index = {d: i for i, d in enumerate(docs)}
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(docs), size=(resamples, len(docs)))
    mult = np.stack([np.bincount(d, minlength=len(docs)) for d in draws]).astype(np.float64)  # [R, D]
    figures: dict[tuple, dict] = {}
    for key, members in groups.items():
        missing = sorted(set(docs) - {m["document"] for m in members})
        if missing:
            raise ValueError(f"{key}: no rows for documents {missing}: every kernel x scope covers every document")
        members = sorted(members, key=lambda m: index[m["document"]])
        kl = [np.asarray(m["kl_nats"], dtype=np.float64) for m in members]
        match = [np.asarray(m["top1_match"], dtype=np.float64) for m in members]
        dnll = [None if m.get("dnll_nats") is None else np.asarray(m["dnll_nats"], dtype=np.float64) for m in members]
        n = np.array([len(a) for a in kl], dtype=np.float64)
        sums = np.array([a.sum() for a in kl])
        hits = np.array([a.sum() for a in match])
        flat = np.concatenate(kl)
        owner = np.repeat(np.arange(len(kl)), n.astype(np.int64))
        order = np.argsort(-flat, kind="stable")
        kl_desc, owner_desc = flat[order], owner[order]
        tokens = n @ mult.T  # [R]
        means = (sums @ mult.T) / tokens
        top1 = (hits @ mult.T) / tokens
        p99 = np.empty(resamples)
        for c0 in range(0, resamples, chunk):
            w = mult[c0: c0 + chunk][:, owner_desc]
            p99[c0: c0 + chunk] = _upper_tail(kl_desc, np.cumsum(w, axis=1), tokens[c0: c0 + chunk], P_TAIL)
        point_p99 = float(kl_desc[max(int(math.ceil(P_TAIL * n.sum() - 1e-9)), 1) - 1])
        dnll_fig = {"dnll_mean_nats": None, "dnll_mean_lo_nats": None, "dnll_mean_hi_nats": None}
        if all(d is not None for d in dnll):
            d_n = np.array([len(d) for d in dnll], dtype=np.float64)
            d_sums = np.array([d.sum() for d in dnll])
            dnll_fig = {"dnll_mean_nats": float(d_sums.sum() / d_n.sum()), **dict(zip(
                ("dnll_mean_lo_nats", "dnll_mean_hi_nats"), _interval((d_sums @ mult.T) / (d_n @ mult.T), level)))}
        figures[key] = {
            "kernel": key[0], "role": key[1], "scope": key[2], "layer": key[3],
            "reference": members[0].get("reference") or "fp64", "documents": len(docs),
            "tokens": int(n.sum()), "kl_mean_nats": float(sums.sum() / n.sum()), "kl_p99_nats": point_p99,
            "top1_agreement": float(hits.sum() / n.sum()), "_means": means,
            **dict(zip(("kl_mean_lo_nats", "kl_mean_hi_nats"), _interval(means, level))),
            **dict(zip(("kl_p99_lo_nats", "kl_p99_hi_nats"), _interval(p99, level))),
            **dict(zip(("top1_agreement_lo", "top1_agreement_hi"), _interval(top1, level))),
            **dnll_fig, "resamples": resamples, "level": level,
        }
    floors = {(k[2], k[3]): f for k, f in figures.items() if k[1] == "floor"}
    out = []
    for key in sorted(figures, key=lambda k: (k[2] != "all", -1 if k[3] is None else k[3], k[1] != "floor")):
        f = figures[key]
        floor = floors.get((key[2], key[3]))
        ratio = (f["_means"] / floor["_means"]) if floor is not None else None
        f["kl_vs_floor"] = f["kl_mean_nats"] / floor["kl_mean_nats"] if floor and floor["kl_mean_nats"] > 0 else None
        lo_hi = _interval(ratio, level) if ratio is not None and np.all(np.isfinite(ratio)) else (None, None)
        f["kl_vs_floor_lo"], f["kl_vs_floor_hi"] = lo_hi
        f["band_nats"] = floor["kl_mean_hi_nats"] if floor is not None else None
        f["band_verdict"] = None if floor is None or f["role"] == "floor" else band_verdict(
            f["kl_mean_nats"], f["kl_mean_lo_nats"], f["band_nats"])
        out.append(f)
    for f in out:
        f.pop("_means")
    return out


def band_verdict(kl_mean: float, kl_lo: float, band: float) -> str:
    """A kernel's mean KL against the band of two correct BF16 kernels (module doc).

    >>> band_verdict(1e-4, 5e-5, 2e-4), band_verdict(5e-4, 3e-4, 2e-4), band_verdict(3e-4, 1e-4, 2e-4)
    ('in band', 'above band', 'not resolved')
    """
    if kl_mean <= band:
        return BAND_VERDICTS[0]
    return BAND_VERDICTS[1] if kl_lo > band else BAND_VERDICTS[2]
