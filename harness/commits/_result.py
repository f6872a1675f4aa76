"""What `bench commits` returns: one results run per revision and each later revision against the first.

The decomposition is the analysis package's (`compare_runs`): time B/A = cycles B/A x clock A/B with
bootstrap intervals over repeats and its verdict rule. Where no clock was recorded (a CPU without
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

from harness.commits._git import Revision

__all__ = ["RevisionRun", "CommitComparison", "CommitsResult", "Factors", "factors", "commits_table",
           "commits_markdown", "CLOCK_UNKNOWN_BASIS"]

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

    def slowdowns(self, threshold: float) -> tuple[CommitComparison, ...]:
        """Comparisons whose verdict is `slower` by more than `threshold` (0.02 = 2 %)."""
        return tuple(c for c in self.comparisons if c.comparison.slowdowns(threshold))


def _ratio(r) -> str:
    if r is None:
        return "-"
    return f"{r.value:.4f}" if r.low is None else f"{r.value:.4f} [{r.low:.4f}, {r.high:.4f}]"


def commits_table(result: CommitsResult):
    """The decomposition of each revision against the first, as a report table (terminal, Markdown, HTML)."""
    from harness.report import ReportTable, fmt

    rows = []
    for c in result.comparisons:
        f, r = c.factors, c.row
        rows.append((
            c.base.revision.describe(), c.head.revision.describe(), fmt(r.time_a_ns, ".4f", scale=1e-6),
            fmt(r.time_b_ns, ".4f", scale=1e-6), _ratio(f.time),
            _ratio(f.cycles) + ("" if f.clock_known else " (assumes equal clocks)"),
            _ratio(f.clock) if f.clock_known else "1 (unknown)",
            f"{fmt(r.clock_a_mhz, '.0f')} / {fmt(r.clock_b_mhz, '.0f')}", r.limiter_a, r.limiter_b,
            r.verdict + (f" ({r.note})" if r.note else ""),
        ))
    level = f"{result.rule.level:.0%}"
    basis = {c.factors.basis for c in result.comparisons}
    return ReportTable(
        title=f"{result.kernel} on {result.input_label}, {result.device_name}: each revision (B) against {result.runs[0].revision.describe()} (A)",
        columns=("A", "B", "A ms", "B ms", "time B/A", "= cycles B/A", "x clock A/B", "MHz A / B", "limiter A",
                 "limiter B", "verdict"),
        rows=tuple(rows), left=2,
        caption=(f"geometric means over interleaved repeats, [{level} bootstrap interval]; " + "; ".join(sorted(basis))
                 + f". Verdict: {result.rule.describe()}."),
    )


def commits_markdown(result: CommitsResult, *, threshold: float | None = None) -> str:
    """A Markdown summary: the table, the dirty-tree record, and the slowdown verdict."""
    lines = [f"# bench commits: {result.kernel}", "", commits_table(result).to_markdown(), ""]
    for run in result.runs:
        lines.append(f"- {run.revision.describe()} `{run.revision.commit}` {run.revision.subject}: results "
                     f"`{run.run_dir}` ({run.status})")
    if result.dirty_files:
        lines += ["", f"Measured with --allow-dirty: uncommitted changes to {', '.join(result.dirty_files)} were "
                      f"not part of any revision measured."]
    if threshold is not None:
        slow = result.slowdowns(threshold)
        verdict = (f"FAIL: slower by more than {threshold:.1%}: " + ", ".join(c.head.revision.describe() for c in slow)
                   if slow else f"PASS: no revision slower by more than {threshold:.1%}")
        lines += ["", f"**{verdict}**"]
    return "\n".join(lines).rstrip() + "\n"
