"""Comparisons within one run (two kernels, two inputs) and the reduction of a run to its report figures.

Two kernels of one configuration ran in turn in every repeat, their order rotated, so they are compared
`interleaved` (paired by repeat); so are a capture and its controls in runs that interleave their inputs (the
default since protocol field `interleave_inputs`; older runs timed them one after the other: independent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from harness.analysis._aggregate import aggregate_repeats
from harness.analysis._caveats import inputs_design, rule_for, run_caveats
from harness.analysis._compare import (
    BURST_STATUS,
    SUSTAINED_STATUSES,
    Comparison,
    _by_kernel,
    _shape_key,
    _timed,
    captured_control_pairs,
    compare_measurements,
    comparison_row,
    shape_text,
)
from harness.analysis._decompose import limiter_label
from harness.analysis._design import comparison_pilot, sequential_plan
from harness.analysis._interval import VerdictRule
from harness.errors import ResultsError

__all__ = ["RunSummary", "aggregate_measurements", "compare_inputs", "compare_kernels", "summarize_run"]


def compare_kernels(run, kernel_pairs: Sequence[tuple[str, str]], *, rule: VerdictRule = VerdictRule(),
                    inputs: Sequence[str] = ()) -> Comparison:
    """Kernel B against kernel A on every input of one run where both were timed (or on `inputs`).

    Within one configuration the kernels ran in turn in every repeat, their order rotated, so the sides are
    interleaved and paired by repeat; the decomposition is the same as between runs.
    """
    timed = _timed(run.measurements, SUSTAINED_STATUSES)
    kernels = list(dict.fromkeys(r["kernel"] for r in timed))
    for a, b in kernel_pairs:
        for k in (a, b):
            if k not in kernels:
                raise ResultsError(f"--pair-kernels {a}={b}: the run {run.info.get('run_id')} timed no kernel {k!r}; "
                                   f"it timed {', '.join(kernels) or 'nothing'}.")
    labels = list(dict.fromkeys(r["input_label"] for r in timed))
    for x in inputs:
        if x not in labels:
            raise ResultsError(f"The run {run.info.get('run_id')} has no timed input {x!r}; its inputs are "
                               f"{', '.join(labels)}.")
    caveats = run_caveats(run.info)
    rule = rule_for(rule, caveats)
    out, unmatched = [], []
    for label in inputs or labels:
        groups = _by_kernel(timed, label)
        for a, b in kernel_pairs:
            if a not in groups or b not in groups:
                unmatched.append(f"{a if a not in groups else b} @ {label} (not timed there)")
                continue
            out.append(comparison_row(kernel=a, kernel_b=b, input_a=label, input_b=label, rows_a=groups[a],
                                      rows_b=groups[b], rule=rule, design="interleaved", caveats=caveats,
                                      pilot=sequential_plan(run.info), max_clock_mhz=run.info.get("max_sm_clock_mhz")))
    return Comparison(name_a="A", name_b="B", rule=rule, rows=tuple(out), unmatched=tuple(unmatched))


def compare_inputs(run, *, pairs: Sequence[tuple[str, str]] = (), rule: VerdictRule = VerdictRule()) -> Comparison:
    """Inputs of one run against each other for every kernel: captured vs control by default.

    Without `pairs`, every `L<n>:captured` input is paired with the other inputs of its layer tag; a run
    without captures compares each input with the run's first input (its reference). Where the run timed a
    comparison group's inputs in turn within every repeat (`inputs_design`), the sides pair by repeat; runs
    that timed them one configuration after the other are compared as independent.
    """
    m = run.measurements
    timed = _timed(m, SUSTAINED_STATUSES)
    labels = list(dict.fromkeys(r["input_label"] for r in timed))
    if not pairs and labels:
        pairs = captured_control_pairs(labels)
    if not pairs and labels:
        # No captures: each input against the first input of its shape (the run's reference for that shape).
        shape_of = {r["input_label"]: _shape_key(r) for r in timed}
        first: dict[tuple, str] = {}
        for x in labels:
            first.setdefault(shape_of[x], x)
        pairs = tuple((first[shape_of[x]], x) for x in labels if first[shape_of[x]] != x)
    rule = rule_for(rule, run_caveats(run.info))
    if not pairs:
        return Comparison(name_a="A", name_b="B", rule=rule, rows=())
    return compare_measurements(m, m, pairs=pairs, rule=rule, name_a="A", name_b="B",
                                max_clock_mhz=run.info.get("max_sm_clock_mhz"), caveats=run_caveats(run.info),
                                design=inputs_design(run.info),
                                pilot=comparison_pilot(run.info, inputs_design(run.info)))


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What a report shows about one run: per kernel x input figures, input and burst comparisons."""

    run_id: str
    info: dict
    sustained: tuple[dict, ...]  # `aggregate_repeats` rows (+ limiter, shape), kernels that failed included
    burst: tuple[dict, ...]  # the same for kernel-only (burst) rows
    inputs: Comparison  # input B vs input A of this run, per kernel (captured vs control)
    burst_vs_sustained: Comparison | None  # A = burst, B = sustained, per kernel x input
    notes: tuple[str, ...] = ()  # what could not be compared, and why
    kernels: Comparison | None = None  # kernel B vs kernel A on each input (`--pair-kernels`), paired by repeat

    @property
    def reference_inputs(self) -> set[str]:
        """Inputs on the A side of the input comparison (controls); plots draw them open."""
        return {r.input_a for r in self.inputs.rows}


