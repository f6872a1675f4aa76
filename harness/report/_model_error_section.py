"""The model-level error in the report: the table of `bench error --model` (per kernel x scope, the KL of the
next-token distribution with its bootstrap interval over documents, top-1 agreement, the ratio to the BF16
floor) and the per-layer figure. A run without a `model_error` table gets no section.
"""

from __future__ import annotations

import json
from typing import Sequence

from harness.analysis import model_error_summary
from harness.report._blocks import Figure, ReportTable, Section
from harness.report._pyplot import fixed_layout, png, pyplot
from harness.results import read_rows

__all__ = ["model_error_table", "model_error_figure", "model_error_sections", "MODEL_ERROR_NOTE"]

MODEL_ERROR_NOTE = (
    "KL: KL(reference || kernel) of the next-token distribution, in nats, per token, the reference being the same "
    "model with fp64 attention (or, with --reference, with that BF16 kernel's); mean over every token, p99 the "
    "smallest KL that 1 % of the tokens reach; top-1: share of tokens whose most likely next token agrees; dNLL: "
    "the text's next-token NLL under the kernel's model minus the reference's, per token; x floor: mean KL over "
    "the floor kernel's (a second correct BF16 kernel) in the same scope; band: the floor's upper 95 % KL, and "
    "vs band: in band (mean KL at most the band), above band (its interval's lower end above) or not resolved. "
    "[a, b]: 95 % percentile bootstrap over documents (one resample of the documents for every row, paired). "
    "Kernels get bf16 q, k, v.")


