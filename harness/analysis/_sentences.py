"""One sentence per kernel: how it ran on captured activations against their control of the same shape.

"On captured L15 activations sdpa-cudnn runs 1.8 % slower than on Gaussian 0.1, beyond the threshold (95 % Welch t interval +1.2 %
to +2.4 %; ratio of geometric means over 3+3 repeats; threshold 0.5 % (default)): clock -1.5 %, cycles +0.3 %
(in-band clock; both at the power cap)." The figures are those of `comparison_row` (the one interval
procedure: captured = B, control = A, measured one configuration after the other, so independent) and the
limiter those of `limiter_label`; nothing here computes a statistic of its own. A row's caveats (CPU timings, a
quick protocol, unsettled repeats) are named in its sentence.

>>> from harness.analysis import Ratio, ComparisonRow, input_row_sentence
>>> row = ComparisonRow(kernel="sdpa-cudnn", input_a="L15:gaussian:0.1", input_b="L15:captured", shape="",
...     repeats_a=3, repeats_b=3, time_a_ns=1.0, time_b_ns=1.018, clock_source="inband",
...     time=Ratio(value=1.018, low=1.012, high=1.024, method="Welch t", level=0.95), cycles=Ratio(value=1.003),
...     clock=Ratio(value=1.015), clock_a_mhz=1500.0, clock_b_mhz=1478.0, power_a_w=690.0, power_b_w=691.0,
...     limiter_a="power cap 99%", limiter_b="power cap 100%", verdict="slower")
>>> input_row_sentence(row)
'On captured L15 activations sdpa-cudnn runs 1.8 % slower than on Gaussian 0.1, beyond the threshold (95 % Welch t interval +1.2 % to +2.4 %; ratio of geometric means over 3+3 repeats; threshold 0.5 % (default)): clock -1.5 %, cycles +0.30 % (in-band clock; both at the power cap).'
"""

from __future__ import annotations

from typing import Sequence

from harness.analysis._caveats import rule_for
from harness.analysis._compare import SUSTAINED_STATUSES, ComparisonRow, captured_control_pairs, comparison_row
from harness.analysis._interval import FASTER_WITHIN, SLOWER_WITHIN, VerdictRule, percent
from harness.analysis._outcome import no_interval_text

__all__ = ["input_row_sentence", "input_rows", "input_sentences"]


def _describe(label: str) -> tuple[str, str]:
    """(layer tag, input in words): `L15:gaussian:0.1` -> ("L15", "Gaussian 0.1")."""
    tag, sep, what = label.partition(":")
    if not (sep and tag[:1] == "L" and tag[1:].isdigit()):
        tag, what = "", label
    tag = f"L{int(tag[1:])}" if tag else ""
    kind, _, arg = what.partition(":")
    words = {"gaussian": f"Gaussian {arg}" if arg != "matched" else "Gaussian matched to the capture's std",
             "zeros": "zeros", "constant": f"constant {arg}", "randbits": "random bits"}.get(kind, what)
    return tag, words


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %" if abs(x) >= 0.0095 else f"{x * 100:+.2f} %"


def _limiters(a: str, b: str) -> str:
    cap_a, cap_b = a.startswith("power cap"), b.startswith("power cap")
    if cap_a and cap_b:
        return "both at the power cap"
    if not a.startswith("none") or not b.startswith("none"):
        return f"captured: {b or 'none'}; control: {a or 'none'}"
    at_max = "NVML at max clock" in a and "NVML at max clock" in b
    return "neither at a limiter" + (", NVML at max clock" if at_max else "")


