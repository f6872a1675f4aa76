"""What a reader must know before a difference between two sets of repeats means what it says.

A comparison's verdict is only as good as its rows: CPU timings are not sustained-clock figures (the host's load
and frequency move them), a quick protocol's looser settle rule and short window change the figures by themselves,
and an unsettled repeat was timed before the clock stopped drifting. These caveats travel with every comparison
row, and every sentence that states a difference names them.

>>> run_caveats({"device_kind": "cpu", "protocol_json": '{"settle_chunk_tol": 0.05}'})
('CPU timings (not sustained-clock figures)', 'quick protocol (looser settle rule)')
>>> is_full_protocol({"settle_chunk_tol": 0.003, "settle_trend_tol": 0.003})
True
"""

from __future__ import annotations

import json
from dataclasses import replace

__all__ = ["CPU_CAVEAT", "QUICK_CAVEAT", "inputs_design", "is_full_protocol",
           "protocol_of_run", "rule_for", "run_caveats", "unsettled_caveat"]

CPU_CAVEAT = "CPU timings (not sustained-clock figures)"
# A CPU run is a dry run of the plumbing; its times move with the host's load by more than a kernel change,
# in bursts that two repeats can agree on (the README main job on the shared 2-core machine, captured against
# its control, inputs interleaved: two repeats of +6.5 % and +7.4 % in one try, +7.4 % and +14 % in another,
# around 1 in the other eighteen rows). Without a threshold asked for, CPU timings get ratios and intervals and
# no verdict.

QUICK_CAVEAT = "quick protocol (looser settle rule)"
# Settle-rule fields whose looser values make the rows not sustained figures (`--quick` loosens all of them).
_FULL = {"settle_chunk_tol": 0.003, "settle_trend_tol": 0.003}
_FULL_MIN = {"settle_trend_window_s": 2.0, "warmin_min_s": 1.0}


def is_full_protocol(protocol: dict | None) -> bool:
    """True when the settle rule is no looser than the default protocol's (`--quick` is looser)."""
    if not protocol:
        return False
    tight = all(protocol.get(k, v) <= v for k, v in _FULL.items())
    long = all(protocol.get(k, v) >= v for k, v in _FULL_MIN.items())
    return tight and long


def protocol_of_run(info: dict) -> dict:
    """The protocol a run recorded (empty when it recorded none or it does not parse)."""
    try:
        return json.loads(info.get("protocol_json") or "{}") or {}
    except ValueError:
        return {}


def run_caveats(info: dict) -> tuple[str, ...]:
    """The caveats that hold for every row of a run (its device, its protocol)."""
    out = []
    if info.get("device_kind") == "cpu":
        out.append(CPU_CAVEAT)
    protocol = protocol_of_run(info)
    if protocol and not is_full_protocol(protocol):
        out.append(QUICK_CAVEAT)
    return tuple(out)


def rule_for(rule, caveats):
    """The rule a comparison judges by: on CPU timings, where no threshold was asked for, no verdict at all
    ("not judged", said so in every output); the rule unchanged otherwise."""
    if CPU_CAVEAT in caveats and rule.threshold_source == "default":
        return replace(rule, judged=False, threshold_source="default on a CPU")
    return rule


def unsettled_caveat(statuses) -> str | None:
    """`2 of 6 repeats unsettled` (None when every repeat settled)."""
    statuses = list(statuses)
    n = sum(s == "unsettled" for s in statuses)
    return f"{n} of {len(statuses)} repeats unsettled" if n else None


def inputs_design(info: dict) -> str:
    """How a run's inputs of one comparison group were timed: `interleaved` (in turn within every repeat, the
    protocol's `interleave_inputs`) or `independent` (one configuration after the other, as runs before it)."""
    return "interleaved" if protocol_of_run(info).get("interleave_inputs") else "independent"
