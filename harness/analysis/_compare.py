"""Comparisons: the same kernel on two runs, or on two inputs of one run (captured vs control).

Pure functions over the `measurements` frames of runs read with `read_run`. A row is one kernel on one
pair of inputs (A, B): time B/A with its bootstrap interval, decomposed into cycles B/A x clock A/B (see
`_decompose`), the limiter on each side and a verdict by `VerdictRule`.

>>> from harness.analysis import parse_pairs, parse_threshold
>>> parse_pairs(["gaussian:0.1=gaussian:1"]), parse_threshold("2%")
((('gaussian:0.1', 'gaussian:1'),), 0.02)
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

from harness.analysis._decompose import Ratio, VerdictRule, decompose, geomean, limiter_label
from harness.errors import ConfigError, ResultsError

__all__ = [
    "BURST_STATUS",
    "SHAPE_COLUMNS",
    "SUSTAINED_STATUSES",
    "Comparison",
    "ComparisonRow",
    "RunSummary",
    "aggregate_measurements",
    "captured_control_pairs",
    "compare_inputs",
    "compare_measurements",
    "compare_runs",
    "parse_pairs",
    "parse_threshold",
    "shape_text",
    "summarize_run",
]

SUSTAINED_STATUSES = ("ok", "unsettled")  # rows with a timed sustained window
BURST_STATUS = "burst"  # kernel-only rows written by `run_burst`
SHAPE_COLUMNS = ("dtype", "batch", "heads_q", "heads_kv", "seq_len", "head_dim_qk", "head_dim_v", "causal")


def _shape_key(row: dict) -> tuple:
    """The shape columns with the dtype spelled one way (runs store "bf16" and "bfloat16" alike)."""
    from harness.inputs import DTYPES

    return tuple(DTYPES.get(row[c], row[c]) if c == "dtype" else row[c] for c in SHAPE_COLUMNS)


def shape_text(row: dict) -> str:
    """`B=1 H=32/32 S=16384 d=128/128 causal bf16`: what a time ratio is only meaningful within."""
    return (f"B={row['batch']} H={row['heads_q']}/{row['heads_kv']} S={row['seq_len']} "
            f"d={row['head_dim_qk']}/{row['head_dim_v']} {'causal' if row['causal'] else 'non-causal'} "
            f"{_shape_key(row)[0]}")


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    kernel: str
    input_a: str
    input_b: str
    shape: str
    repeats_a: int
    repeats_b: int
    time_a_ns: float  # geometric mean over repeats
    time_b_ns: float
    time: Ratio  # B / A
    cycles: Ratio | None  # B / A
    clock: Ratio | None  # A / B, so time = cycles x clock
    clock_source: str  # "inband" (both sides had the in-band probe), "nvml", or "none"
    clock_a_mhz: float | None
    clock_b_mhz: float | None
    power_a_w: float | None
    power_b_w: float | None
    limiter_a: str
    limiter_b: str
    verdict: str
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Rows of A vs B. `unmatched` names kernel @ input found on one side only (not compared)."""

    name_a: str
    name_b: str
    rule: VerdictRule
    rows: tuple[ComparisonRow, ...]
    unmatched: tuple[str, ...] = field(default=())

    def slowdowns(self, threshold: float) -> tuple[ComparisonRow, ...]:
        """Rows whose verdict is `slower` and whose time grew by more than `threshold` (0.02 = 2 %)."""
        return tuple(r for r in self.rows if r.verdict == "slower" and r.time.change > threshold)

    def to_frame(self):
        """One polars row per comparison row, ratios flattened to value / low / high columns."""
        import polars as pl

        flat = []
        for r in self.rows:
            d = {k: v for k, v in asdict(r).items() if k not in ("time", "cycles", "clock")}
            for name in ("time", "cycles", "clock"):
                ratio = getattr(r, name)
                d[f"{name}_ratio"] = ratio.value if ratio else None
                d[f"{name}_low"] = ratio.low if ratio else None
                d[f"{name}_high"] = ratio.high if ratio else None
            flat.append(d)
        return pl.DataFrame(flat, infer_schema_length=None)


def parse_threshold(text: str) -> float:
    """`2%` or `0.02` -> 0.02: the slowdown beyond which `bench compare` fails."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise ConfigError(f"--fail-on-slowdown {text!r} is not a percentage; write it like 2% (or 0.02).")
    value = float(m.group(1)) / (100 if m.group(2) else 1)
    if value >= 1 and not m.group(2):
        raise ConfigError(f"--fail-on-slowdown {text!r} reads as {value:.0%}; write 2% or 0.02 for two percent.")
    return value


def parse_pairs(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`A_LABEL=B_LABEL` strings -> ((a, b), ...). Labels may contain ':' but not '='."""
    out = []
    for item in items:
        a, sep, b = item.partition("=")
        if not sep or not a or not b or "=" in b:
            raise ConfigError(f"--pair-inputs {item!r} must be A_LABEL=B_LABEL, e.g. gaussian:0.1=gaussian:1.")
        out.append((a, b))
    return tuple(out)