def input_row_sentence(row: ComparisonRow, *, threshold_source: str = "default") -> str:
    """The sentence of one `ComparisonRow` of input B (captured) against input A (its control)."""
    tag_b, words_b = _describe(row.input_b)
    _tag_a, words_a = _describe(row.input_a)
    subject = f"On captured {tag_b} activations" if words_b == "captured" else f"On {words_b}"
    caveats = f" [{'; '.join(row.caveats)}]" if row.caveats else ""
    time = row.time
    if row.verdict == "too few repeats" or not time.usable:
        return (f"{subject} {row.kernel} cannot be compared with {words_a}: {no_interval_text(row)} (time "
                f"{_pct(time.change)}){caveats}.")
    judged = (f"threshold {percent(row.threshold)} % ({threshold_source})" if row.threshold is not None else
              f"no verdict drawn ({threshold_source})")
    how = (f"{time.level * 100:.0f} % {time.method} interval {_pct(time.low - 1)} to {_pct(time.high - 1)}; "
           f"{time.estimator} over {row.repeats_a}+{row.repeats_b} repeats; {judged}")
    if row.verdict in (SLOWER_WITHIN, FASTER_WITHIN):
        # An interval of +0.1 % to +0.1 % is not noise: the change is real but under the verdict's threshold.
        head = f"{subject} {row.kernel} differs from {words_a} by less than the threshold (time {_pct(time.change)}, {how})"
    elif row.verdict == "same":
        head = f"{subject} {row.kernel} shows no difference beyond noise from {words_a} (time {_pct(time.change)}, {how})"
    elif row.verdict == "not judged":
        head = (f"{subject} {row.kernel} is not judged against {words_a}: CPU timings move with the host's load by "
                f"more than a kernel change (time {_pct(time.change)}, {how}; --fail-on-slowdown judges them)")
    elif row.verdict == "unresolved":
        head = (f"{subject} {row.kernel} cannot be told apart from {words_a} at the threshold: a change of its size "
                f"can be neither shown nor ruled out (time {_pct(time.change)}, {how}; smallest change it could call "
                f"{percent(time.resolution)} %)")
    else:
        head = (f"{subject} {row.kernel} runs {abs(time.change) * 100:.1f} % {row.verdict} than on {words_a}, beyond "
                f"the threshold ({how})")
    head += caveats
    if row.clock is None or row.cycles is None:
        return (f"{head}: no clock reading on both sides, so no split into clock and cycles "
                f"({_limiters(row.limiter_a, row.limiter_b)}).")
    source = {"inband": "in-band clock", "nvml": "NVML clock"}.get(row.clock_source, f"{row.clock_source} clock")
    # The clock factor is clock_A / clock_B; the sentence says how the captured side's clock moved.
    return (f"{head}: clock {_pct(1 / row.clock.value - 1)}, cycles {_pct(row.cycles.change)} "
            f"({source}; {_limiters(row.limiter_a, row.limiter_b)}).")


def input_rows(measurements: Sequence[dict], *, rule: VerdictRule = VerdictRule(),
               max_clock_mhz: float | None = None, caveats: Sequence[str] = (),
               design: str = "independent", pilot: int | None = None) -> list[ComparisonRow]:
    """Each kernel on each `L<n>:captured` input against every other input of its layer tag (its controls), as
    comparison rows, from a run's measurement rows (plain dicts, as `run_sustained` returns them; no polars
    needed, so it runs on the GPU machine too). `caveats` are the run's (`run_caveats(info)`), `design` how it
    timed its inputs (`inputs_design(info)`), `pilot` its adaptive pilot (`two_stage_pilot(info)`)."""
    timed = [r for r in measurements if r.get("status") in SUSTAINED_STATUSES and r.get("time_ns")]
    labels = list(dict.fromkeys(r["input_label"] for r in timed))
    rule = rule_for(rule, caveats)
    out = []
    for label_a, label_b in captured_control_pairs(labels):
        for kernel in dict.fromkeys(r["kernel"] for r in timed if r["input_label"] == label_b):
            ra = [r for r in timed if r["input_label"] == label_a and r["kernel"] == kernel]
            rb = [r for r in timed if r["input_label"] == label_b and r["kernel"] == kernel]
            if ra:
                out.append(comparison_row(kernel=kernel, input_a=label_a, input_b=label_b, rows_a=ra, rows_b=rb,
                                          rule=rule, caveats=caveats, max_clock_mhz=max_clock_mhz, design=design,
                                          pilot=pilot))
    return out


def input_sentences(measurements: Sequence[dict], *, rule: VerdictRule = VerdictRule(), **kw) -> list[str]:
    """One sentence per row of `input_rows` (the same arguments)."""
    source = rule_for(rule, kw.get("caveats", ())).threshold_source
    return [input_row_sentence(row, threshold_source=source) for row in input_rows(measurements, rule=rule, **kw)]
