"""Comparisons: the same kernel on two runs, or on two inputs of one run (captured vs control).

Pure functions over the `measurements` frames of runs read with `read_run`. A row is one kernel on one
pair of inputs (A, B), or two kernels on one input (`compare_kernels`): time B/A (ratio of geometric means over
repeats) with its t interval, decomposed into cycles B/A x clock A/B (see `_decompose`), the limiter on each side
and a verdict by `VerdictRule` (see `_interval`: one procedure for every table, sentence, JSON field and gate).
Sides measured in turn within each repeat (two kernels of one run, the revisions of `bench commits`) are
`interleaved` and paired by repeat; everything else is `independent`. Comparisons within one run and a run's
report figures are `_summary`'s.

>>> from harness.analysis import captured_control_pairs
>>> captured_control_pairs(["L15:captured", "L15:gaussian:0.1", "gaussian:1"])
(('L15:gaussian:0.1', 'L15:captured'),)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

from harness.analysis._caveats import rule_for, run_caveats, unsettled_caveat
from harness.analysis._decompose import Ratio, VerdictRule, decompose, geomean, limiter_label
from harness.analysis._design import run_pilots
from harness.analysis._interval import DEFAULT_THRESHOLD, OPEN, between_runs_floor
from harness.analysis._sequential import Plan
from harness.errors import ResultsError
from harness.inputs import DTYPES

__all__ = [
    "BURST_STATUS",
    "SHAPE_COLUMNS",
    "SUSTAINED_STATUSES",
    "Comparison",
    "ComparisonRow",
    "captured_control_pairs",
    "compare_measurements",
    "compare_runs",
    "comparison_row",
    "same_run",
    "shape_text",
]

SUSTAINED_STATUSES = ("ok", "unsettled")  # rows with a timed sustained window
BURST_STATUS = "burst"  # kernel-only rows written by `run_burst`
SHAPE_COLUMNS = ("dtype", "batch", "heads_q", "heads_kv", "seq_len", "head_dim_qk", "head_dim_v", "causal")
# Schema v5's serving workloads: two inputs of one dense shape but another KV length, window, page size or set of
# sequence lengths are different work, and a time ratio between them says nothing about their data.
WORKLOAD_COLUMNS = ("seq_len_kv", "window", "page_size", "varlen", "kv_lens")


def _shape_key(row: dict) -> tuple:
    """The shape and workload columns, the dtype spelled one way (runs store "bf16" and "bfloat16" alike)."""
    dense = tuple(DTYPES.get(row[c], row[c]) if c == "dtype" else row[c] for c in SHAPE_COLUMNS)
    work = {c: row.get(c) for c in WORKLOAD_COLUMNS}
    if work["seq_len_kv"] is None:  # a row without it (written before v5, or by hand) is self-attention
        work["seq_len_kv"] = row["seq_len"]
    return dense + tuple(tuple(v) if isinstance(v, list) else v for v in work.values())


def shape_text(row: dict) -> str:
    """`B=1 H=32/32 S=16384 d=128/128 causal bf16`: what a time ratio is only meaningful within. A serving workload
    names what it asks beyond that: `B=16 H=32/8 S_q=1 S_kv=32768 d=128/128 causal page=16 bf16` (decode against a
    cache of 32768 keys in pages of 16), `window=W`, `varlen=HOW` (S_kv then the longest sequence)."""
    s_kv = row.get("seq_len_kv") or row["seq_len"]  # rows written before v5 are self-attention
    seq = (f"S={row['seq_len']}" if s_kv == row["seq_len"] and not row.get("varlen")
           else f"S_q={row['seq_len']} S_kv={s_kv}")
    work = "".join(f" {name}={row[c]}" for c, name in (("window", "window"), ("page_size", "page"), ("varlen", "varlen"))
                   if row.get(c) is not None)
    return (f"B={row['batch']} H={row['heads_q']}/{row['heads_kv']} {seq} "
            f"d={row['head_dim_qk']}/{row['head_dim_v']} {'causal' if row['causal'] else 'non-causal'}{work} "
            f"{_shape_key(row)[0]}")


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    kernel: str  # A's kernel (and B's, unless `kernel_b` names another)
    input_a: str
    input_b: str
    shape: str
    repeats_a: int
    repeats_b: int
    time_a_ns: float  # geometric mean over repeats (the estimator of every comparison)
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
    kernel_b: str = ""  # B's kernel when two kernels are compared (`compare_kernels`)
    design: str = "independent"  # or "interleaved": A and B measured in turn within each repeat, paired by repeat
    threshold: float | None = DEFAULT_THRESHOLD  # the threshold the verdict applied (None: no verdict drawn)
    caveats: tuple[str, ...] = ()  # what the reader must know first (CPU, quick protocol, unsettled repeats)

    @property
    def note(self) -> str:
        return "; ".join(self.caveats)

    @property
    def subject(self) -> str:
        """The kernel, or `B_KERNEL vs A_KERNEL` when two kernels are compared."""
        return f"{self.kernel_b} vs {self.kernel}" if self.kernel_b and self.kernel_b != self.kernel else self.kernel


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Rows of A vs B. `unmatched` names kernel @ input found on one side only (not compared). `same_code` says
    why A and B are the same thing (one run twice, two revisions of one commit): such a comparison is an A/A
    check and never fails a gate."""

    name_a: str
    name_b: str
    rule: VerdictRule
    rows: tuple[ComparisonRow, ...]
    unmatched: tuple[str, ...] = field(default=())
    same_code: str = ""
    between_cv: float = 0.0  # separate runs: the between-run cv each row's interval includes
    between_source: str = ""  # where it came from ("default for a GPU", "--between-runs-cv 0.2%", a history)

    @property
    def floor(self) -> float | None:
        """Separate runs: the smallest threshold at which an A/A comparison can be called `same` however many
        repeats each run takes (the equivalence interval of the between-run variance alone); None otherwise."""
        return between_runs_floor(self.between_cv, level=self.rule.level) if self.between_cv else None

    def open_rows(self) -> tuple[ComparisonRow, ...]:
        """Rows a gate could not judge (`unresolved`, `too few repeats`): not a pass."""
        return tuple(r for r in self.rows if r.verdict in OPEN)

    def slowdowns(self) -> tuple[ComparisonRow, ...]:
        """Rows whose verdict is `slower` under the rule (interval excludes 1, change beyond its threshold);
        none where A and B are the same code."""
        return () if self.same_code else tuple(r for r in self.rows if r.verdict == "slower")

    def unresolved(self) -> tuple[ComparisonRow, ...]:
        """Rows whose interval is wider than the threshold while it includes 1: not judged either way."""
        return tuple(r for r in self.rows if r.verdict == "unresolved")

    def to_frame(self):
        """One polars row per comparison row, ratios flattened to value / low / high columns."""
        import polars as pl

        flat = []
        for r in self.rows:
            d = {k: v for k, v in asdict(r).items() if k not in ("time", "cycles", "clock", "caveats")}
            d["note"] = r.note
            for name in ("time", "cycles", "clock"):
                ratio = getattr(r, name)
                d[f"{name}_ratio"] = ratio.value if ratio else None
                d[f"{name}_low"] = ratio.low if ratio else None
                d[f"{name}_high"] = ratio.high if ratio else None
            flat.append(d)
        return pl.DataFrame(flat, infer_schema_length=None)


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
    """Timed rows of a measurements table: a polars frame (`read_run`) or plain dicts (`read_run_rows`, which
    needs only pyarrow: the GPU images compare `bench commits` revisions without polars)."""
    if isinstance(frame, list):
        return [r for r in frame if r.get("status") in statuses and r.get("time_ns") is not None]
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


