"""The pytest plugin's `--sustained-compare-fail`: each test's repeats against the saved benchmark's, judged by the
one interval procedure (`harness.analysis.comparison_row`) and rendered as `bench compare` renders a row.

The rows are what the sustained fixture stores in pytest-benchmark's `extra_info["repeats_rows"]` (one dict per
repeat: time, clocks, power, limiter fields).
"""

from __future__ import annotations

from harness.analysis import Comparison, comparison_row, row_sentence
from harness.report._markdown import gate_line

__all__ = ["saved_comparison"]


def saved_comparison(lines: list, saved: dict, *, rule, threshold: float) -> tuple[list[str], str, bool]:
    """(one sentence per test, the gate's line, failed) for `lines` [(nodeid, extra_info)] against `saved`
    {nodeid: saved benchmark}. A gate that judged nothing fails: no saved per-repeat rows, or no test with the
    two repeats a side a verdict needs."""
    rows, sentences = [], []
    for nodeid, extra in lines:
        old = (saved.get(nodeid) or {}).get("extra_info") or {}
        if not old.get("repeats_rows"):
            sentences.append(f"{nodeid}: not compared (the saved benchmark has no per-repeat rows: saved by an older "
                             f"harness, or not by the sustained fixture)")
            continue
        row = comparison_row(kernel=extra.get("kernel") or nodeid, input_a=old.get("input") or "saved",
                             input_b=extra.get("input") or "now", rows_a=old["repeats_rows"],
                             rows_b=extra["repeats_rows"], rule=rule,
                             caveats=tuple(dict.fromkeys((*old.get("caveats", ()), *extra.get("caveats", ())))))
        rows.append(row)
        sentences.append(f"{nodeid}: {row_sentence(row, threshold_source=rule.threshold_source)}")
    cmp = Comparison(name_a="saved", name_b="now", rule=rule, rows=tuple(rows))
    if not [r for r in rows if r.verdict != "too few repeats"]:
        why = ("no test had a saved benchmark with per-repeat rows" if not rows else
               "no test had the 2 repeats a side a verdict needs (--sustained-repeats 2 or more, both sessions)")
        return sentences, f"FAIL: nothing judged by --sustained-compare-fail: {why}", True
    return sentences, gate_line(cmp, threshold=threshold), bool(cmp.slowdowns())
