"""What `bench commits` returns: one results run per revision and each later revision against the first.

The decomposition is the analysis package's (`compare_runs`, design `interleaved`): time B/A = cycles B/A x
clock A/B with paired t intervals over the interleaved repeats (two-stage under `--until-ci`) and its verdict
rule at the gate's threshold. Where no clock was recorded (a CPU without
cpufreq, `--telemetry none`) the clock factor is unknown; `factors` then reports it as unknown, takes
it as 1, and attributes the whole time ratio to cycles, saying so in `basis`. That is the only reading
that keeps time = cycles x clock, and it is stated rather than hidden.

>>> from harness.analysis import Ratio
>>> from harness.commits import factors
>>> class Row: time = Ratio(value=2.0, low=1.9, high=2.1); cycles = clock = None; clock_source = "none"
>>> f = factors(Row())
>>> f.cycles.value, f.clock is None, f.clock_known
(2.0, True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis import estimators_text, explain_comparison, ratio_text as _ratio, resolution_text
from harness.commits._git import Revision
from harness.report import ReportTable, fmt, gate_line

__all__ = ["RevisionRun", "CommitComparison", "CommitsResult", "Factors", "factors", "commits_table",
           "commits_markdown", "commits_lines", "commits_gate_line", "CLOCK_UNKNOWN_BASIS"]

CLOCK_UNKNOWN_BASIS = ("no clock telemetry on this device: the clock factor is unknown and taken as 1, so the whole "
                       "time ratio is attributed to cycles")


@dataclass(frozen=True, kw_only=True)
class Factors:
    """time B/A = cycles B/A x clock A/B; `clock` None means unknown (then cycles == time by assumption)."""

    time: object  # harness.analysis.Ratio
    cycles: object
    clock: object | None
    basis: str

    @property
    def clock_known(self) -> bool:
        return self.clock is not None


def factors(row) -> Factors:
    """The factors of one `ComparisonRow`, with the clock-unknown case made explicit (see module doc)."""
    if row.cycles is not None and row.clock is not None:
        source = {"inband": "in-band clock probe", "nvml": "NVML SM clock"}.get(row.clock_source, row.clock_source)
        return Factors(time=row.time, cycles=row.cycles, clock=row.clock, basis=f"cycles = time x clock ({source})")
    return Factors(time=row.time, cycles=row.time, clock=None, basis=CLOCK_UNKNOWN_BASIS)


@dataclass(frozen=True, kw_only=True)
class RevisionRun:
    revision: Revision
    run_dir: Path
    status: str


@dataclass(frozen=True, kw_only=True)
class CommitComparison:
    """One later revision (B) against the first (A): the analysis `Comparison` of their two runs."""

    base: RevisionRun
    head: RevisionRun
    comparison: object  # harness.analysis.Comparison

    @property
    def row(self):
        return self.comparison.rows[0]

    @property
    def factors(self) -> Factors:
        return factors(self.row)

    @property
    def verdict(self) -> str:
        return self.row.verdict


@dataclass(frozen=True, kw_only=True)
class CommitsResult:
    kernel: str
    input_label: str
    device: str
    device_name: str
    repo: Path
    runs: tuple[RevisionRun, ...]
    comparisons: tuple[CommitComparison, ...]
    rule: object  # harness.analysis.VerdictRule
    dirty_files: tuple[str, ...] = ()
    adaptive_note: str = ""  # what --until-ci did: the target met, or the cap reached and the width it left

    def slowdowns(self) -> tuple[CommitComparison, ...]:
        """Comparisons whose verdict is `slower` under the rule (its threshold is the gate's)."""
        return tuple(c for c in self.comparisons if c.comparison.slowdowns())


def commits_table(result: CommitsResult):
    """The decomposition of each revision against the first, as a report table (terminal, Markdown, HTML)."""
    rows = []
    for c in result.comparisons:
        f, r = c.factors, c.row
        rows.append((
            c.base.revision.describe(), c.head.revision.describe(), fmt(r.time_a_ns, ".4f", scale=1e-6),
            fmt(r.time_b_ns, ".4f", scale=1e-6), _ratio(f.time),
            _ratio(f.cycles) + ("" if f.clock_known else " (assumes equal clocks)"),
            _ratio(f.clock) if f.clock_known else "1 (unknown)",
            f"{fmt(r.clock_a_mhz, '.0f')} / {fmt(r.clock_b_mhz, '.0f')}", r.limiter_a, r.limiter_b,
            str(r.repeats_a), resolution_text(r.time),
            r.verdict + (f" ({r.note})" if r.note else "") + (" (same commit)" if c.comparison.same_code else ""),
        ))
    level = f"{result.rule.level:.0%}"
    basis = {c.factors.basis for c in result.comparisons}
    methods = sorted({c.row.time.method for c in result.comparisons if c.row.time.method}) or ["no"]
    return ReportTable(
        title=f"{result.kernel} on {result.input_label}, {result.device_name}: each revision (B) against {result.runs[0].revision.describe()} (A)",
        columns=("A", "B", "A ms (geomean)", "B ms (geomean)", f"time B/A [{level}]", "= cycles B/A", "x clock A/B",
                 "MHz A / B", "limiter A", "limiter B", "pairs", "resolves",
                 f"verdict (threshold {result.rule.threshold_text})"),
        rows=tuple(rows), left=2,
        caption=(f"geometric means over interleaved repeats (their order alternating); ratios: "
                 f"{estimators_text([c.row.time for c in result.comparisons])} with the [{level} "
                 f"{' / '.join(methods)} interval] on the per-repeat differences of log time; resolves: the smallest "
                 f"change the interval could call. " + "; ".join(sorted(basis))
                 + f". Verdict: {result.rule.describe()}."),
    )


def commits_lines(result: CommitsResult) -> list[str]:
    """Each revision against the first in words (the analysis package's sentences), warnings first."""
    out = []
    for c in result.comparisons:
        ex = explain_comparison(c.comparison)
        f = c.factors
        clock = f"clock A/B x{f.clock.value:.4f}" if f.clock_known else "clock A/B unknown (taken as 1)"
        out += [f"WARNING: {w}" for w in ex.warnings]
        out.append(f"{c.head.revision.describe()} vs {c.base.revision.describe()}: time x{f.time.value:.4f} = "
                   f"cycles x{f.cycles.value:.4f} x {clock}: {c.verdict}")
        out += [f"  {s}" for s in ex.sentences]
    if result.adaptive_note:
        out.append(result.adaptive_note)
    return out


def commits_gate_line(result: CommitsResult, *, threshold: float | None, unresolved: str = "fail") -> str:
    """The gate's line over every revision (`harness.report.gate_line`), naming the threshold applied."""
    names = {id(c.comparison): c.head.revision.describe() for c in result.comparisons}
    return gate_line([c.comparison for c in result.comparisons], threshold=threshold, unresolved=unresolved,
                     label=lambda cmp, row: names[id(cmp)])


def commits_markdown(result: CommitsResult, *, threshold: float | None = None, unresolved: str = "fail") -> str:
    """A Markdown summary: the table, the sentences, the dirty-tree record, and the gate's line."""
    lines = [f"# bench commits: {result.kernel}", "", commits_table(result).to_markdown(), ""]
    lines += [f"- {x}" for x in commits_lines(result)] + [""]
    for run in result.runs:
        lines.append(f"- {run.revision.describe()} `{run.revision.commit}` {run.revision.subject}: results "
                     f"`{run.run_dir}` ({run.status})")
    if result.dirty_files:
        lines += ["", f"Measured with --allow-dirty: uncommitted changes to {', '.join(result.dirty_files)} were "
                      f"not part of any revision measured."]
    if threshold is not None:
        head, _, rest = commits_gate_line(result, threshold=threshold, unresolved=unresolved).partition(":")
        lines += ["", f"**{head}**:{rest}"]
    return "\n".join(lines).rstrip() + "\n"
