"""A gate's outcome from its comparisons: one function behind every gated command's line, JSON and exit status.

`bench compare`, `bench commits`, `bench nightly` and the pytest plugin's `--sustained-compare-fail` all end here,
so a row means the same at every entry point:
- a `slower` row (not in a comparison of the same code) fails the gate: exit 1;
- otherwise a row the gate could not judge (`unresolved`, `too few repeats`) is no pass: exit 6 (`UNRESOLVED`),
  unless the team asked for `--unresolved pass` (then exit 0, and the line still names the rows);
- no row at all is no pass either: exit 6, whatever `--unresolved` says;
- a comparison of the same code (one run twice, two revisions of one commit) is an A/A check: it never fails.

>>> from harness.analysis import Comparison, VerdictRule
>>> gate_outcome([Comparison(name_a="A", name_b="B", rule=VerdictRule(), rows=())], threshold=0.02).exit_code
6
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from harness.analysis._compare import Comparison, ComparisonRow
from harness.analysis._interval import FAILING, FASTER_WITHIN, OPEN, SLOWER_WITHIN, percent
from harness.errors import ExitCode

__all__ = ["GateOutcome", "UNRESOLVED_POLICIES", "estimators_text", "gate_outcome", "no_interval_text", "ratio_text",
           "resolution_text"]

UNRESOLVED_POLICIES = ("fail", "pass")


@dataclass(frozen=True, kw_only=True)
class GateOutcome:
    verdict: str  # "fail", "unresolved", "pass", or "nothing compared"
    exit_code: int
    line: str  # `FAIL: ...`, `NOT RESOLVED: ...`, `PASS: ...`
    slower: tuple[tuple[Comparison, ComparisonRow], ...]
    open: tuple[tuple[Comparison, ComparisonRow], ...]


def no_interval_text(row: ComparisonRow) -> str:
    """`no usable interval (2 repeats): add repeats`: what a row says instead of an interval too wide to read."""
    n = row.repeats_a if row.design == "interleaved" else f"{row.repeats_a}+{row.repeats_b}"
    return f"no usable interval ({n} repeats): add repeats"


def ratio_text(r) -> str:
    """A Ratio as a table cell: `1.0039 [1.0033, 1.0045]`, the value alone without an interval, and `2.2787 (no
    usable interval)` where the interval says nothing (`Ratio.usable`)."""
    if r is None:
        return "-"
    if r.low is None:
        return f"{r.value:.4f}"
    if not r.usable:
        return f"{r.value:.4f} (no usable interval)"
    return f"{r.value:.4f} [{r.low:.4f}, {r.high:.4f}]"


def estimators_text(ratios) -> str:
    """The estimators a table's ratios were judged on, for its caption: `ratio of geometric means`, or both names
    where look 2's skipped mean decided some rows (it leaves out pairs far from the median pair)."""
    names = list(dict.fromkeys(r.estimator for r in ratios if r is not None))
    text = " / ".join(names) or "ratio of geometric means"
    if any(r is not None and r.dropped for r in ratios):
        text += " (look 2 leaves out pairs far from the median pair; each row's sentence gives both)"
    return text


def resolution_text(r) -> str:
    """The smallest change a Ratio's interval could call, as a table cell (`-` where it has no usable one)."""
    return f"{percent(r.resolution)} %" if r is not None and r.low is not None and r.usable else "-"


def _change(row: ComparisonRow) -> str:
    t = row.time
    if row.verdict == "too few repeats" or not t.usable:
        return f"{t.change:+.2%}, {no_interval_text(row)}"
    return f"{t.change:+.2%} [{t.low - 1:+.2%}, {t.high - 1:+.2%}]"