def aggregate_measurements(rows: Sequence[dict], *, max_clock_mhz: float | None = None) -> list[dict]:
    """`aggregate_repeats` of measurement rows (dicts), with each group's limiter, shape and launch note.

    Burst rows count as timed (their protocol's timed launches); pass sustained and burst rows separately.
    """
    rows = [{**r, "status": "ok"} if r.get("status") == BURST_STATUS else r for r in rows]
    out = []
    for agg in aggregate_repeats(rows):
        mine = [r for r in rows if r["input_label"] == agg["input_label"] and r["kernel"] == agg["kernel"]
                and r["config_index"] == agg["config_index"]]
        timed = [r for r in mine if r["status"] in SUSTAINED_STATUSES and r.get("time_ns")]
        out.append({**agg, "shape": shape_text(mine[0]) if mine[0].get("batch") is not None else "",
                    "limiter": limiter_label(timed, max_clock_mhz=max_clock_mhz) if timed else "",
                    "launch_note": next((r.get("launch_note") for r in timed if r.get("launch_note")), "")})
    return out


def summarize_run(run, *, rule: VerdictRule = VerdictRule(),
                  kernel_pairs: Sequence[tuple[str, str]] = ()) -> RunSummary:
    """Reduce a run to its report figures: medians over repeats, input comparison, burst vs sustained, and
    kernel B against kernel A for each of `kernel_pairs`."""
    import polars as pl

    m = run.measurements
    max_clock = run.info.get("max_sm_clock_mhz")
    sustained_rows = m.filter(pl.col("status") != BURST_STATUS).to_dicts()
    burst_rows = m.filter(pl.col("status") == BURST_STATUS).to_dicts()
    bvs = None
    burst_frame = m.filter(pl.col("status") == BURST_STATUS)
    sustained_frame = m.filter(pl.col("status").is_in(list(SUSTAINED_STATUSES)))
    labels = [x for x in dict.fromkeys(burst_frame["input_label"].to_list())
              if x in set(sustained_frame["input_label"].to_list())]
    notes = []
    if labels:
        try:
            bvs = compare_measurements(burst_frame, sustained_frame, pairs=[(x, x) for x in labels], rule=rule,
                                       name_a="burst", name_b="sustained",
                                       statuses=(BURST_STATUS, *SUSTAINED_STATUSES), max_clock_mhz=max_clock,
                                       caveats=run_caveats(run.info))
        except ResultsError as exc:  # a report still shows everything else; the reason is printed in it
            notes.append(f"burst vs sustained not compared: {exc}")
    try:
        inputs = compare_inputs(run, rule=rule)
    except ResultsError as exc:
        inputs = Comparison(name_a="A", name_b="B", rule=rule, rows=())
        notes.append(f"inputs not compared: {exc}")
    return RunSummary(
        run_id=run.info.get("run_id") or run.path.name, info=run.info,
        sustained=tuple(aggregate_measurements(sustained_rows, max_clock_mhz=max_clock)),
        burst=tuple(aggregate_measurements(burst_rows, max_clock_mhz=max_clock)),
        inputs=inputs, burst_vs_sustained=bvs, notes=tuple(notes),
        kernels=compare_kernels(run, kernel_pairs, rule=rule) if kernel_pairs else None,
    )