def _by_repeat(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r.get("repeat") if r.get("repeat") is not None else -1))


def comparison_row(*, kernel: str, input_a: str, input_b: str, rows_a: list[dict], rows_b: list[dict],
                   rule: VerdictRule = VerdictRule(), design: str = "independent", caveats: Sequence[str] = (),
                   kernel_b: str = "", pilot: int | tuple | Plan | None = None, between_cv: float = 0.0,
                   max_clock_mhz: float | None = None) -> ComparisonRow:
    """One comparison row from the timed measurement rows (dicts) of each side.

    `design="interleaved"` pairs the sides by their `repeat` (a repeat timed on one side only is left out, and
    the row says so); `pilot` is then the sequential `Plan` of its looks (or a pilot count: one look planned after
    it), None for one look on every pair. For independent sides `pilot` is the repeat count a two-stage run fixed
    in advance (its variance comes from those repeats), or (pilot of A, pilot of B), and `between_cv` the
    between-run variance of separate runs. `caveats` are the runs' (CPU, quick protocol); unsettled repeats are
    added here.
    """
    plan = pilot if isinstance(pilot, Plan) else None
    pilot_a, pilot_b = (None, None) if plan else pilot if isinstance(pilot, tuple) else (pilot, pilot)
    if design not in ("independent", "interleaved"):
        raise ValueError(f"design must be independent or interleaved, got {design!r}")
    ra, rb = _by_repeat(rows_a), _by_repeat(rows_b)
    notes = list(dict.fromkeys(caveats))
    if design == "interleaved":
        reps_a, reps_b = {r["repeat"]: r for r in ra}, {r["repeat"]: r for r in rb}
        common = sorted(set(reps_a) & set(reps_b))
        lost = sorted(set(reps_a) ^ set(reps_b))
        if lost:
            notes.append(f"repeat(s) {', '.join(map(str, lost))} timed on one side only: left out of the pairing")
        ra, rb = [reps_a[k] for k in common], [reps_b[k] for k in common]
        if pilot_a != pilot_b:
            raise ValueError("interleaved sides share one pilot")
        if plan is None and pilot_a is not None and pilot_a < len(common):
            plan = Plan(pilot=pilot_a, total=len(common))
        if plan is not None and len(common) < plan.pilot:
            notes.append(f"{len(common)} of the pilot's {plan.pilot} pairs timed: one look on them")
            plan = None
        pilot_a = pilot_b = None
    source = _clock_source(ra, rb)
    col = {"inband": "inband_clock_mhz", "nvml": "sm_clock_mhz"}.get(source)
    clocks_a = [r[col] for r in ra] if col else None
    clocks_b = [r[col] for r in rb] if col else None
    d = decompose(time_a=[r["time_ns"] for r in ra], time_b=[r["time_ns"] for r in rb], clock_a=clocks_a,
                  clock_b=clocks_b, rule=rule, paired=design == "interleaved", plan=plan, between_cv=between_cv,
                  pilot_a=pilot_a if pilot_a and 2 <= pilot_a <= len(ra) else None,
                  pilot_b=pilot_b if pilot_b and 2 <= pilot_b <= len(rb) else None)
    unsettled = unsettled_caveat(r["status"] for r in ra + rb)
    if unsettled:
        notes.append(unsettled)
    powers_a = [r["power_w"] for r in ra if r.get("power_w")]
    powers_b = [r["power_w"] for r in rb if r.get("power_w")]
    return ComparisonRow(
        kernel=kernel, kernel_b=kernel_b, input_a=input_a, input_b=input_b,
        shape=shape_text(ra[0]) if ra[0].get("batch") is not None else "",
        repeats_a=len(ra), repeats_b=len(rb),
        time_a_ns=geomean([r["time_ns"] for r in ra]), time_b_ns=geomean([r["time_ns"] for r in rb]),
        time=d.time, cycles=d.cycles, clock=d.clock, clock_source=source,
        clock_a_mhz=geomean(clocks_a) if clocks_a else None, clock_b_mhz=geomean(clocks_b) if clocks_b else None,
        power_a_w=geomean(powers_a) if powers_a else None, power_b_w=geomean(powers_b) if powers_b else None,
        limiter_a=limiter_label(ra, max_clock_mhz=max_clock_mhz), limiter_b=limiter_label(rb, max_clock_mhz=max_clock_mhz),
        verdict=d.verdict, design=design, threshold=rule.threshold if rule.judged else None, caveats=tuple(notes),
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
    design: str = "independent",
    caveats: Sequence[str] = (),
    pilot: int | tuple | Plan | None = None,
    between_cv: float = 0.0,
) -> Comparison:
    """Compare the measurement frames `a` and `b` kernel by kernel on paired inputs.

    `pairs` lists (input label in A, input label in B); empty means every label found on both sides,
    paired with itself. Shapes must agree within a pair; kernels found on one side only are listed in
    `unmatched`. `statuses` picks the rows that count (sustained by default; `("burst",)` for burst).
    `design`, `caveats`, `pilot` and `between_cv` as in `comparison_row`.
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
        ka, kb = _by_kernel(rows_a, la), _by_kernel(rows_b, lb)
        for label, groups, name in ((la, ka, name_a), (lb, kb, name_b)):
            _one_shape(groups, label, name)
        first_a, first_b = next(iter(ka.values()))[0], next(iter(kb.values()))[0]
        if _shape_key(first_a) != _shape_key(first_b):
            raise _shape_mismatch(name_a, name_b, la, lb, first_a, first_b)
        unmatched += [f"{k} @ {la} (only in {name_a})" for k in ka if k not in kb]
        unmatched += [f"{k} @ {lb} (only in {name_b})" for k in kb if k not in ka]
        for kernel in (k for k in ka if k in kb):
            out.append(comparison_row(kernel=kernel, input_a=la, input_b=lb, rows_a=ka[kernel], rows_b=kb[kernel],
                                      rule=rule, design=design, caveats=caveats, pilot=pilot,
                                      between_cv=between_cv, max_clock_mhz=max_clock_mhz))
    return Comparison(name_a=name_a, name_b=name_b, rule=rule, rows=tuple(out), unmatched=tuple(unmatched),
                      between_cv=between_cv)


def _by_kernel(rows: list[dict], label: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r["input_label"] == label:
            out.setdefault(r["kernel"], []).append(r)
    return out


def _one_shape(groups: dict, label: str, name: str) -> None:
    if len({_shape_key(r) for rs in groups.values() for r in rs}) > 1:
        raise ResultsError(f"{name} holds input {label!r} at more than one shape; a comparison by label "
                           f"cannot tell them apart. Give the inputs distinct names.")


def _check_comparable(run, *, allow_incomplete: bool) -> None:
    status = run.info.get("status")
    if status != "complete" and not allow_incomplete:
        detail = f" ({run.info['status_detail']})" if run.info.get("status_detail") else ""
        raise ResultsError(
            f"Run {run.path} is not complete: its status is {status!r}{detail}. Its figures may lack kernels or "
            f"repeats. Re-run it, or pass --allow-incomplete to compare what it holds."
        )


def same_run(run_a, run_b) -> bool:
    """True when A and B are one run: the same directory, or copies of one run id holding the same times (a
    copy whose times were edited, a synthetic baseline, is another run)."""
    pa, pb = getattr(run_a, "path", None), getattr(run_b, "path", None)
    if pa is not None and pb is not None and Path(pa).resolve() == Path(pb).resolve():
        return True
    if not run_a.info.get("run_id") or run_a.info.get("run_id") != run_b.info.get("run_id"):
        return False
    times = lambda run: ([r.get("time_ns") for r in run.measurements] if isinstance(run.measurements, list)
                         else run.measurements["time_ns"].to_list())
    return times(run_a) == times(run_b)


def compare_runs(
    run_a,
    run_b,
    *,
    pairs: Sequence[tuple[str, str]] = (),
    rule: VerdictRule = VerdictRule(),
    allow_incomplete: bool = False,
    design: str = "independent",
    same_code: str = "",
) -> Comparison:
    """Every kernel of run A against the same kernel in run B on paired inputs (same labels by default).

    Two runs are `independent` unless the caller measured them interleaved (`bench commits`); independent runs'
    intervals include the between-run variance (`rule.between_runs`), so the comparison states the smallest
    threshold it can support (`Comparison.floor`). Runs on different GPU models are compared too (that may be the
    question), but each row's caveats say so. A run compared with itself is marked `same_code` (it never fails a
    gate).
    """
    for run in (run_a, run_b):
        _check_comparable(run, allow_incomplete=allow_incomplete)
    caveats = list(dict.fromkeys(run_caveats(run_a.info) + run_caveats(run_b.info)))
    if run_a.info.get("device_name") != run_b.info.get("device_name"):
        caveats.append(f"different devices: {run_a.info.get('device_name')} vs {run_b.info.get('device_name')}")
    if not same_code and same_run(run_a, run_b):
        same_code = (f"A and B are the same run ({run_a.info.get('run_id')}): every ratio is 1 by construction, so "
                     f"this says nothing about noise and no gate fails on it")
    rule = rule_for(rule, caveats)
    between, source = (rule.between_runs(run_a.info.get("device_kind")) if design == "independent" and not same_code
                       else (0.0, ""))
    cmp = compare_measurements(
        run_a.measurements, run_b.measurements, pairs=pairs, rule=rule, name_a=f"A ({run_a.info['run_id']})",
        name_b=f"B ({run_b.info['run_id']})", max_clock_mhz=run_a.info.get("max_sm_clock_mhz"), design=design,
        caveats=caveats, pilot=run_pilots(run_a.info, run_b.info, design), between_cv=between,
    )
    return replace(cmp, same_code=same_code, between_source=source)
