"""A comparison in words: one sentence per row and the warnings a reader needs first.

All ratios read B relative to A (time B/A, cycles B/A, clock B/A), so "29.7 % faster" means B took 29.7 %
less time per launch (time B/A = 0.703). One clock basis per row, named in the sentence: the in-band clock
(SM cycles counted per ns by the probe) where both sides have it, since ncu's counted cycles follow it
(`clock_crosscheck`); NVML's SM clock otherwise. Power and limiter of each side come with it.

Nothing here computes a statistic: the verdict, the interval and the smallest change the comparison could call
are the row's own (`_interval`, the one procedure), so the table, the sentence, the JSON and the exit code say
the same thing. Each sentence names its estimator (the ratio of geometric means over repeats), its interval
method and level, the threshold the verdict applied and where it came from, and every caveat of the row (CPU
timings, a quick protocol, unsettled repeats) before a reader can take a difference at face value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.analysis._caveats import is_full_protocol
from harness.analysis._compare import (
    SUSTAINED_STATUSES,
    Comparison,
    ComparisonRow,
    same_run,
    shape_text,
)
from harness.analysis._interval import FASTER_WITHIN, SLOWER_WITHIN, percent
from harness.analysis._outcome import no_interval_text

__all__ = ["Explanation", "comparison_warnings", "explain_comparison", "interval_text", "row_sentence"]

_SAME = 0.0005  # a factor within 0.05 % reads as "the same"


@dataclass(frozen=True, kw_only=True)
class Explanation:
    basis: str  # which clock the sentences use, in words
    sentences: tuple[str, ...]
    warnings: tuple[str, ...]

    def lines(self) -> list[str]:
        return [f"WARNING: {w}" for w in self.warnings] + list(self.sentences) + [self.basis]


def _pct(x: float) -> str:
    # Two decimals below 1 %: a 0.39 % slowdown must not read "0.4 %" against a 0.3 % gate, nor 0.04 % as "0.0 %".
    return f"{abs(x) * 100:.1f} %" if abs(x) >= 0.0095 else f"{abs(x) * 100:.2f} %"


def _limiter(text: str) -> str:
    # limiter_label says "none (NVML at max clock)": NVML's reading, a second clock basis; keep the fact only.
    return "no limiter" if not text or text.startswith("none") else text


def _side(name: str, mhz, watts, limiter: str, basis: str) -> str:
    clock = f"{mhz:.0f} MHz {basis}" if mhz else "clock not read"
    power = f"{watts:.0f} W" if watts else "power not read"
    return f"{name}: {clock}, {power}, {_limiter(limiter)}"


def _why(row: ComparisonRow) -> str:
    cap_a, cap_b = "power cap" in row.limiter_a, "power cap" in row.limiter_b
    if cap_a and cap_b:
        return " (both sides at the power cap)"
    if cap_b:
        return " (B reached the power cap)"
    if cap_a:
        return " (A was at the power cap)"
    return ""


def _factors(row: ComparisonRow, faster: bool) -> str:
    cyc = row.cycles.value - 1
    clk = 1 / row.clock.value - 1  # clock B/A
    c_word = "the same cycles" if abs(cyc) < _SAME else f"{_pct(cyc)} {'fewer' if cyc < 0 else 'more'} cycles"
    k_word = "the same clock" if abs(clk) < _SAME else f"a {_pct(clk)} {'lower' if clk < 0 else 'higher'} clock"
    helps_c = (cyc < 0) == faster and abs(cyc) >= _SAME
    helps_k = (clk > 0) == faster and abs(clk) >= _SAME
    if helps_c and helps_k:
        return f"{c_word} and {k_word}"
    if helps_c:
        give = "part given back by" if faster else "partly offset by"
        return f"{c_word}, {give} {k_word}" if abs(clk) >= _SAME else c_word
    if helps_k:
        return f"{k_word}, despite {c_word}" if abs(cyc) >= _SAME else k_word
    return f"{c_word} and {k_word}"


def interval_text(row: ComparisonRow) -> str:
    """`time B/A 1.0039 [1.0033, 1.0045]: ratio of geometric means over 5 interleaved pairs of repeats, 95 % paired
    t (look 1 of 2) interval, smallest change it could call 0.06 %, threshold 0.3 %` (its source is the caller's
    to add). The estimate named is the one judged: at look 2 the skipped mean, with the pairs it left out."""
    t = row.time
    n = (f"{row.repeats_a} interleaved pairs of" if row.design == "interleaved"
         else f"{row.repeats_a}+{row.repeats_b}")
    head = f"time B/A {t.value:.4f}"
    estimator = t.estimator + (f" ({t.dropped} pair{'s' if t.dropped != 1 else ''} far from the median left out; "
                               f"the ratio of geometric means over every pair is {t.all_pairs:.4f})"
                               if t.dropped and t.all_pairs is not None else "")
    if t.low is None or not t.usable:
        return f"{head}: {estimator} over {n} repeats, {no_interval_text(row)}"
    level = f"{t.level * 100:.0f} %" if t.level else ""
    judged = f"threshold {percent(row.threshold)} %" if row.threshold is not None else "no verdict drawn"
    eq = (f", equivalence interval [{t.eq_low:.4f}, {t.eq_high:.4f}]" if t.eq_low is not None and row.threshold
          is not None else "")
    return (f"{head} [{t.low:.4f}, {t.high:.4f}]: {estimator} over {n} repeats, {level} {t.method} "
            f"interval{eq}, smallest change it could call {percent(t.resolution)} %, {judged}")


def _head(row: ComparisonRow, threshold_source: str) -> str:
    t = row.time.value - 1
    threshold = f"{percent(row.threshold)} %"
    if row.verdict in ("faster", "slower"):
        return f"B is {_pct(t)} {row.verdict}, beyond the {threshold} threshold"
    if row.verdict in (SLOWER_WITHIN, FASTER_WITHIN):
        word = "slower" if row.verdict == SLOWER_WITHIN else "faster"
        return (f"B is {_pct(t)} {word}, within the {threshold} threshold (a real change, shown to be smaller than "
                f"it)")
    if row.verdict == "same":
        return f"B is the same within the {threshold} threshold ({t * 100:+.2f} %; its equivalence interval lies inside it)"
    if row.verdict == "not judged":
        return (f"not judged ({t * 100:+.2f} %): CPU timings move with the host's load by more than a kernel change, "
                f"so no verdict is drawn without a threshold asked for (--fail-on-slowdown)")
    if row.verdict == "unresolved":
        return (f"not resolved ({t * 100:+.2f} %): whether it changed by the {threshold} threshold cannot be told "
                f"from noise; more repeats would resolve it")
    return f"no verdict ({t * 100:+.1f} %; {no_interval_text(row)})"


def row_sentence(row: ComparisonRow, *, threshold_source: str = "default") -> str:
    """One row in words, B relative to A, from the row's own verdict and interval."""
    where = f"{row.subject} on {row.input_b}" + (f" (A: {row.input_a})" if row.input_a != row.input_b else "")
    text = f"{where}: {_head(row, threshold_source)}"
    if row.caveats:
        text += f" [{'; '.join(row.caveats)}]"
    t = row.time.value - 1
    if row.cycles is not None and row.clock is not None:
        text += f": {_factors(row, faster=t < 0)}{_why(row)}"
    basis = {"inband": "in-band", "nvml": "NVML"}.get(row.clock_source, "")
    stats = interval_text(row) + f" ({threshold_source})"
    text += f". {stats[0].upper()}{stats[1:]}. " + "; ".join(_side(n, mhz, w, lim, basis) for n, mhz, w, lim in (
        ("A", row.clock_a_mhz, row.power_a_w, row.limiter_a), ("B", row.clock_b_mhz, row.power_b_w, row.limiter_b)))
    return text + "."


