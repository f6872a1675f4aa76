"""In-model timing (`bench in-model`): the attention pass's figures, and whether a kernel's isolated speedup survives
inside the model's forward pass.

`attention_figures` turns one attention pass (forwards timed in pairs, one plain and one with marks around every
attention call) into the figures the `in_model` table stores: medians of the forward, of its attention and of the
copies, the instrumentation's cost (median of marked - plain over the pairs), rest = forward - attention and the
attention's share.

`compare_in_model` sets each kernel against the reference kernel three ways, each a `comparison_row` (the one
interval procedure, design interleaved: the kernels of a run take turns within every repeat) decomposed into
cycles x clock:
- isolated: the captured layer alone, sustained (a `bench sustained --model` run of the same model and windows);
- attention in the model: the attention pass's summed attention per forward, with the pass's clocks;
- end to end: the forward's sustained window.
A kernel with a refresh() (q, k, v quantized or copied again each call, which an isolated timing does once, in
prepare()) gets a fourth: its attention less that refresh against the reference's attention, from the same passes
(`launch`): what its launches cost in the model, to set beside the isolated ratio.
Since forward = attention + rest for each kernel, end to end = s (attention ratio) + (1 - s) (rest ratio), s the
reference's attention share; the isolated ratio alone predicts s (isolated) + 1 - s. `survival_sentence` says
whether the isolated speedup survived in the model and which of three terms moved the end-to-end ratio away from
that prediction most: the clock the attention ran at inside the forward (the forward's clock, set by all its
layers), the attention's cycles, or the rest of the forward (its other layers, the copies, launch gaps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from harness.analysis._caveats import rule_for, run_caveats
from harness.analysis._compare import ComparisonRow, comparison_row
from harness.analysis._design import comparison_pilot
from harness.analysis._interval import FASTER_WITHIN, SLOWER_WITHIN, VerdictRule
from harness.analysis._stats import mean, median
from harness.errors import ResultsError

__all__ = ["InModelRow", "attention_figures", "compare_in_model", "isolated_label", "survival_sentence"]

TIMED = ("ok", "unsettled")


def attention_figures(*, plain_ns: Sequence[float], marked_ns: Sequence[float], calls: Sequence[Sequence],
                      layers: Sequence[int]) -> dict:
    """The in_model table's figures of one attention pass. `plain_ns[i]`, `marked_ns[i]`: pair i's plain and marked
    forward; `calls[i]`: the marked forward's attention calls as (layer, copy ns, attention ns[, refresh ns]), the
    attention including the kernel's refresh() (q, k, v quantized or copied again each call: work an isolated timing
    does once in prepare()). Every marked forward must call every one of `layers` (the swap reaches every layer),
    the same number of times. refresh_ns is None when no call had a refresh (every call's refresh ns 0 or absent)."""
    if not plain_ns or len(plain_ns) != len(marked_ns) or len(marked_ns) != len(calls):
        raise ValueError("an attention pass needs as many plain as marked forwards, at least one of each")
    want = sorted(layers)
    for forward in calls:
        seen = sorted({c[0] for c in forward})
        if seen != want or len(forward) != len(calls[0]):
            raise ValueError(f"a marked forward called attention in layers {seen} ({len(forward)} calls), not in every "
                             f"layer {want[0]}..{want[-1]} as the others did ({len(calls[0])} calls)")
    attention = [float(sum(c[2] for c in f)) for f in calls]
    copies = [float(sum(c[1] for c in f)) for f in calls]
    refreshes = [float(sum(c[3] if len(c) > 3 else 0 for c in f)) for f in calls]
    refreshed = any(refreshes)
    forward = median(list(plain_ns))
    att = median(attention)
    return {
        "attention_calls": len(calls[0]), "pass_forwards": len(plain_ns),
        "pass_plain_ns": [float(x) for x in plain_ns], "pass_marked_ns": [float(x) for x in marked_ns],
        "pass_attention_ns": attention, "pass_copy_ns": copies,
        "pass_forward_ns": forward, "pass_marked_forward_ns": median(list(marked_ns)),
        "instrumentation_cost_ns": median([m - p for p, m in zip(plain_ns, marked_ns)]),
        "attention_ns": att, "copy_ns": median(copies), "rest_ns": forward - att,
        "pass_refresh_ns": refreshes if refreshed else None, "refresh_ns": median(refreshes) if refreshed else None,
        "attention_share": att / forward if forward > 0 else None,
        "layer_attention_ns": [median([float(c[2]) for f in calls for c in f if c[0] == layer]) for layer in want],
    }


@dataclass(frozen=True, kw_only=True)
class InModelRow:
    """One kernel against the reference kernel: its three ratios (B = the kernel, A = the reference; time B/A =
    cycles B/A x clock A/B), the rest of the forward's ratio, each side's attention share, and the sentence."""

    kernel: str
    reference: str
    workload: str  # the in-model run's input label (model, phase, B, S, RANDOM-WEIGHTS)
    random_weights: bool
    isolated_input: str | None
    isolated: ComparisonRow | None
    isolated_note: str  # why there is no isolated ratio ("" when there is one)
    attention: ComparisonRow
    end_to_end: ComparisonRow
    rest: ComparisonRow | None  # None where a forward's rest is not above 0 (the marks cost more than the rest)
    share_reference: float
    share_kernel: float
    cost_frac: float  # the larger side's instrumentation cost over its forward (median over repeats)
    launch_reference: str
    launch_kernel: str
    # of the kernel's attention time in the model, the share in its refresh() (median over its passes); None for a
    # kernel without one, or a run from before v10 that did not split it out
    refresh_share: float | None = None
    # the kernel's attention less its refresh() (its launches, and the refresh mark's own cost) against the
    # reference's attention, from the same passes: what an isolated timing of the launch alone predicts for the model
    # once the refresh is fused away; None for a kernel without a refresh
    launch: ComparisonRow | None = None
    sentence: str = ""

    @property
    def predicted(self) -> float | None:
        """The end-to-end ratio the isolated ratio predicts at the reference's attention share."""
        if self.isolated is None:
            return None
        return self.share_reference * self.isolated.time.value + 1.0 - self.share_reference


def isolated_label(measurements: Sequence[dict], label: str | None = None) -> str:
    """The isolated run's input to compare with: `label`, or its one captured input (`L<n>:captured`)."""
    labels = list(dict.fromkeys(r["input_label"] for r in measurements if r.get("input_label")))
    if label is not None:
        if label not in labels:
            raise ResultsError(f"--isolated-input {label!r}: the isolated run has inputs {', '.join(labels) or 'none'}.")
        return label
    captured = [x for x in labels if x.endswith(":captured")]
    if len(captured) != 1:
        raise ResultsError(
            f"The isolated run holds {len(captured)} captured inputs ({', '.join(captured) or 'none'}; all inputs: "
            f"{', '.join(labels) or 'none'}); name the one to compare with by --isolated-input LABEL.")
    return captured[0]


def _joined(measurements: Sequence[dict], in_model: Sequence[dict]) -> list[dict]:
    by_id = {r["measurement_id"]: r for r in in_model}
    out = []
    for m in measurements:
        im = by_id.get(m.get("measurement_id"))
        if m.get("status") in TIMED and m.get("time_ns") and im is not None and im.get("attention_ns"):
            out.append({**m, "_im": {**im, "launch_ns": _launch_ns(im)}})
    return out


def _launch_ns(im: dict) -> float:
    """The attention pass's attention less its refresh(), median over the pass's marked forwards (the attention
    itself for a kernel without a refresh)."""
    if not im.get("pass_refresh_ns"):
        return im["attention_ns"]
    return median([a - r for a, r in zip(im["pass_attention_ns"], im["pass_refresh_ns"])])


def _pass_rows(rows: list[dict], key: str) -> list[dict]:
    """The rows as `comparison_row` reads them, timed by the attention pass: `key` (attention_ns, rest_ns or
    launch_ns, the attention less its refresh, which `_joined` derives) as the time, the pass's clocks and power as
    the clock and power."""
    return [{**r, "time_ns": r["_im"][key], "sm_clock_mhz": r["_im"].get("pass_sm_clock_mhz"),
             "inband_clock_mhz": r["_im"].get("pass_inband_clock_mhz"), "power_w": r["_im"].get("pass_power_w")}
            for r in rows]


def compare_in_model(*, measurements: Sequence[dict], in_model: Sequence[dict], info: dict, reference: str,
                     isolated: Sequence[dict] | None = None, isolated_info: dict | None = None,
                     isolated_input: str | None = None, rule: VerdictRule = VerdictRule()) -> list[InModelRow]:
    """One `InModelRow` per kernel of the in-model run against `reference` (see the module doc). `measurements`,
    `in_model`, `info`: the in-model run's tables and runs row; `isolated`, `isolated_info`: a `bench sustained
    --model` run's measurements and runs row (None: no isolated ratio), compared on `isolated_input` (default its
    one captured input). A kernel not timed on both sides of a ratio has no row."""
    rows = _joined(measurements, in_model)
    by_kernel: dict[str, list[dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    if reference not in by_kernel:
        raise ResultsError(f"The reference kernel {reference!r} has no timed in-model measurement (timed: "
                           f"{', '.join(by_kernel) or 'none'}): there is nothing to compare the others with.")
    caveats = run_caveats(info)
    the_rule = rule_for(rule, caveats)
    pilot = comparison_pilot(info, "interleaved")
    iso_label = iso_rows = None
    if isolated is not None:
        iso_label = isolated_label(isolated, isolated_input)
        iso_rows = [r for r in isolated if r.get("input_label") == iso_label and r.get("status") in TIMED
                    and r.get("time_ns")]
        iso_caveats = run_caveats(isolated_info or {})
        iso_rule = rule_for(rule, iso_caveats)
    out = []
    ref = by_kernel[reference]
    for kernel, mine in by_kernel.items():
        if kernel == reference:
            continue
        label = ref[0]["input_label"]

        def row(rows_a, rows_b, *, input_label=label, rule_=the_rule, caveats_=caveats, pilot_=pilot):
            return comparison_row(kernel=reference, kernel_b=kernel, input_a=input_label, input_b=input_label,
                                  rows_a=rows_a, rows_b=rows_b, rule=rule_, design="interleaved", caveats=caveats_,
                                  pilot=pilot_)

        iso, iso_note = None, "no isolated run to compare with"
        if iso_rows is not None:
            a = [r for r in iso_rows if r["kernel"] == reference]
            b = [r for r in iso_rows if r["kernel"] == kernel]
            if a and b:
                iso, iso_note = row(a, b, input_label=iso_label, rule_=iso_rule, caveats_=iso_caveats,
                                    pilot_=comparison_pilot(isolated_info or {}, "interleaved")), ""
            else:
                missing = " and ".join(k for k, rs in ((reference, a), (kernel, b)) if not rs)
                iso_note = f"{missing} not timed on {iso_label} in the isolated run (see its rows)"
        shares = lambda rs: mean([r["_im"]["attention_share"] for r in rs])  # noqa: E731
        cost = max(median([r["_im"]["instrumentation_cost_ns"] / r["_im"]["pass_forward_ns"] for r in rs])
                   for rs in (ref, mine))
        im = InModelRow(
            kernel=kernel, reference=reference, workload=label,
            random_weights=any(r["_im"].get("random_weights") for r in ref + mine), isolated_input=iso_label,
            isolated=iso, isolated_note=iso_note, attention=row(_pass_rows(ref, "attention_ns"), _pass_rows(mine, "attention_ns")),
            end_to_end=row(ref, mine),
            rest=(row(_pass_rows(ref, "rest_ns"), _pass_rows(mine, "rest_ns"))
                  if all(r["_im"]["rest_ns"] > 0 for r in ref + mine) else None),
            share_reference=shares(ref), share_kernel=shares(mine), cost_frac=cost,
            launch_reference=_strategy(ref), launch_kernel=_strategy(mine), refresh_share=_refresh_share(mine),
            launch=(row(_pass_rows(ref, "launch_ns"), _pass_rows(mine, "launch_ns"))
                    if any(r["_im"].get("refresh_ns") for r in mine) else None))
        out.append(_with_sentence(im))
    return out


def _refresh_share(rows: list[dict]) -> float | None:
    shares = [r["_im"]["refresh_ns"] / r["_im"]["attention_ns"] for r in rows if r["_im"].get("refresh_ns")]
    return median(shares) if shares else None


def _strategy(rows: list[dict]) -> str:
    return "/".join(sorted({r.get("launch_strategy") or "?" for r in rows}))


def _with_sentence(row: InModelRow) -> InModelRow:
    return replace(row, sentence=survival_sentence(row))


def _x(ratio) -> str:
    """`0.842 [0.838, 0.846]` (time B/A and its interval)."""
    if ratio is None:
        return "-"
    return f"{ratio.value:.3f}" + (f" [{ratio.low:.3f}, {ratio.high:.3f}]" if ratio.low is not None else "")


def _parts(c: ComparisonRow) -> str:
    if c.cycles is None or c.clock is None:
        return f"time {_x(c.time)} (no clock on both sides: not decomposed)"
    return f"time {_x(c.time)} = cycles {c.cycles.value:.3f} x clock {c.clock.value:.3f}"


_FASTER = ("faster", FASTER_WITHIN)
_SLOWER = ("slower", SLOWER_WITHIN)


def _direction(c: ComparisonRow) -> str:
    """faster / slower / no resolved difference, by the verdict where one was drawn, else by the interval."""
    if c.verdict in _FASTER or (c.verdict == "not judged" and c.time.high is not None and c.time.high < 1):
        return "faster"
    if c.verdict in _SLOWER or (c.verdict == "not judged" and c.time.low is not None and c.time.low > 1):
        return "slower"
    return "unresolved"


def survival_sentence(row: InModelRow) -> str:
    """Whether the isolated speedup survived in the model and where it went (see the module doc)."""
    k, ref, att, e2e = row.kernel, row.reference, row.attention, row.end_to_end
    lead = "RANDOM WEIGHTS (an architecture check, not a model's figures): " if row.random_weights else ""
    inside = (f"in the model its attention {_parts(att)} (share {row.share_reference:.0%} of {ref}'s forward, "
              f"{row.share_kernel:.0%} of its own), end to end {_parts(e2e)}")
    caveat = f" Caveats: {'; '.join(e2e.caveats)}." if e2e.caveats else ""
    cost = f" Marks around every attention call cost {row.cost_frac:.1%} of a forward (reported, not subtracted)."
    if row.refresh_share is not None:
        less = "" if row.launch is None else f" Without it, its attention in the model is {_parts(row.launch)}."
        cost = (f" {row.refresh_share:.0%} of its attention in the model is its refresh(): q, k, v quantized or copied "
                f"again each call, which the isolated timing does once, in prepare().{less}{cost}")
    if row.isolated is None:
        return f"{lead}{k} vs {ref}: {row.isolated_note}; {inside}.{cost}{caveat}"
    iso = row.isolated
    alone = _direction(iso)
    there = _direction(att)
    if alone == "faster":
        if there != "faster":
            verdict = "did not survive in the model's attention"
        elif iso.time.low is not None and att.time.high is not None and att.time.high < iso.time.low:
            verdict = "survived and grew in the model's attention"
        elif iso.time.high is not None and att.time.low is not None and att.time.low > iso.time.high:
            verdict = "survived in the model's attention but shrank"
        else:
            verdict = "survived in the model's attention (the two intervals overlap)"
        what = f"The isolated speedup {verdict}"
    elif alone == "slower":
        what = "Alone it was slower" + (", and in the model's attention too" if there == "slower" else
                                        f"; in the model's attention {there}")
    else:
        what = "Alone there was no resolved difference" + (f"; in the model's attention it ran {there}"
                                                          if there != "unresolved" else "")
    where = _where(row)
    return (f"{lead}{k} vs {ref}: alone on {row.isolated_input} {_parts(iso)}; {inside}. {what}; end to end "
            f"{e2e.time.value:.3f} against {row.predicted:.3f} predicted from the isolated ratio at that share"
            f"{where}.{cost}{caveat}")


def _where(row: InModelRow) -> str:
    """The largest of the three terms between the predicted and the measured end-to-end ratio (module doc)."""
    iso, att, rest, s = row.isolated, row.attention, row.rest, row.share_reference
    terms = {}
    if None not in (iso.clock, att.clock, iso.cycles, att.cycles):
        terms["clock"] = (s * iso.time.value * math.log(att.clock.value / iso.clock.value),
                          f"the clock: its attention's clock factor was {iso.clock.value:.3f} alone and "
                          f"{att.clock.value:.3f} inside the forward, whose clock all its layers set")
        terms["cycles"] = (s * iso.time.value * math.log(att.cycles.value / iso.cycles.value),
                           f"the attention's cycles: {iso.cycles.value:.3f} alone, {att.cycles.value:.3f} in the model")
    else:
        terms["attention"] = (s * (att.time.value - iso.time.value),
                              f"the attention itself: {iso.time.value:.3f} alone, {att.time.value:.3f} in the model")
    launches = (f"; forwards launched as {row.launch_reference} ({row.reference}) and {row.launch_kernel} ({row.kernel})"
                if row.launch_reference != row.launch_kernel else "")
    if rest is not None:
        terms["rest"] = ((1 - s) * (rest.time.value - 1.0),
                         f"the rest of the forward (its other layers, the copies, launch gaps): {_parts(rest)}{launches}")
    size, text = max(terms.values(), key=lambda term: abs(term[0]))
    moved = row.end_to_end.time.value - row.predicted
    return f" (off by {moved:+.3f}); most of the difference is {text} ({size:+.3f})"