def _sci(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _with(f: dict, key: str, lo: str, hi: str, fmt=_sci) -> str:
    if f.get(key) is None:
        return "-"
    if f.get(lo) is None:
        return fmt(f[key])
    return f"{fmt(f[key])} [{fmt(f[lo])}, {fmt(f[hi])}]"


def _scope(f: dict) -> str:
    return "every layer" if f["scope"] == "all" else f"layer {f['layer']}"


def model_error_table(figures: Sequence[dict], *, title: str = "Model error", caption: str | None = None,
                      failed: dict | None = None) -> ReportTable:
    """One row per kernel x scope of `harness.analysis.model_error_summary`, full precision to 3 digits; a kernel
    that failed (`failed`: name -> why, printed under the table) gets a row that says so."""
    pct = lambda x: f"{100 * x:.2f} %"  # noqa: E731
    rows = tuple((
        f["kernel"] + (" (floor)" if f["role"] == "floor" else ""), _scope(f), f"{f['documents']} x {f['tokens'] // f['documents']}",
        _with(f, "kl_mean_nats", "kl_mean_lo_nats", "kl_mean_hi_nats"),
        _with(f, "kl_p99_nats", "kl_p99_lo_nats", "kl_p99_hi_nats"),
        _with(f, "top1_agreement", "top1_agreement_lo", "top1_agreement_hi", fmt=pct),
        _with(f, "dnll_mean_nats", "dnll_mean_lo_nats", "dnll_mean_hi_nats", fmt=lambda x: f"{x:+.3g}"),
        _with(f, "kl_vs_floor", "kl_vs_floor_lo", "kl_vs_floor_hi", fmt=lambda x: f"{x:.3g}"),
        _sci(f.get("band_nats")) if f["role"] != "floor" else "-", f.get("band_verdict") or "-",
    ) for f in figures) + tuple((name, "failed (see below)", "-", "-", "-", "-", "-", "-", "-", "-")
                                for name in (failed or {}))
    return ReportTable(title=title, columns=("kernel", "attention replaced in", "documents x tokens", "KL mean (nats)",
                                             "KL p99 (nats)", "top-1 agreement", "dNLL (nats/token)", "KL x floor",
                                             "band (nats)", "vs band"),
                       rows=rows, caption=MODEL_ERROR_NOTE if caption is None else caption, left=3)


def model_error_figure(figures: Sequence[dict], *, title: str = "Model error per layer") -> Figure | None:
    """Mean KL (log scale) with its 95 % interval per replaced layer, one series per kernel, the floor dashed;
    the kernel in every layer at once drawn at the right, apart. None without per-layer rows."""
    per_layer = [f for f in figures if f["scope"] == "layer"]
    if not per_layer:
        return None
    plt = pyplot()
    kernels = list(dict.fromkeys(f["kernel"] for f in figures))
    layers = sorted({f["layer"] for f in per_layer})
    at_all = max(layers) + 2
    fig, ax = plt.subplots(figsize=(13, 5.2))
    fixed_layout(fig, rows=1, cols=1, left=1.0, right=2.9, top=0.45, bottom=0.75, wgap=0, hgap=0)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    consecutive = all(b - a == 1 for a, b in zip(layers, layers[1:]))
    for i, k in enumerate(kernels):
        mine = sorted((f for f in figures if f["kernel"] == k), key=lambda f: (f["scope"] == "all", f["layer"] or 0))
        floor = mine[0]["role"] == "floor"
        color = "0.45" if floor else cycle[i % len(cycle)]
        dx = (i - (len(kernels) - 1) / 2) * min(0.12, 0.6 / len(kernels))  # side by side, bars apart
        for scope, marker in (("layer", "o"), ("all", "D")):
            pts = [f for f in mine if f["scope"] == scope]
            if not pts:
                continue
            xs = [(f["layer"] if scope == "layer" else at_all) + dx for f in pts]
            ys = [f["kl_mean_nats"] for f in pts]
            err = [[max(f["kl_mean_nats"] - f["kl_mean_lo_nats"], 0) for f in pts],
                   [max(f["kl_mean_hi_nats"] - f["kl_mean_nats"], 0) for f in pts]]
            line = "--" if floor else "-"
            ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, ms=4 if scope == "layer" else 6, capsize=2,
                        lw=1.3, ls=line if scope == "layer" and consecutive else "none",
                        label=(f"{k} (floor)" if floor else k) if scope == "layer" else None)
    ax.set_yscale("log")
    ticks = layers if len(layers) <= 16 else layers[:: max(1, len(layers) // 15)]
    ax.set_xticks([*ticks, at_all], [*(str(t) for t in ticks), "every\nlayer"])
    ax.axvline(at_all - 1, color="0.8", lw=1)
    ax.set_xlabel("layer whose attention is replaced (every other layer: fp64 reference attention)")
    ax.set_ylabel("mean KL(reference || kernel), nats / token")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Figure(key="model-error", title=title, png=png(fig), caption=(
        "Mean KL divergence of the next-token distribution from the model with fp64 attention, with the kernel in "
        "one layer (circles) or in every layer (diamonds, right); bars: 95 % bootstrap over documents. The floor "
        "(grey, dashed where layers are consecutive) is a second correct BF16 kernel: a kernel at the floor is as "
        "accurate as BF16 attention."))


def model_error_sections(run, *, figures: bool = True, resamples: int | None = None) -> list[Section]:
    """The run's model-error section, or [] when it has no model_error rows."""
    rows = read_rows(run.path, "model_error")
    cfg = json.loads(run.info.get("config_json") or "{}")
    failed = cfg.get("provenance", {}).get("failures") or {}
    rows = [r for r in rows if r["kernel"] not in failed]  # a kernel that failed part way: no partial figures
    if not rows:
        return [Section(title="Model error: every kernel failed", text=" ".join(failed.values()))] if failed else []
    summary = model_error_summary(rows, **({} if resamples is None else {"resamples": resamples}))  # None: its own
    prov = cfg.get("provenance", {}).get("text", {})
    floor = next((f["kernel"] for f in summary if f["role"] == "floor"), "-")
    ref = summary[0].get("reference") or "fp64"
    against = "fp64 attention" if ref == "fp64" else f"{ref}'s attention (BF16; the floor's KL is then the band of two BF16 kernels)"
    text = (f"{cfg.get('model', '?')}{' (RANDOM WEIGHTS: an architecture check only)' if cfg.get('random_weights') else ''}"
            f" over {summary[0]['documents']} documents of {cfg.get('seq_len', '?')} tokens "
            f"({prov.get('origin', cfg.get('text', '?'))}; {prov.get('unit', 'documents')}), its attention replaced "
            f"by each kernel in one layer or in every layer, against the same model with {against}; floor: "
            f"{floor}. " + MODEL_ERROR_NOTE + "".join(f" {why}" for why in failed.values()))
    fig = model_error_figure(summary) if figures else None
    every = [f for f in summary if f["scope"] == "all"]
    per_layer = [f for f in summary if f["scope"] == "layer"]
    out = [Section(title="Model error: KL divergence of the next-token distribution", text=text,
                   tables=(model_error_table(every or per_layer, title="Attention replaced in every layer" if every
                                             else "Attention replaced per layer", failed=failed,
                                             caption=" ".join(failed.values())),),
                   figures=(fig,) if fig is not None else ())]
    if every and per_layer:
        out.append(Section(title="Model error per layer", text="One layer's attention replaced, every other layer's "
                           "fp64; the same figures as above.", tables=(model_error_table(per_layer, title="", caption=""),)))
    return out