def explain_comparison(cmp: Comparison, run_a=None, run_b=None) -> Explanation:
    """Sentences and warnings for `cmp` (from `compare_runs(run_a, run_b)`; the runs give the provenance the
    warnings read)."""
    warnings = []
    if cmp.same_code:
        warnings.append(f"{cmp.same_code}.")
    if run_a is not None and run_b is not None:
        warnings += [w for w in comparison_warnings(run_a, run_b) if not (cmp.same_code and "same run" in w)]
    sentences = [row_sentence(row, threshold_source=cmp.rule.threshold_source) for row in cmp.rows]
    unresolved = cmp.open_rows()
    if unresolved:
        widths = [r.time.resolution for r in unresolved if r.time.usable]
        reach = f" (their intervals reach +-{percent(max(widths))} %)" if widths else ""
        warnings.append(f"{len(unresolved)} of {len(cmp.rows)} row(s) not resolved at the {cmp.rule.threshold_text} "
                        f"threshold{reach}: neither slower nor within the threshold can be said of them; more repeats "
                        f"would resolve them.")
    if cmp.floor is not None:
        warnings.append(f"A and B are separate runs: every interval includes a between-run cv of "
                        f"{percent(cmp.between_cv)} % ({cmp.between_source}), so the smallest threshold this "
                        f"comparison can call same is {percent(cmp.floor)} %.")
    sources = {r.clock_source for r in cmp.rows}
    basis = ("Clock basis: in-band (SM cycles counted per ns by the probe), the clock ncu's counted cycles follow."
             if sources == {"inband"} else
             "Clock basis: NVML's SM clock (a side lacks in-band readings; NVML reads ~9-13 % above the clock the "
             "SMs count under load, so cycles read high on both sides)." if sources == {"nvml"} else
             f"Clock basis per row: {', '.join(sorted(sources))}.")
    basis += f" Ratios are B relative to A; faster = less time per launch. Verdict: {cmp.rule.describe()}."
    if len(sources) > 1:
        warnings.append("rows use different clock bases (in-band where both sides have the probe, NVML elsewhere).")
    return Explanation(basis=basis, sentences=tuple(sentences), warnings=tuple(warnings))


