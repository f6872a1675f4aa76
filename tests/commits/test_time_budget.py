"""--max-time-s: the adaptive stage of `bench commits` stops before a pair that would end past the limit."""

import pytest

from harness.commits import CommitsConfig
from harness.commits._schedule import next_pair_fits
from harness.config import SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec


def test_a_pair_is_begun_only_when_one_as_long_as_the_mean_still_fits():
    # 5 pairs in 100 s: 20 s a pair, so the 6th ends at 120 s.
    assert next_pair_fits(100.0, 5, 120.0)
    assert not next_pair_fits(100.1, 5, 120.0)
    assert next_pair_fits(1e9, 5, None)  # no limit
    assert next_pair_fits(0.0, 0, 1.0)  # nothing to estimate a pair from: the pilot is always taken


def _config(**kw):
    spec = InputSpec(source="gaussian:0.1", shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64,
                                                                 head_dim_qk=16), dtype="fp32")
    return CommitsConfig(repo=".", kernel="k", revisions=("a", "b"), input=spec, device="cpu", **kw)


def test_the_limit_is_refused_without_adaptive_repeats_and_below_zero():
    with pytest.raises(ConfigError, match="--max-time-s limits the adaptive repeats of --until-ci"):
        _config(max_time_s=60.0)
    with pytest.raises(ConfigError, match="--max-time-s -1: give a number of seconds above 0"):
        _config(max_time_s=-1.0, protocol=SustainedProtocol(until_ci=0.003, max_repeats=10))
    assert _config(max_time_s=60.0, protocol=SustainedProtocol(until_ci=0.003, max_repeats=10)).max_time_s == 60.0


@pytest.mark.slow
def test_the_adaptive_stage_ends_at_the_limit_and_says_so(kernel_repo, quiet_cpu, tmp_path):
    """A target no CPU pilot meets (0.01 %) and a limit the pilot alone uses up: the pairs stop at the pilot's 2
    (look 1 left the revision open), and the note names --max-time-s, not --max-repeats, as what stopped them.
    (--max-repeats 6: the plan's critical values are in the committed table; those of a look 2 at 50 pairs are
    simulated on first use, 4.8 s of this test. The limit stops the pairs the same way.)"""
    from commits_repo import SMALL
    from typer.testing import CliRunner

    from harness.cli import app

    res = CliRunner().invoke(app, ["commits", "--repo", str(kernel_repo), "--kernel", "example-attention", *SMALL,
                                   "--repeats", "2", "--window-s", "0.1", "--until-ci", "0.01%", "--max-repeats", "6",
                                   "--max-time-s", "0.5", "--results", str(tmp_path), "main", "main"],
                             env={"COLUMNS": "240"})
    out = " ".join(res.output.split())
    assert res.exit_code == 0, out
    assert "--max-time-s 0.5: 2 pairs in " in out and "one more would end past the limit" in out
    assert ("sequential: look 1 on the pilot's 2 pairs left a revision unresolved; no look 2: --max-time-s 0.5: one "
            "more pair would have ended past it") in out
