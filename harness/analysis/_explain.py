"""A comparison in words: one sentence per row, the warnings a reader needs first, and an interval that is
honest with few repeats.

All ratios read B relative to A (time B/A, cycles B/A, clock B/A), so "29.7 % faster" means B took 29.7 %
less time per launch (time B/A = 0.703). One clock basis per row, named in the sentence: the in-band clock
(SM cycles counted per ns by the probe) where both sides have it, since ncu's counted cycles follow it
(`clock_crosscheck`); NVML's SM clock otherwise. Power and limiter of each side come with it.

Interval rule for few repeats: a bootstrap over 2 or 3 repeats a side resamples a handful of distinct
values, so its interval is about the spread of those values and overstates confidence. The verdict here
uses the wider of that bootstrap interval and a Welch t interval on log time per repeat (Welch-Satterthwaite
degrees of freedom), which with 2 repeats a side has t ~ 4.3 or more. A verdict needs at least
`MIN_REPEATS_FOR_VERDICT` repeats a side: below that there is no spread to judge by.

>>> t_quantile(0.975, 2.0) > 4.30 and t_quantile(0.975, 1e6) < 1.961
True
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.analysis._compare import (
    SUSTAINED_STATUSES,
    Comparison,
    ComparisonRow,
    shape_text,
)

__all__ = ["MIN_REPEATS_FOR_VERDICT", "Explanation", "comparison_warnings", "explain_comparison",
           "honest_interval", "is_full_protocol", "row_sentence", "t_quantile"]

MIN_REPEATS_FOR_VERDICT = 2
_SAME = 0.0005  # a factor within 0.05 % reads as "the same"
# Settle-rule fields whose looser values make the rows not sustained figures (`--quick` loosens all of them).
_FULL = {"settle_chunk_tol": 0.003, "settle_trend_tol": 0.003}
_FULL_MIN = {"settle_trend_window_s": 2.0, "warmin_min_s": 1.0}


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t (df may be fractional, as Welch's is); bisection on a Simpson-integrated CDF."""
    if not 0.5 <= p < 1 or not df > 0:
        raise ValueError("t_quantile needs 0.5 <= p < 1 and df > 0")
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:  # P(T <= x) for x >= 0, integrated in u = atan(t) to keep the tail finite
        n, hi = 400, math.atan(x)
        f = lambda u: c * (1 + math.tan(u) ** 2 / df) ** (-(df + 1) / 2) / math.cos(u) ** 2
        h = hi / n
        s = f(0) + f(hi) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n))
        return 0.5 + s * h / 3

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def honest_interval(time_a: Sequence[float], time_b: Sequence[float], *, level: float = 0.95):
    """Welch t interval of time B/A (ratio of geometric means), or None with fewer than 2 repeats a side."""
    la, lb = [math.log(t) for t in time_a], [math.log(t) for t in time_b]
    na, nb = len(la), len(lb)
    if min(na, nb) < 2:
        return None
    ma, mb = sum(la) / na, sum(lb) / nb
    va = sum((x - ma) ** 2 for x in la) / (na - 1) / na
    vb = sum((x - mb) ** 2 for x in lb) / (nb - 1) / nb
    d = mb - ma
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(d), math.exp(d)
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    half = t_quantile((1 + level) / 2, df) * se
    return math.exp(d - half), math.exp(d + half)


def is_full_protocol(protocol: dict | None) -> bool:
    """True when the settle rule is no looser than the default protocol's (`--quick` is looser)."""
    if not protocol:
        return False
    tight = all(protocol.get(k, v) <= v for k, v in _FULL.items())
    long = all(protocol.get(k, v) >= v for k, v in _FULL_MIN.items())
    return tight and long


@dataclass(frozen=True, kw_only=True)
class Explanation:
    basis: str  # which clock the sentences use, in words
    sentences: tuple[str, ...]
    warnings: tuple[str, ...]

    def lines(self) -> list[str]:
        return [f"WARNING: {w}" for w in self.warnings] + list(self.sentences) + [self.basis]


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.1f} %"


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