def _json(info: dict, key: str) -> dict:
    try:
        return json.loads(info.get(key) or "{}") or {}
    except ValueError:
        return {}


def _shapes(run) -> set[str]:
    import polars as pl

    rows = run.measurements.filter(pl.col("status").is_in(list(SUSTAINED_STATUSES))).to_dicts()
    return {shape_text(r) for r in rows if r.get("batch") is not None}


def comparison_warnings(run_a, run_b) -> list[str]:
    """What makes A vs B not a like-for-like comparison, each in one sentence (empty: nothing found)."""
    a, b = run_a.info, run_b.info
    out = []
    if same_run(run_a, run_b):
        out.append(f"A and B are the same run ({a.get('run_id')}): every ratio is 1 by construction, so 'same' "
                   f"says nothing about noise. Compare two runs.")
    pa, pb = _json(a, "protocol_json"), _json(b, "protocol_json")
    diff = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    if diff:
        kind = lambda p: "full" if is_full_protocol(p) else "quick/loosened"
        out.append(f"protocols differ (A {kind(pa)}, B {kind(pb)}): " + ", ".join(
            f"{k} {pa.get(k)} vs {pb.get(k)}" for k in diff) + ". A looser settle rule or a shorter window "
            "changes the figures by itself.")
    sa, sb = _shapes(run_a), _shapes(run_b)
    if sa != sb:
        out.append(f"shapes differ: A has {', '.join(sorted(sa)) or 'none'}; B has {', '.join(sorted(sb)) or 'none'}"
                   f" (only inputs of the same shape are compared).")
    if a.get("device_name") != b.get("device_name"):
        out.append(f"devices differ: {a.get('device_name')} vs {b.get('device_name')}.")
    elif a.get("pci_bus_id") != b.get("pci_bus_id") or _gpu_uuid(a) != _gpu_uuid(b):
        out.append(f"same model, different GPU: PCI {a.get('pci_bus_id')} vs {b.get('pci_bus_id')}; GPUs of one "
                   f"model differ by a few % at the power cap.")
    if a.get("driver") != b.get("driver") or a.get("runtime") != b.get("runtime"):
        out.append(f"driver or runtime differs: {a.get('driver')} / {a.get('runtime')} vs {b.get('driver')} / "
                   f"{b.get('runtime')}.")
    va, vb = _json(a, "versions_json"), _json(b, "versions_json")
    harness = [(k, x, y) for k, x, y in (
        ("harness version", a.get("harness_version"), b.get("harness_version")),
        ("harness git", a.get("git_commit"), b.get("git_commit")),
        ("harness tree", va.get("harness_tree_sha256"), vb.get("harness_tree_sha256"))) if x != y]
    soft = [(k, va.get(k), vb.get(k)) for k in ("torch", "triton", "cudnn", "torch_cuda") if va.get(k) != vb.get(k)]
    if harness or soft:
        out.append("versions differ: " + ", ".join(f"{k} {str(x)[:12]} vs {str(y)[:12]}" for k, x, y in harness + soft)
                   + ".")
    return out


def _gpu_uuid(info: dict):
    return info.get("gpu_uuid") or _json(info, "versions_json").get("gpu_uuid")
