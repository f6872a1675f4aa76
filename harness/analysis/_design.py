"""How the two sides of a comparison were measured, as recorded in their runs: the looks of an interleaved
comparison (`Plan`) and the two-stage pilot of independent sides, which `comparison_row` reads as `pilot`.

>>> sequential_plan({"protocol_json": '{"until_ci": 0.003, "repeats": 5, "max_repeats": 10}'})
Plan(pilot=5, total=10)
"""

from __future__ import annotations

from harness.analysis._caveats import protocol_of_run
from harness.analysis._sequential import Plan

__all__ = ["comparison_pilot", "run_pilots", "sequential_plan", "two_stage_pilot"]


def two_stage_pilot(info: dict) -> int | None:
    """The pilot repeat count of an adaptive run (`until_ci` in its protocol), else None."""
    protocol = protocol_of_run(info)
    return protocol.get("repeats") if protocol.get("until_ci") else None


def sequential_plan(info: dict) -> Plan | None:
    """The looks of a run's interleaved comparisons: an adaptive run (`until_ci` in its protocol) took a pilot of
    `repeats` pairs and planned look 2 at `max_repeats`; None for a fixed number of repeats (one look)."""
    protocol = protocol_of_run(info)
    n1, cap = protocol.get("repeats"), protocol.get("max_repeats")
    if not protocol.get("until_ci") or not n1 or n1 < 2:
        return None
    return Plan(pilot=n1, total=cap if cap and cap > n1 else None)


def comparison_pilot(info: dict, design: str):
    """What `comparison_row`'s `pilot` is for comparisons within one run of this design (see `run_pilots`)."""
    return run_pilots(info, info, design)


def run_pilots(info_a: dict, info_b: dict, design: str):
    """`comparison_row`'s `pilot` for run A against run B: the sequential plan of interleaved runs (one session shares
    its protocol), each side's two-stage pilot for independent ones."""
    if design == "interleaved":  # interleaved runs of one session share their protocol
        pa, pb = sequential_plan(info_a), sequential_plan(info_b)
        return pa if pa == pb else None
    return (two_stage_pilot(info_a), two_stage_pilot(info_b))