def captured_control_pairs(labels: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(control, captured) for every `L<n>:captured` label and each other label with the same `L<n>:` tag.

    Captured is B and the control A, so the ratios read "captured relative to its control".
    """
    out = []
    for label in labels:
        tag, _, what = label.partition(":")
        if what == "captured":
            out += [(other, label) for other in labels if other != label and other.startswith(tag + ":")]
    return tuple(out)


def _timed(frame, statuses) -> list[dict]:
    import polars as pl

    return frame.filter(pl.col("status").is_in(list(statuses)) & pl.col("time_ns").is_not_null()).to_dicts()


def _clock_source(rows_a, rows_b) -> str:
    both = rows_a + rows_b
    if all(r.get("inband_clock_mhz") for r in both):
        return "inband"
    if all(r.get("sm_clock_mhz") for r in both):
        return "nvml"
    return "none"


def _shape_mismatch(name_a, name_b, label_a, label_b, ra: dict, rb: dict) -> ResultsError:
    return ResultsError(
        f"Cannot compare {name_a} input {label_a!r} with {name_b} input {label_b!r}: their shapes differ "
        f"({shape_text(ra)} vs {shape_text(rb)}). A time ratio across shapes mixes the kernel with the work it "
        f"was given; compare runs of the same shape, or pair inputs that share one with --pair-inputs A=B."
    )


def compare_measurements(
    a,
    b,
    *,
    pairs: Sequence[tuple[str, str]] = (),
    rule: VerdictRule = VerdictRule(),
    name_a: str = "A",
    name_b: str = "B",
    statuses: Sequence[str] = SUSTAINED_STATUSES,
    max_clock_mhz: float | None = None,
) -> Comparison:
    """Compare the measurement frames `a` and `b` kernel by kernel on paired inputs.

    `pairs` lists (input label in A, input label in B); empty means every label found on both sides,
    paired with itself. Shapes must agree within a pair; kernels found on one side only are listed in
    `unmatched`. `statuses` picks the rows that count (sustained by default; `("burst",)` for burst).
    """
    rows_a, rows_b = _timed(a, statuses), _timed(b, statuses)
    if not rows_a or not rows_b:
        empty = name_a if not rows_a else name_b
        raise ResultsError(f"{empty} has no timed {'/'.join(statuses)} measurements to compare (every kernel "
                           f"failed, or the run stopped before the first window).")
    labels_a = list(dict.fromkeys(r["input_label"] for r in rows_a))
    labels_b = list(dict.fromkeys(r["input_label"] for r in rows_b))
    if not pairs:
        pairs = tuple((x, x) for x in labels_a if x in labels_b)
        if not pairs:
            hint = f"{labels_a[0]}={labels_b[0]}"
            raise ResultsError(
                f"The runs share no input label: {name_a} has {', '.join(labels_a)}; {name_b} has "
                f"{', '.join(labels_b)}. Say which inputs correspond, e.g. --pair-inputs {hint}."
            )
    for la, lb in pairs:
        for label, labels, name in ((la, labels_a, name_a), (lb, labels_b, name_b)):
            if label not in labels:
                raise ResultsError(f"{name} has no timed input {label!r}; its inputs are {', '.join(labels)}.")
    out, unmatched = [], []
    for la, lb in pairs:
        ka = {}
        for r in rows_a:
            if r["input_label"] == la:
                ka.setdefault(r["kernel"], []).append(r)
        kb = {}
        for r in rows_b:
            if r["input_label"] == lb:
                kb.setdefault(r["kernel"], []).append(r)
        for label, groups, name in ((la, ka, name_a), (lb, kb, name_b)):
            if len({_shape_key(r) for rs in groups.values() for r in rs}) > 1:
                raise ResultsError(f"{name} holds input {label!r} at more than one shape; a comparison by label "
                                   f"cannot tell them apart. Give the inputs distinct names.")
        first_a, first_b = next(iter(ka.values()))[0], next(iter(kb.values()))[0]
        if _shape_key(first_a) != _shape_key(first_b):
            raise _shape_mismatch(name_a, name_b, la, lb, first_a, first_b)
        unmatched += [f"{k} @ {la} (only in {name_a})" for k in ka if k not in kb]
        unmatched += [f"{k} @ {lb} (only in {name_b})" for k in kb if k not in ka]
        for kernel in (k for k in ka if k in kb):
            out.append(_row(kernel, la, lb, ka[kernel], kb[kernel], rule, max_clock_mhz))
    return Comparison(name_a=name_a, name_b=name_b, rule=rule, rows=tuple(out), unmatched=tuple(unmatched))


def _row(kernel, la, lb, ra, rb, rule, max_clock_mhz) -> ComparisonRow:
    source = _clock_source(ra, rb)
    col = {"inband": "inband_clock_mhz", "nvml": "sm_clock_mhz"}.get(source)
    clocks_a = [r[col] for r in ra] if col else None
    clocks_b = [r[col] for r in rb] if col else None
    d = decompose(time_a=[r["time_ns"] for r in ra], time_b=[r["time_ns"] for r in rb], clock_a=clocks_a,
                  clock_b=clocks_b, rule=rule)
    unsettled = sum(r["status"] == "unsettled" for r in ra + rb)
    powers_a = [r["power_w"] for r in ra if r.get("power_w")]
    powers_b = [r["power_w"] for r in rb if r.get("power_w")]
    return ComparisonRow(
        kernel=kernel, input_a=la, input_b=lb, shape=shape_text(ra[0]), repeats_a=len(ra), repeats_b=len(rb),
        time_a_ns=geomean([r["time_ns"] for r in ra]), time_b_ns=geomean([r["time_ns"] for r in rb]),
        time=d.time, cycles=d.cycles, clock=d.clock, clock_source=source,
        clock_a_mhz=geomean(clocks_a) if clocks_a else None, clock_b_mhz=geomean(clocks_b) if clocks_b else None,
        power_a_w=geomean(powers_a) if powers_a else None, power_b_w=geomean(powers_b) if powers_b else None,
        limiter_a=limiter_label(ra, max_clock_mhz=max_clock_mhz),
        limiter_b=limiter_label(rb, max_clock_mhz=max_clock_mhz),
        verdict=d.verdict, note=f"{unsettled} unsettled repeat(s)" if unsettled else "",
    )


def _check_comparable(run, *, allow_incomplete: bool) -> None:
    status = run.info.get("status")
    if status != "complete" and not allow_incomplete:
        detail = f" ({run.info['status_detail']})" if run.info.get("status_detail") else ""
        raise ResultsError(
            f"Run {run.path} is not complete: its status is {status!r}{detail}. Its figures may lack kernels or "
            f"repeats. Re-run it, or pass --allow-incomplete to compare what it holds."
        )


def compare_runs(
    run_a,
    run_b,
    *,
    pairs: Sequence[tuple[str, str]] = (),
    rule: VerdictRule = VerdictRule(),
    allow_incomplete: bool = False,
) -> Comparison:
    """Every kernel of run A against the same kernel in run B on paired inputs (same labels by default).

    Runs on different GPU models are compared too (that may be the question), but the row's note says so.
    """
    for run in (run_a, run_b):
        _check_comparable(run, allow_incomplete=allow_incomplete)
    cmp = compare_measurements(
        run_a.measurements, run_b.measurements, pairs=pairs, rule=rule, name_a=f"A ({run_a.info['run_id']})",
        name_b=f"B ({run_b.info['run_id']})", max_clock_mhz=run_a.info.get("max_sm_clock_mhz"),
    )
    if run_a.info.get("device_name") != run_b.info.get("device_name"):
        note = f"different devices: {run_a.info.get('device_name')} vs {run_b.info.get('device_name')}"
        rows = tuple(ComparisonRow(**{**_fields(r), "note": "; ".join(x for x in (r.note, note) if x)})
                     for r in cmp.rows)
        cmp = Comparison(name_a=cmp.name_a, name_b=cmp.name_b, rule=rule, rows=rows, unmatched=cmp.unmatched)
    return cmp


def _fields(row: ComparisonRow) -> dict:
    return {f: getattr(row, f) for f in row.__dataclass_fields__}


def compare_inputs(run, *, pairs: Sequence[tuple[str, str]] = (), rule: VerdictRule = VerdictRule()) -> Comparison:
    """Inputs of one run against each other for every kernel: captured vs control by default.

    Without `pairs`, every `L<n>:captured` input is paired with the other inputs of its layer tag; a run
    without captures compares each input with the run's first input (its reference).
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
    if not pairs:
        return Comparison(name_a="A", name_b="B", rule=rule, rows=())
    return compare_measurements(m, m, pairs=pairs, rule=rule, name_a="A", name_b="B",
                                max_clock_mhz=run.info.get("max_sm_clock_mhz"))


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

    @property
    def reference_inputs(self) -> set[str]:
        """Inputs on the A side of the input comparison (controls); plots draw them open."""
        return {r.input_a for r in self.inputs.rows}


def aggregate_measurements(rows: Sequence[dict], *, max_clock_mhz: float | None = None) -> list[dict]:
    """`aggregate_repeats` of measurement rows (dicts), with each group's limiter, shape and launch note.

    Burst rows count as timed (their protocol's timed launches); pass sustained and burst rows separately.
    """
    from harness.analysis._aggregate import aggregate_repeats

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


def summarize_run(run, *, rule: VerdictRule = VerdictRule()) -> RunSummary:
    """Reduce a run to its report figures: medians over repeats, input comparison, burst vs sustained."""
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
                                       statuses=(BURST_STATUS, *SUSTAINED_STATUSES), max_clock_mhz=max_clock)
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
    )
