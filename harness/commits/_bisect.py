"""`bench bisect`: the first commit where a slowdown appeared, by binary search over the commits between GOOD and BAD,
each step an interleaved pair run of `bench commits` (the last known good commit against the middle candidate)
judged by the same verdict rule at the same threshold (asv find, with this project's intervals).

The commits are BAD's first-parent line back to GOOD (`git rev-list --first-parent --ancestry-path GOOD..BAD`);
GOOD must be an ancestor of BAD. The ends are compared first: when BAD is not slower than GOOD at the threshold
there is nothing to find, and the search says so instead of walking to an arbitrary commit. Each step:
- `slower`: the candidate holds the change: it is the new BAD;
- `same` (or `faster`): it does not: it is the new GOOD;
- `unresolved` (the interval is wider than the threshold): the search stops there and names the range left,
  rather than guess (more pairs, `--repeats` / `--until-ci`, resolve it).
With `confirm`, the last good and the first bad commit are compared directly at the end.

Confidence: every step's verdict comes from an interval at the rule's level (95 %); the search is right when all
k steps are, which holds with probability at least 1 - k x (1 - level) (a union bound; the steps are
independent runs, so the true figure is higher). The direct comparison of the two commits is a 95 % statement of
its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.analysis import VerdictRule
from harness.commits._git import Revision, RevisionError, _git, repo_root, resolve_revision
from harness.commits._session import compare_commits
from harness.errors import ConfigError

__all__ = ["BisectStep", "BisectResult", "bisect_commits", "commit_line"]


@dataclass(frozen=True, kw_only=True)
class BisectStep:
    """One pair run: `good` (the last known good commit) against `candidate`."""

    good: Revision
    candidate: Revision
    verdict: str
    time: object  # harness.analysis.Ratio, candidate / good
    cycles: object | None
    clock: object | None
    pairs: int
    left: int  # commits still in question after this step
    role: str = "step"  # "ends" (GOOD against BAD), "step", or "confirm"
    run_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True, kw_only=True)
class BisectResult:
    status: str  # found, no change, unresolved
    good: Revision  # the last good commit
    bad: Revision  # the first bad commit (found), or the end of the range left (unresolved)
    commits: tuple[Revision, ...]  # GOOD's successors up to BAD, in order
    steps: tuple[BisectStep, ...]
    level: float
    threshold: float
    sentence: str

    @property
    def confidence(self) -> float:
        """At least this probability that every step's verdict was right (union bound over the judged steps)."""
        judged = [s for s in self.steps if s.role != "confirm"]
        return max(0.0, 1 - len(judged) * (1 - self.level))


def _line(repo: Path, good: Revision, bad: Revision) -> list[Revision]:
    if _git(repo, "merge-base", "--is-ancestor", good.commit, bad.commit).returncode != 0:
        raise RevisionError(f"GOOD {good.describe()} is not an ancestor of BAD {bad.describe()} in {repo}: bisect walks "
                            f"BAD's history back to GOOD. Swap them, or name a GOOD commit BAD descends from.")
    out = _git(repo, "rev-list", "--first-parent", "--ancestry-path", "--reverse", "--format=%s",
               f"{good.commit}..{bad.commit}").stdout.splitlines()
    revs = []
    for head, subject in zip(out[::2], out[1::2]):
        commit = head.split()[-1]
        revs.append(Revision(label=commit[:10], commit=commit, subject=subject))
    if not revs or revs[-1].commit != bad.commit:
        raise RevisionError(f"BAD {bad.describe()} is not on the first-parent line from GOOD {good.describe()}; bisect "
                            f"follows first parents. Name the merge commit, or a GOOD on that line.")
    return revs


def commit_line(step: BisectStep) -> str:
    """One line per step: `good..candidate: slower x1.0121 [1.0090, 1.0152] (cycles x1.0119, clock x1.0002), 3 pairs`."""
    t = step.time
    split = (f" (cycles x{step.cycles.value:.4f}, clock x{step.clock.value:.4f})" if step.cycles and step.clock else "")
    return (f"{step.role:>7}  {step.good.short[:10]} vs {step.candidate.short[:10]} {step.candidate.subject[:48]!r}: "
            f"{step.verdict} x{t.value:.4f} [{t.low:.4f}, {t.high:.4f}]{split}, {step.pairs} pairs; "
            f"{step.left} commit(s) left")


