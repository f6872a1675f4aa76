"""`bench bisect`: a binary search of pair runs over a real 16-commit repository, each step's verdict given by a pair
runner that knows which commit is slower (the pair runs themselves are `bench commits`', tested there)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.analysis import Ratio, VerdictRule
from harness.commits import CommitsConfig, bisect_commits
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """16 commits of a plain function; commit 11 (1-based) adds one elementwise pass over a quarter of the output."""
    root = tmp_path_factory.mktemp("bisect") / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "t")
    _git(root, "config", "user.email", "t@example.com")
    shas = []
    for i in range(1, 17):
        body = "    out[:, :, : out.shape[2] // 4].mul_(1.0)\n" if i >= 11 else ""
        (root / "attn.py").write_text(f"# revision {i}\ndef attn(q, k, v):\n    out = q.clone()\n{body}    return out\n")
        _git(root, "add", "attn.py")
        _git(root, "commit", "-q", "-m", f"commit {i}")
        shas.append(_git(root, "rev-parse", "HEAD"))
    return root, shas


def _config(repo: Path) -> CommitsConfig:
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=16), dtype="fp32",
                     source="gaussian:0.1")
    return CommitsConfig(repo=repo, kernel="attn.py:attn", revisions=("a", "b"), input=spec, device="cpu",
                         rule=VerdictRule().with_threshold(0.01, source="--fail-on-slowdown 1%"))


class Pairs:
    """A pair runner: the candidate is slower by 2 % when it holds commit `bad` (1-based) and its base does not."""

    def __init__(self, shas, bad, *, unresolved_at=None):
        self.shas, self.bad, self.unresolved_at, self.calls = shas, bad, unresolved_at, []

    def __call__(self, cfg):
        a, b = (self.shas.index(c) + 1 for c in cfg.revisions)
        self.calls.append((a, b))
        slower = a < self.bad <= b
        verdict = "unresolved" if b == self.unresolved_at else "slower" if slower else "same"
        r = 1.02 if slower else 1.0005
        row = SimpleNamespace(verdict=verdict, time=Ratio(value=r, low=r - 0.004, high=r + 0.004),
                              cycles=Ratio(value=r, low=r - 0.004, high=r + 0.004),
                              clock=Ratio(value=1.0, low=0.999, high=1.001), repeats_a=3, repeats_b=3)
        return SimpleNamespace(comparisons=[SimpleNamespace(row=row)], runs=[SimpleNamespace(run_dir=f"r{a}"),
                                                                            SimpleNamespace(run_dir=f"r{b}")])


def test_bisect_finds_commit_11_in_a_log_number_of_pair_runs(repo):
    root, shas = repo
    pairs = Pairs(shas, 11)
    res = bisect_commits(_config(root), good=shas[0], bad=shas[-1], pair=pairs)
    assert res.status == "found" and res.bad.commit == shas[10] and res.good.commit == shas[9]
    assert res.bad.subject == "commit 11" and len(res.commits) == 15
    assert pairs.calls[0] == (1, 16)  # the ends first
    # ceil(log2 15) = 4 steps, each against the last good commit; the last compared 10 with 11 directly (no confirm)
    assert pairs.calls[1:] == [(1, 8), (8, 12), (8, 10), (10, 11)]
    assert [s.role for s in res.steps] == ["ends", "step", "step", "step", "step"]
    assert res.confidence == pytest.approx(1 - 5 * 0.05)
    assert "First slower commit" in res.sentence and shas[10][:10] in res.sentence and "at least 75%" in res.sentence


def test_no_slowdown_between_the_ends_is_said_not_searched(repo):
    root, shas = repo
    pairs = Pairs(shas, 99)
    res = bisect_commits(_config(root), good=shas[0], bad=shas[-1], pair=pairs)
    assert res.status == "no change" and pairs.calls == [(1, 16)] and "no slowdown to find" in res.sentence


def test_an_unresolved_step_stops_and_names_the_range_left(repo):
    root, shas = repo
    res = bisect_commits(_config(root), good=shas[0], bad=shas[-1], pair=Pairs(shas, 11, unresolved_at=8))
    assert res.status == "unresolved" and "More pairs" in res.sentence
    assert res.good.commit == shas[0] and res.bad.commit == shas[-1]


def test_good_must_be_an_ancestor_of_bad(repo):
    root, shas = repo
    with pytest.raises(ConfigError, match="not an ancestor"):
        bisect_commits(_config(root), good=shas[5], bad=shas[2], pair=Pairs(shas, 11))
    with pytest.raises(ConfigError, match="one commit"):
        bisect_commits(_config(root), good=shas[5], bad=shas[5], pair=Pairs(shas, 11))


def test_a_final_range_never_compared_directly_is_confirmed(repo):
    root, shas = repo
    pairs = Pairs(shas, 8)  # the search ends on 7 (same as 6) and 8 (slower than 1): 7 against 8 never ran
    res = bisect_commits(_config(root), good=shas[0], bad=shas[-1], pair=pairs)
    assert res.status == "found" and res.bad.commit == shas[7]
    assert pairs.calls[-1] == (7, 8) and res.steps[-1].role == "confirm" and "Compared directly" in res.sentence
    assert res.confidence == pytest.approx(1 - (len(res.steps) - 1) * 0.05)  # the confirm is not a search step
