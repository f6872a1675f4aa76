"""Git plumbing for `bench commits`: revisions are resolved and checked out by git itself.

Every call passes an argument list to `subprocess.run` (never a shell), so a revision such as
`main; rm -rf /` is one odd name that git rejects, not a command. A leading `-` is refused before git
sees it: git would read it as an option.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from harness.errors import ConfigError

__all__ = ["RevisionError", "DirtyWorktreeError", "Revision", "repo_root", "resolve_revision", "dirty_files",
           "check_clean", "worktrees"]


class RevisionError(ConfigError):
    """A revision that git cannot resolve to a commit, or a path that is not a git repository."""


class DirtyWorktreeError(ConfigError):
    """The repository has uncommitted changes that a comparison of commits would silently leave out."""


@dataclass(frozen=True, kw_only=True)
class Revision:
    """A revision as the user named it (`label`) and the commit git resolved it to."""

    label: str
    commit: str
    subject: str = ""

    @property
    def short(self) -> str:
        return self.commit[:12]

    def describe(self) -> str:
        return self.label if self.label.startswith(self.short[:7]) else f"{self.label} ({self.short})"


def _git(repo: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    if shutil.which("git") is None:
        raise RevisionError("git is not on PATH: `bench commits` needs git to resolve and check out revisions.")
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout)


def repo_root(path: str | Path) -> Path:
    """The top of the git work tree holding `path`."""
    path = Path(path)
    if not path.is_dir():
        raise RevisionError(f"--repo {path} is not a directory.")
    out = _git(path, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        raise RevisionError(
            f"--repo {path} is not inside a git repository ({out.stderr.strip() or 'git rev-parse failed'}). "
            f"`bench commits` checks out revisions with git; point --repo at a clone."
        )
    return Path(out.stdout.strip())


def resolve_revision(repo: Path, rev: str) -> Revision:
    """`git rev-parse --verify REV^{commit}`: a branch, tag, sha or `HEAD~2` becomes one commit."""
    if not rev or rev.startswith("-"):
        raise RevisionError(f"Revision {rev!r} is not a revision name (a leading '-' would be read as an option).")
    out = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if out.returncode != 0 or not out.stdout.strip():
        raise RevisionError(
            f"Revision {rev!r} does not exist in {repo}: `git rev-parse --verify {rev}^{{commit}}` found no commit. "
            f"Check the name with `git log --oneline` or `git branch -a` (a remote branch needs `git fetch` first)."
        )
    commit = out.stdout.strip()
    subject = _git(repo, "log", "-1", "--format=%s", commit).stdout.strip()
    return Revision(label=rev, commit=commit, subject=subject)


def dirty_files(repo: Path, *, under: str = ".") -> list[str]:
    """Tracked files with uncommitted changes under `under` (`git status --porcelain --untracked-files=no`)."""
    out = _git(repo, "status", "--porcelain", "--untracked-files=no", "--", under)
    if out.returncode != 0:
        raise RevisionError(f"`git status` failed in {repo}: {out.stderr.strip()}")
    return [line[3:] for line in out.stdout.splitlines() if line.strip()]


def check_clean(repo: Path, *, allow_dirty: bool, under: str = ".") -> list[str]:
    """Refuse a dirty work tree unless `allow_dirty`; return the dirty files either way (to be recorded).

    Revisions are checked out into fresh worktrees, so uncommitted edits are never measured: a user who
    edited a kernel and forgot to commit would compare two revisions without the edit and not know it.
    Only `under` counts (the --repo folder inside a larger repository): nothing else is imported.
    """
    files = dirty_files(repo, under=under)
    if files and not allow_dirty:
        listing = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        raise DirtyWorktreeError(
            f"{repo} has uncommitted changes ({listing}). `bench commits` measures committed revisions in "
            f"separate worktrees, so these changes would not be measured. Commit or stash them, or pass "
            f"--allow-dirty to go ahead (recorded with the results)."
        )
    return files


@contextmanager
def worktrees(repo: Path, revisions: Sequence[Revision], *, root: Path) -> Iterator[dict[str, Path]]:
    """A detached git worktree per distinct commit under `root`, removed again on every exit (commit -> path).

    The removal runs with SIGINT, SIGTERM and SIGHUP held back (delivered once it is done), so a second
    Ctrl-C or a `kill` during clean-up cannot leave a worktree registered in the user's repository.
    """
    made: dict[str, Path] = {}
    try:
        for rev in revisions:
            if rev.commit in made:
                continue
            path = Path(root) / f"rev-{len(made)}-{rev.short}"
            made[rev.commit] = path  # before git runs: an interrupted `worktree add` is removed too
            out = _git(repo, "worktree", "add", "--detach", "--quiet", str(path), rev.commit, timeout=600)
            if out.returncode != 0:
                raise RevisionError(f"`git worktree add` of {rev.describe()} failed: {out.stderr.strip()}")
        yield made
    finally:
        with _signals_held():
            for path in made.values():
                _git(repo, "worktree", "remove", "--force", str(path))
            _git(repo, "worktree", "prune")


@contextmanager
def _signals_held():
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