def bisect_commits(config, *, good: str, bad: str, confirm: bool = True, check_ends: bool = True,
                   pair: Callable | None = None, on_message: Callable[[str], None] = lambda text: None,
                   command: str = "") -> BisectResult:
    """Find the first slower commit between `good` and `bad` (see the module doc). `config` is the CommitsConfig of
    every step (its `revisions` are replaced); `pair(config) -> CommitsResult` runs one step (compare_commits)."""
    run_pair = pair or (lambda cfg: compare_commits(cfg, on_message=on_message, command=command))
    root = repo_root(config.repo)
    g, b = resolve_revision(root, good), resolve_revision(root, bad)
    if g.commit == b.commit:
        raise ConfigError(f"GOOD and BAD are one commit ({g.short}): name two commits, the one without the slowdown "
                          f"first.")
    line = _line(root, g, b)
    rule = config.rule or VerdictRule()
    if not rule.threshold or rule.threshold <= 0:
        raise ConfigError("bench bisect judges each step at a threshold: give --fail-on-slowdown (e.g. 1%).")
    steps: list[BisectStep] = []

    def step(a: Revision, c: Revision, *, role: str, left: int) -> BisectStep:
        on_message(f"{role}: {a.short[:10]} against {c.short[:10]} {c.subject[:48]!r} ({left} commit(s) in question)")
        res = run_pair(dataclasses.replace(config, revisions=(a.commit, c.commit), rule=rule))
        cmp = res.comparisons[0]
        row = cmp.row
        s = BisectStep(good=a, candidate=c, verdict=row.verdict, time=row.time, cycles=row.cycles, clock=row.clock,
                       pairs=min(row.repeats_a, row.repeats_b), left=left, role=role,
                       run_dirs=tuple(Path(r.run_dir) for r in res.runs))
        steps.append(s)
        on_message(commit_line(s))
        return s

    lo, hi = -1, len(line) - 1  # line[lo] is good (-1: GOOD itself), line[hi] is bad
    at = lambda i: g if i < 0 else line[i]
    done = lambda status, sentence: BisectResult(status=status, good=at(lo), bad=at(hi), commits=tuple(line),
                                                 steps=tuple(steps), level=rule.level, threshold=rule.threshold,
                                                 sentence=sentence)
    if check_ends:
        ends = step(g, b, role="ends", left=len(line))
        if ends.verdict == "unresolved":
            return done("unresolved", f"GOOD against BAD is unresolved at the {rule.threshold:.2%} threshold "
                                      f"({_x(ends)}): more pairs (--repeats, --until-ci) would tell.")
        if ends.verdict != "slower":
            return done("no change", f"BAD is not slower than GOOD at the {rule.threshold:.2%} threshold "
                                     f"({ends.verdict} {_x(ends)}): there is no slowdown to find between them.")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        s = step(at(lo), line[mid], role="step", left=hi - lo - 1)
        if s.verdict == "slower":
            hi = mid
        elif s.verdict in ("same", "faster"):
            lo = mid
        else:
            return done("unresolved", f"stopped: {line[mid].short[:10]} against {at(lo).short[:10]} is {s.verdict} "
                                      f"({_x(s)}); the change lies in {at(lo).short[:10]}..{at(hi).short[:10]} "
                                      f"({hi - lo} commit(s)). More pairs (--repeats, --until-ci) would resolve it.")
    check = ""
    if confirm and (not steps or steps[-1].good.commit != at(lo).commit or steps[-1].candidate.commit != at(hi).commit):
        c = step(at(lo), at(hi), role="confirm", left=1)
        check = (f" Compared directly, {at(hi).short[:10]} against {at(lo).short[:10]} is {c.verdict} {_x(c)}"
                 + ("" if c.verdict == "slower" else ": the direct comparison does not confirm it, so treat the "
                    "result with care (a change spread over several commits, or noise).") + ".")
    judged = len([s for s in steps if s.role != "confirm"])
    result = done("found", "")
    return dataclasses.replace(result, sentence=(
        f"First slower commit: {at(hi).short[:10]} {at(hi).subject!r} (after {at(lo).short[:10]}), found in "
        f"{judged} pair run(s) at the {rule.threshold:.2%} threshold; every step right with probability at least "
        f"{result.confidence:.0%} (each verdict at {rule.level:.0%}).{check}"))


def _x(s: BisectStep) -> str:
    return f"x{s.time.value:.4f} [{s.time.low:.4f}, {s.time.high:.4f}]"
