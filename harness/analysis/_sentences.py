"""One sentence per kernel: how it ran on captured activations against their control of the same shape.

"On captured L15 activations sdpa-cudnn runs 1.8 % slower than on Gaussian 0.1 (95 % interval +1.2 % to
+2.4 %): clock -1.5 %, cycles +0.3 % (in-band clock; both at the power cap)." The figures are those of
`decompose` (time B/A = cycles B/A x clock A/B over repeats, captured = B, control = A) and the limiter
those of `limiter_label`; nothing here computes a statistic of its own.

>>> from harness.analysis import Ratio, comparison_sentence
>>> comparison_sentence(kernel="sdpa-cudnn", input_a="L15:gaussian:0.1", input_b="L15:captured",
...     time=Ratio(value=1.018, low=1.012, high=1.024), cycles=Ratio(value=1.003), clock=Ratio(value=1.015),
...     clock_source="inband", limiter_a="power cap 99%", limiter_b="power cap 100%", verdict="slower")
'On captured L15 activations sdpa-cudnn runs 1.8 % slower than on Gaussian 0.1 (95 % interval +1.2 % to +2.4 %): clock -1.5 %, cycles +0.3 % (in-band clock; both at the power cap).'
"""

from __future__ import annotations

from typing import Sequence

from harness.analysis._compare import SUSTAINED_STATUSES, captured_control_pairs
from harness.analysis._decompose import Ratio, VerdictRule, decompose, limiter_label

__all__ = ["comparison_sentence", "input_row_sentence", "input_sentences"]


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
    return f"{x * 100:+.1f} %"


def _limiters(a: str, b: str) -> str:
    cap_a, cap_b = a.startswith("power cap"), b.startswith("power cap")
    if cap_a and cap_b:
        return "both at the power cap"
    if not a.startswith("none") or not b.startswith("none"):
        return f"captured: {b or 'none'}; control: {a or 'none'}"
    at_max = "NVML at max clock" in a and "NVML at max clock" in b
    return "neither at a limiter" + (", NVML at max clock" if at_max else "")


def comparison_sentence(*, kernel: str, input_a: str, input_b: str, time: Ratio, cycles: Ratio | None,
                        clock: Ratio | None, clock_source: str, limiter_a: str, limiter_b: str, verdict: str,
                        level: float = 0.95, repeats: tuple[int, int] | None = None,
                        min_change: float = VerdictRule.min_change) -> str:
    """The sentence for kernel on input B (captured) against input A (its control); `min_change` is the
    verdict rule's threshold, named when the interval excludes no change but the change is below it."""
    tag_b, words_b = _describe(input_b)
    _tag_a, words_a = _describe(input_a)
    subject = f"On captured {tag_b} activations" if words_b == "captured" else f"On {words_b}"
    if verdict == "too few repeats":
        counts = f" ({repeats[1]} and {repeats[0]} timed)" if repeats else ""
        return (f"{subject} {kernel} cannot be compared with {words_a}: too few repeats{counts} for an interval "
                f"(time {_pct(time.change)}).")
    interval = (f"{level * 100:.0f} % interval {_pct(time.low - 1)} to {_pct(time.high - 1)}"
                if time.low is not None and time.high is not None else "no interval")
    if verdict == "same" and time.excludes_one():
        # An interval of +0.1 % to +0.1 % is not noise: the change is real but under the verdict's threshold.
        head = (f"{subject} {kernel} differs from {words_a} by less than the {min_change * 100:.1f} % threshold "
                f"(time {_pct(time.change)}, {interval})")
    elif verdict == "same":
        head = f"{subject} {kernel} shows no difference beyond noise from {words_a} (time {_pct(time.change)}, {interval})"
    else:
        head = (f"{subject} {kernel} runs {abs(time.change) * 100:.1f} % {verdict} than on {words_a} ({interval})")
    if clock is None or cycles is None:
        return f"{head}: no clock reading on both sides, so no split into clock and cycles ({_limiters(limiter_a, limiter_b)})."
    source = {"inband": "in-band clock", "nvml": "NVML clock"}.get(clock_source, f"{clock_source} clock")
    # The clock factor is clock_A / clock_B; the sentence says how the captured side's clock moved.
    return (f"{head}: clock {_pct(1 / clock.value - 1)}, cycles {_pct(cycles.change)} "
            f"({source}; {_limiters(limiter_a, limiter_b)}).")


def input_row_sentence(row, *, level: float = 0.95, min_change: float = VerdictRule.min_change) -> str:
    """The sentence of one `ComparisonRow` (from `compare_inputs`)."""
    return comparison_sentence(kernel=row.kernel, input_a=row.input_a, input_b=row.input_b, time=row.time,
                               cycles=row.cycles, clock=row.clock, clock_source=row.clock_source,
                               limiter_a=row.limiter_a, limiter_b=row.limiter_b, verdict=row.verdict, level=level,
                               repeats=(row.repeats_a, row.repeats_b), min_change=min_change)


def input_sentences(measurements: Sequence[dict], *, rule: VerdictRule = VerdictRule(),
                    max_clock_mhz: float | None = None) -> list[str]:
    """One sentence per kernel x captured layer, from a run's measurement rows (plain dicts, as
    `run_sustained` returns them; no polars needed, so it runs on the GPU machine too).

    Each `L<n>:captured` input is paired with every other input of its layer tag (its controls).
    """
    timed = [r for r in measurements if r.get("status") in SUSTAINED_STATUSES and r.get("time_ns")]
    labels = list(dict.fromkeys(r["input_label"] for r in timed))
    out = []
    for label_a, label_b in captured_control_pairs(labels):
        kernels = list(dict.fromkeys(r["kernel"] for r in timed if r["input_label"] == label_b))
        for kernel in kernels:
            ra = [r for r in timed if r["input_label"] == label_a and r["kernel"] == kernel]
            rb = [r for r in timed if r["input_label"] == label_b and r["kernel"] == kernel]
            if not ra:
                continue
            both = ra + rb
            source = ("inband" if all(r.get("inband_clock_mhz") for r in both)
                      else "nvml" if all(r.get("sm_clock_mhz") for r in both) else "none")
            col = {"inband": "inband_clock_mhz", "nvml": "sm_clock_mhz"}.get(source)
            d = decompose(time_a=[r["time_ns"] for r in ra], time_b=[r["time_ns"] for r in rb],
                          clock_a=[r[col] for r in ra] if col else None, clock_b=[r[col] for r in rb] if col else None,
                          rule=rule)
            out.append(comparison_sentence(
                kernel=kernel, input_a=label_a, input_b=label_b, time=d.time, cycles=d.cycles, clock=d.clock,
                clock_source=source, limiter_a=limiter_label(ra, max_clock_mhz=max_clock_mhz),
                limiter_b=limiter_label(rb, max_clock_mhz=max_clock_mhz), verdict=d.verdict, level=rule.level,
                repeats=(len(ra), len(rb)), min_change=rule.min_change,
            ))
    return out
