"""Comparing kernel code over time: revisions of a repository (`bench commits`) and the nightly baseline.

`compare_commits` checks each revision out into its own git worktree, imports that revision's kernel
in its own worker process, times the revisions interleaved (A B A B) on one device with identical
inputs, and decomposes each later revision against the first: time = cycles x clock.

`run_nightly` / `judge_nightly` are the nightly CI job: the suite, compared with a stored baseline or judged against
its history (harness.history), with a Markdown summary, the HTML report and a verdict. `bisect_commits` finds the
first slower commit between two, one `compare_commits` pair run a step.

>>> from harness.commits import VERDICT_EXIT
>>> VERDICT_EXIT["fail"], VERDICT_EXIT["across machines"]
(1, 0)
"""

from harness.commits._bisect import BisectResult, BisectStep, bisect_commits, commit_line
from harness.commits._git import DirtyWorktreeError, Revision, RevisionError, check_clean, repo_root, resolve_revision
from harness.commits._loader import MissingKernelError, load_revision_kernel, revision_entry_points
from harness.commits._nightly import (
    GPU_SPREAD_ALLOWANCE,
    VERDICT_EXIT,
    NightlyResult,
    gpu_change,
    gpu_identity,
    judge_nightly,
    machine_warning,
    read_baseline,
    run_nightly,
    store_baseline,
)
from harness.commits._nightly_history import HistoryOutcome, HistoryRequest
from harness.commits._result import (
    CLOCK_UNKNOWN_BASIS,
    CommitComparison,
    CommitsResult,
    Factors,
    RevisionRun,
    commits_gate_line,
    commits_lines,
    commits_markdown,
    commits_table,
    factors,
)
from harness.commits._session import CommitsConfig, WorkerError, compare_commits

__all__ = [
    "BisectResult",
    "BisectStep",
    "bisect_commits",
    "commit_line",
    "CLOCK_UNKNOWN_BASIS",
    "CommitComparison",
    "CommitsConfig",
    "CommitsResult",
    "DirtyWorktreeError",
    "Factors",
    "MissingKernelError",
    "NightlyResult",
    "Revision",
    "RevisionError",
    "RevisionRun",
    "VERDICT_EXIT",
    "WorkerError",
    "check_clean",
    "commits_gate_line",
    "commits_lines",
    "commits_markdown",
    "commits_table",
    "compare_commits",
    "factors",
    "judge_nightly",
    "load_revision_kernel",
    "GPU_SPREAD_ALLOWANCE",
    "HistoryOutcome",
    "HistoryRequest",
    "gpu_change",
    "gpu_identity",
    "machine_warning",
    "read_baseline",
    "repo_root",
    "resolve_revision",
    "revision_entry_points",
    "run_nightly",
    "store_baseline",
]
