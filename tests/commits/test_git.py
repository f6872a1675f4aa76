"""Revisions resolved by git without a shell, dirty trees refused, worktrees made and removed."""

from __future__ import annotations

import pytest
from commits_repo import commit_all, git

from harness.commits import DirtyWorktreeError, RevisionError, check_clean, repo_root, resolve_revision
from harness.commits._git import worktrees


def test_resolve_branch_tag_and_relative(kernel_repo):
    head = git(kernel_repo, "rev-parse", "HEAD")
    assert resolve_revision(kernel_repo, "main").commit == head
    assert resolve_revision(kernel_repo, "HEAD~1").commit == git(kernel_repo, "rev-parse", "one")
    rev = resolve_revision(kernel_repo, head[:9])
    assert rev.commit == head and rev.subject == "twice" and rev.describe() == head[:9]


@pytest.mark.parametrize("name", ["no-such-branch", "HEAD~7", "main; rm -rf /", "$(touch pwned)"])
def test_revision_that_does_not_exist(kernel_repo, name):
    with pytest.raises(RevisionError, match="does not exist in .*git rev-parse --verify"):
        resolve_revision(kernel_repo, name)
    assert not (kernel_repo / "pwned").exists()


def test_revision_that_looks_like_an_option(kernel_repo):
    with pytest.raises(RevisionError, match="leading '-'"):
        resolve_revision(kernel_repo, "--all")


def test_not_a_repository(tmp_path):
    with pytest.raises(RevisionError, match="is not inside a git repository"):
        repo_root(tmp_path)


def test_dirty_worktree_refused_then_allowed(kernel_repo):
    (kernel_repo / "README.md").write_text("edited\n")
    with pytest.raises(DirtyWorktreeError, match=r"uncommitted changes \(README.md\).*--allow-dirty"):
        check_clean(kernel_repo, allow_dirty=False)
    assert check_clean(kernel_repo, allow_dirty=True) == ["README.md"]


def test_untracked_files_do_not_make_it_dirty(kernel_repo):
    (kernel_repo / "notes.txt").write_text("scratch\n")
    assert check_clean(kernel_repo, allow_dirty=False) == []


def test_worktrees_hold_each_revision_and_are_removed(kernel_repo, tmp_path):
    revs = [resolve_revision(kernel_repo, r) for r in ("one", "main", "HEAD")]
    with worktrees(kernel_repo, revs, root=tmp_path / "wt") as trees:
        assert len(trees) == 2  # main and HEAD are one commit: one worktree
        texts = {c: (p / "example_kernels" / "__init__.py").read_text() for c, p in trees.items()}
        assert texts[revs[0].commit].count("scaled_dot_product_attention(q") == 1
        assert texts[revs[1].commit].count("scaled_dot_product_attention(q") == 2
    assert not any(p.exists() for p in trees.values())
    assert git(kernel_repo, "worktree", "list").count("\n") == 0  # only the main work tree is left


def test_a_later_commit_is_seen(kernel_repo):
    (kernel_repo / "extra.py").write_text("X = 1\n")
    sha = commit_all(kernel_repo, "three")
    assert resolve_revision(kernel_repo, "HEAD").commit == sha
