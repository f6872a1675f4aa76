"""The schedule of `bench commits`: the order of the revisions in each pair, when look 2 is needed, and whether
one more pair fits in the time limit. Pure functions of the times measured so far.

>>> pair_order(3, 1), next_pair_fits(100.0, 5, 120.0)
([1, 2, 0], True)
"""

from __future__ import annotations

import math

from harness.analysis import Plan, VerdictRule, paired_decision
from harness.config import SustainedProtocol

__all__ = ["look_one", "measure_timeout", "next_pair_fits", "pair_order", "plan_text"]


def measure_timeout(p: SustainedProtocol) -> float:
    # A repeat is idle + warm-in (capped) + window; the rest covers launch estimation and slow first chunks.
    return p.idle_before_config_s + p.warmin_cap_s + p.window_s + 300.0


def pair_order(n: int, rep: int) -> list[int]:
    return [(i + rep) % n for i in range(n)]


def plan_text(p: SustainedProtocol) -> str:
    if p.until_ci is None:
        return f"{p.repeats} interleaved repeat(s), one look"
    return (f"a pilot of {p.repeats} interleaved pairs (look 1), then only if a revision is unresolved there, "
            f"pairs up to {p.max_repeats} (look 2)")


def look_one(times: dict[int, list[float]], p: SustainedProtocol, rule: VerdictRule | None,
             width_target: float | None) -> list[str]:
    """Look 1's verdict of every later revision against the first, on the pilot's pairs (what decides whether
    look 2 is needed: `harness.analysis.paired_decision`, the procedure the final rows use). `width_target`: the
    half-width every revision must also reach (--until-ci as typed), None for none."""
    rule = rule or VerdictRule()
    plan = Plan(pilot=p.repeats, total=p.max_repeats if p.max_repeats and p.max_repeats > p.repeats else None)
    out = []
    for i in range(1, len(times)):
        k = min(len(times[0]), len(times[i]), p.repeats)
        if k < 2:
            out.append("too few repeats")  # a revision lost its pilot repeats: its row says why
            continue
        diffs = [math.log(b) - math.log(a) for a, b in zip(times[0][:k], times[i][:k])]
        look, verdict = paired_decision(diffs, Plan(pilot=k, total=plan.total if plan.total and plan.total > k
                                                   else None), rule)
        half = math.expm1(float(look.crit) * float(look.se))
        wide = width_target is not None and not half <= width_target
        out.append("unresolved" if wide else str(verdict[()]))
    return out


def next_pair_fits(elapsed_s: float, pairs_done: int, max_time_s: float | None) -> bool:
    """Whether one more interleaved pair, as long as the mean of those done so far, ends within `max_time_s`.

    Stein's interval stays exact under this stop: the pilot (always taken whole) alone sets its width's
    variance, and a stop by the clock does not look at the second stage's times."""
    if max_time_s is None or pairs_done == 0:
        return True
    return elapsed_s + elapsed_s / pairs_done <= max_time_s