def gate_outcome(comparisons: Comparison | Sequence[Comparison], *, threshold: float | None,
                 unresolved: str = "fail",
                 label: Callable[[Comparison, ComparisonRow], str] | None = None) -> GateOutcome | None:
    """The gate over `comparisons` at `threshold` (None: no gate, None returned). `label(cmp, row)` names a row
    in the line (default `kernel on input`). See the module doc for the rules."""
    if threshold is None:
        return None
    if unresolved not in UNRESOLVED_POLICIES:
        raise ValueError(f"unresolved must be one of {UNRESOLVED_POLICIES}, got {unresolved!r}")
    cmps = list(comparisons) if isinstance(comparisons, (list, tuple)) else [comparisons]
    label = label or (lambda cmp, r: f"{r.subject} on {r.input_b}")
    rule_text = cmps[0].rule.threshold_text if cmps else f"{percent(threshold)} %"
    rows = [(c, r) for c in cmps for r in c.rows]
    slow = tuple((c, r) for c, r in rows if r.verdict in FAILING and not c.same_code)
    open_ = tuple((c, r) for c, r in rows if r.verdict in OPEN and not c.same_code)
    notes = [c.same_code for c in cmps if c.same_code]
    floors = [c for c in cmps if c.floor is not None]
    if floors:
        c = floors[0]
        notes.append(f"separate runs: every interval includes a between-run cv of {percent(c.between_cv)} % "
                     f"({c.between_source}), so the smallest threshold they can call same is {percent(c.floor)} %"
                     + (" (tighter than this gate: interleave the sides with bench commits, or give a measured "
                        "--between-runs-cv)" if c.floor > threshold else ""))
    tail = "".join(f" ({n})" for n in notes)
    if slow:
        line = (f"FAIL: {len(slow)} slower beyond the {rule_text} threshold: "
                + "; ".join(f"{label(c, r)} {_change(r)}" for c, r in slow))
        if open_:
            line += "; also not resolved: " + "; ".join(f"{label(c, r)} {_change(r)}" for c, r in open_)
        return GateOutcome(verdict="fail", exit_code=int(ExitCode.REGRESSION), line=line + tail, slower=slow,
                           open=open_)
    if not rows:
        return GateOutcome(verdict="nothing compared", exit_code=int(ExitCode.UNRESOLVED), slower=(), open=(),
                           line=f"NOT RESOLVED: nothing was compared at the {rule_text} threshold, so nothing "
                                f"passed{tail}")
    counts = {}
    for c, r in rows:
        if (c, r) not in open_:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
    judged = ", ".join(f"{n} {v}" for v, n in counts.items())
    if open_:
        what = ("; ".join(f"{label(c, r)} {_change(r)}" + (f" +-{percent(r.time.resolution)} %" if r.time.usable
                                                           and r.verdict == "unresolved" else "") for c, r in open_))
        head = (f"{len(open_)} of {len(rows)} compared could not be judged at the {rule_text} threshold "
                f"(neither slower nor within it): {what}")
        if unresolved == "pass":
            return GateOutcome(verdict="pass", exit_code=int(ExitCode.OK), slower=(), open=open_,
                               line=f"PASS (--unresolved pass): nothing slower found; NOT RESOLVED: {head}"
                                    + (f"; {judged}" if judged else "") + tail)
        return GateOutcome(verdict="unresolved", exit_code=int(ExitCode.UNRESOLVED), slower=(), open=open_,
                           line=f"NOT RESOLVED: {head}" + (f"; {judged}" if judged else "")
                                + f"; exit {int(ExitCode.UNRESOLVED)}: more repeats would resolve them "
                                  f"(--unresolved pass lets such rows pass){tail}")
    within = [v for v in counts if v in (SLOWER_WITHIN, FASTER_WITHIN)]
    return GateOutcome(verdict="pass", exit_code=int(ExitCode.OK), slower=(), open=(),
                       line=f"PASS: nothing slower beyond the {rule_text} threshold ({len(rows)} compared: {judged}"
                            + ("; the within-threshold changes are real, and smaller than it" if within else "")
                            + f"){tail}")
