"""`--sustained-compare-fail` judges by the rules of every gate (issue 39): separate sessions carry the between-run
variance, CPU timings follow the CPU rule, a session of the same commit is an A/A check, an unjudged test is no
pass, and the sentences name no flag pytest does not take."""

from __future__ import annotations

from harness.report import saved_comparison
from harness.suite import verdict_rule

CPU = "CPU timings (not sustained-clock figures)"


def _extra(times, *, kernel="k", device="cpu", caveats=(CPU,)):
    return {"kernel": kernel, "input": "gaussian:1", "device": device, "caveats": list(caveats),
            "repeats_rows": [{"repeat": i, "time_ns": t, "status": "ok"} for i, t in enumerate(times)]}


def _judge(old, new, *, pct="2%", **kw):
    rule, threshold = verdict_rule(pct, flag="--sustained-compare-fail")
    saved = {"test_k": {"extra_info": old}}
    return saved_comparison([("test_k", new)], saved, rule=rule, threshold=threshold, **kw)


def test_a_same_commit_second_session_on_the_cpu_is_an_aa_check_not_a_speedup():
    # Issue 39: the second of two same-commit sessions read "B is 79.9 % faster [0.1010, 0.4006]", advising
    # --until-ci (a `bench` flag). Now: the between-run variance of a CPU is in the interval, and the commit says
    # it is the same code.
    same = "the saved benchmarks and this session ran the same commit (abc): an A/A check of the noise"
    sentences, line, failed = _judge(_extra([1000.0, 1010.0, 990.0]), _extra([201.0, 205.0, 199.0]), pct="100%",
                                     same_code=same)
    assert not failed and line.startswith("PASS") and same in line
    assert "--until-ci" not in " ".join(sentences) and "between-run cv of 5 % (default for a CPU)" in line


def test_a_test_it_cannot_judge_fails_the_session_unless_asked_otherwise():
    old, new = _extra([1000.0, 1040.0, 980.0]), _extra([1003.0, 1050.0, 990.0])
    sentences, line, failed = _judge(old, new)
    assert failed and line.startswith("NOT RESOLVED: 1 of 1 compared could not be judged at the 2 % "
                                      "(--sustained-compare-fail 2%) threshold")
    assert "--until-ci" not in " ".join(sentences)
    _, line, failed = _judge(old, new, unresolved="pass")
    assert not failed and line.startswith("PASS (--unresolved pass)")


def test_two_repeats_give_no_usable_interval_and_no_pass():
    _, line, failed = _judge(_extra([1000.0, 5000.0]), _extra([1000.0, 300.0]))
    assert failed and "no usable interval (2+2 repeats): add repeats" in line


def test_a_real_slowdown_on_a_gpu_fails():
    old = _extra([3.90e6, 3.901e6, 3.899e6], device="cuda", caveats=())
    new = _extra([4.10e6, 4.101e6, 4.099e6], device="cuda", caveats=())
    sentences, line, failed = _judge(old, new)
    assert failed and line.startswith("FAIL: 1 slower beyond the 2 % (--sustained-compare-fail 2%) threshold")
    assert "between-run cv of 0.5 % (default for a GPU)" in line


def test_no_saved_rows_is_no_pass():
    _, line, failed = saved_comparison([("t", _extra([1.0, 1.0, 1.0]))], {}, rule=verdict_rule("2%")[0],
                                       threshold=0.02)
    assert failed and line.startswith("NOT RESOLVED: nothing judged by --sustained-compare-fail")
