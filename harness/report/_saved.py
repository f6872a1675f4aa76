"""The pytest plugin's `--sustained-compare-fail`: each test's repeats against the saved benchmark's, judged by the
one interval procedure (`harness.analysis.comparison_row`) and rendered as `bench compare` renders a row.

The rows are what the sustained fixture stores in pytest-benchmark's `extra_info["repeats_rows"]` (one dict per
repeat: time, clocks, power, limiter fields).
"""

from __future__ import annotations

from harness.analysis import Comparison, comparison_row, gate_outcome, row_sentence, rule_for

__all__ = ["saved_comparison"]


def saved_comparison(lines: list, saved: dict, *, rule, threshold: float, unresolved: str = "fail",
                     same_code: str = "") -> tuple[list[str], str, bool]:
    """(one sentence per test, the gate's line, failed) for `lines` [(nodeid, extra_info)] against `saved`
    {nodeid: saved benchmark}, by the rules of every gate (`harness.analysis.gate_outcome`): the saved session and
    this one are separate runs (their intervals include the between-run variance), CPU timings follow the CPU
    rule, and `same_code` (the two sessions ran one commit) makes it an A/A check that never fails. A gate that
    judged nothing fails: no saved per-repeat rows, or no test with an interval to judge by."""
    rows, sentences = [], []
    caveats_all: list[str] = []
    between, source = 0.0, ""
    for nodeid, extra in lines:
        old = (saved.get(nodeid) or {}).get("extra_info") or {}
        if not old.get("repeats_rows"):
            sentences.append(f"{nodeid}: not compared (the saved benchmark has no per-repeat rows: saved by an older "
                             f"harness, or not by the sustained fixture)")
            continue
        caveats = tuple(dict.fromkeys((*old.get("caveats", ()), *extra.get("caveats", ()))))
        caveats_all += caveats
        row_rule = rule_for(rule, caveats)
        # Separate sessions: the between-run variance holds for the same code too (an A/A check shows it).
        between, source = row_rule.between_runs(extra.get("device") or old.get("device"))
        row = comparison_row(kernel=extra.get("kernel") or nodeid, input_a=old.get("input") or "saved",
                             input_b=extra.get("input") or "now", rows_a=old["repeats_rows"],
                             rows_b=extra["repeats_rows"], rule=row_rule, caveats=caveats, between_cv=between)
        rows.append(row)
        sentences.append(f"{nodeid}: {row_sentence(row, threshold_source=row_rule.threshold_source)}")
    cmp = Comparison(name_a="saved", name_b="now", rule=rule_for(rule, tuple(dict.fromkeys(caveats_all))),
                     rows=tuple(rows), same_code=same_code, between_cv=between, between_source=source)
    if not rows:
        return sentences, ("NOT RESOLVED: nothing judged by --sustained-compare-fail: no test had a saved benchmark "
                           "with per-repeat rows"), True
    outcome = gate_outcome(cmp, threshold=threshold, unresolved=unresolved)
    return sentences, outcome.line, outcome.exit_code != 0