def row_sentence(row: ComparisonRow, *, verdict: str, interval=None) -> str:
    """One row in words, B relative to A; `verdict` and `interval` (low, high of time B/A) from `explain_comparison`."""
    where = f"{row.kernel} on {row.input_b}" + (f" (A: {row.input_a})" if row.input_a != row.input_b else "")
    t = row.time.value - 1
    iv = f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else ""
    stats = f"time B/A {row.time.value:.4f}{iv} over {row.repeats_a}+{row.repeats_b} repeats"
    if verdict in ("faster", "slower"):
        head = f"B is {_pct(t)} {verdict}"
    elif verdict == "same":
        head = f"B is the same within noise ({t * 100:+.1f} %; the interval includes 1)"
    else:
        head = (f"no verdict ({t * 100:+.1f} %; fewer than {MIN_REPEATS_FOR_VERDICT} repeats a side give no "
                f"spread to judge by)")
    text = f"{where}: {head}"
    if row.cycles is not None and row.clock is not None:
        text += f": {_factors(row, faster=t < 0)}{_why(row)}"
    basis = {"inband": "in-band", "nvml": "NVML"}.get(row.clock_source, "")
    text += f". {stats[0].upper()}{stats[1:]}. " + "; ".join(_side(n, mhz, w, lim, basis) for n, mhz, w, lim in (
        ("A", row.clock_a_mhz, row.power_a_w, row.limiter_a), ("B", row.clock_b_mhz, row.power_b_w, row.limiter_b)))
    return text + "."


def _times(frame, kernel: str, label: str) -> list[float]:
    import polars as pl

    f = frame.filter((pl.col("kernel") == kernel) & (pl.col("input_label") == label)
                     & pl.col("status").is_in(list(SUSTAINED_STATUSES)) & pl.col("time_ns").is_not_null())
    return f["time_ns"].to_list()


def _verdict(row: ComparisonRow, ta, tb, rule):
    if min(len(ta), len(tb)) < MIN_REPEATS_FOR_VERDICT:
        return "too few repeats", None
    t_iv = honest_interval(ta, tb, level=rule.level)
    lo = min(t_iv[0], row.time.low if row.time.low is not None else t_iv[0])
    hi = max(t_iv[1], row.time.high if row.time.high is not None else t_iv[1])
    if (lo > 1 or hi < 1) and abs(row.time.change) > rule.min_change:
        return ("slower" if row.time.value > 1 else "faster"), (lo, hi)
    return "same", (lo, hi)


def explain_comparison(cmp: Comparison, run_a=None, run_b=None) -> Explanation:
    """Sentences and warnings for `cmp` (from `compare_runs(run_a, run_b)`; runs give the per-repeat times and
    the provenance the warnings read; without them the sentences use the comparison's own verdicts)."""
    sentences, warnings = [], list(comparison_warnings(run_a, run_b)) if run_a is not None else []
    for row in cmp.rows:
        verdict, iv = row.verdict, ((row.time.low, row.time.high) if row.time.low is not None else None)
        if run_a is not None and run_b is not None:
            ta, tb = _times(run_a.measurements, row.kernel, row.input_a), _times(run_b.measurements, row.kernel,
                                                                                 row.input_b)
            verdict, iv = _verdict(row, ta, tb, cmp.rule)
            if verdict != row.verdict:
                warnings.append(
                    f"{row.kernel} on {row.input_b}: the bootstrap verdict '{row.verdict}' over {len(ta)}+{len(tb)} "
                    f"repeats overstates confidence; with the Welch t bound the interval is [{iv[0]:.4f}, "
                    f"{iv[1]:.4f}], verdict '{verdict}'. Add repeats (--repeats) for a verdict.")
        sentences.append(row_sentence(row, verdict=verdict, interval=iv))
    sources = {r.clock_source for r in cmp.rows}
    basis = ("Clock basis: in-band (SM cycles counted per ns by the probe), the clock ncu's counted cycles follow."
             if sources == {"inband"} else
             "Clock basis: NVML's SM clock (a side lacks in-band readings; NVML reads ~9-13 % above the clock the "
             "SMs count under load, so cycles read high on both sides)." if sources == {"nvml"} else
             f"Clock basis per row: {', '.join(sorted(sources))}.")
    basis += (f" Ratios are B relative to A; faster = less time per launch. Verdict: the {cmp.rule.level:.0%} "
              f"interval of time B/A, the wider of the bootstrap and a Welch t bound on log time, excludes 1 and "
              f"|B/A - 1| > {cmp.rule.min_change:.1%}; at least {MIN_REPEATS_FOR_VERDICT} repeats a side.")
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
    same_path = run_a.path.resolve() == run_b.path.resolve() if getattr(run_a, "path", None) else False
    if same_path or (a.get("run_id") and a.get("run_id") == b.get("run_id")):
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
