"""How a comparison is judged unless told otherwise: the verdict rule and its threshold, what a gate does with a row
it could not judge, the target of adaptive repeats, and the nightly job's and the history's defaults."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.analysis import UNRESOLVED_POLICIES, VerdictRule, parse_threshold, parse_until_ci
from harness.errors import ConfigError
from harness.history import LEVEL, MIN_NIGHTS, NIGHTS

__all__ = ["HISTORY_RECENT", "HISTORY_CONTROL", "HISTORY_CONTROL_GEMM", "HistorySettings", "history_settings",
           "NIGHTLY_RESULTS", "NIGHTLY_BASELINE", "NIGHTLY_FAIL_ON_SLOWDOWN", "UNRESOLVED_DEFAULT", "unresolved_policy", "verdict_rule",
           "until_ci", "nightly_until_ci"]


# The history's defaults (`bench history`, `bench nightly --history`): the verdict against the last N comparable
# nights (harness.history.NIGHTS, at its LEVEL), the change points of the last HISTORY_RECENT nights in a PR comment,
# and the control timed every night beside the suite: the bf16 GEMM at its power-capped peak (random operands),
# whose code never changes with the repository's; on the CPU (a dry run) at M = N = K = 256, which takes
# milliseconds there, not the GPU's 8192 (harness.profiling.peak_registry's default).
HISTORY_RECENT = 30
HISTORY_CONTROL = {"cuda": "peak-gemm-bf16-random", "rocm": "peak-gemm-bf16-random", "cpu": "peak-gemm-bf16-random"}
HISTORY_CONTROL_GEMM = {"cpu": 256}


@dataclass(frozen=True, kw_only=True)
class HistorySettings:
    """How a history is judged: the threshold (and where it came from), the comparable nights, the level."""

    threshold: float
    threshold_source: str
    nights: int
    level: float


def history_settings(fail_on_slowdown: str | None, *, nights: int | None = None) -> HistorySettings:
    """The history's verdict settings: --fail-on-slowdown (default nightly's 2 %) and --history-nights (default
    harness.history.NIGHTS, at least harness.history.MIN_NIGHTS)."""
    rule, threshold = verdict_rule(fail_on_slowdown, default=NIGHTLY_FAIL_ON_SLOWDOWN)
    if nights is not None and nights < MIN_NIGHTS:
        raise ConfigError(f"--history-nights {nights}: a prediction interval needs at least {MIN_NIGHTS} comparable "
                          f"nights (two degrees of freedom). Give {MIN_NIGHTS} or more (default {NIGHTS}).")
    return HistorySettings(threshold=threshold, threshold_source=rule.threshold_source, nights=nights or NIGHTS,
                           level=LEVEL)


# `bench nightly`'s own defaults: where its outputs go, and its gate (a nightly job judges; compare and commits
# judge only when asked).
NIGHTLY_RESULTS = Path("out/nightly")
NIGHTLY_BASELINE = Path("baseline")  # where the baseline run is kept between nights (without --history)
NIGHTLY_FAIL_ON_SLOWDOWN = "2%"


# What a gate does with a row it could not judge (`unresolved`, `too few repeats`): fail (exit 6) or pass.
UNRESOLVED_DEFAULT = "fail"


def unresolved_policy(text: str | None, *, flag: str = "--unresolved") -> str:
    """`--unresolved fail|pass` as typed, or the default (fail: no gate passes what it could not judge)."""
    if text is None:
        return UNRESOLVED_DEFAULT
    if text not in UNRESOLVED_POLICIES:
        raise ConfigError(f"{flag} {text!r}: fail (a row the gate could not judge fails it, exit 6; the default) or "
                          f"pass (such rows pass, and the gate's line still names them).")
    return text


def verdict_rule(fail_on_slowdown: str | None, *, flag: str = "--fail-on-slowdown", default: str | None = None,
                 between_runs_cv: str | None = None):
    """(the comparison's VerdictRule, the gate's threshold or None). The rule judges at the user's threshold where
    one is given (so a 0.3 % gate is a 0.3 % gate), else at the analysis default, and names where it came from.
    `default`: the command's own default gate (nightly's 2 %), used and named when the flag is absent.
    `between_runs_cv`: `--between-runs-cv` as typed (the between-run variance separate runs add; None: the
    device kind's stated default, `harness.analysis.BETWEEN_RUNS_CV`)."""
    base = VerdictRule()
    if between_runs_cv is not None:
        try:
            cv = parse_threshold(between_runs_cv)
        except ConfigError:
            raise ConfigError(f"--between-runs-cv {between_runs_cv!r} is not a percentage; write it like 0.3% (the "
                              f"coefficient of variation between separate runs of this suite, e.g. from A/A nights "
                              f"or `bench history`).") from None
        base = replace(base, between_runs_cv=cv, between_runs_source=f"--between-runs-cv {between_runs_cv}")
    text, source = (fail_on_slowdown, f"{flag} {fail_on_slowdown}") if fail_on_slowdown is not None else (
        (default, f"{flag} default {default}") if default is not None else (None, "default"))
    if text is None:
        return base, None
    threshold = parse_threshold(text)
    return base.with_threshold(threshold, source=source), threshold


def until_ci(text: str | None, *, default: float | None, flag: str = "--until-ci") -> float | None:
    """The target half-width of adaptive repeats as typed, or (None) the command's default (commits: the
    verdict's threshold; sustained: off)."""
    return default if text is None else parse_until_ci(text, flag=flag)


def nightly_until_ci(threshold: float) -> float:
    """Nightly's default target for tonight's own intervals: the gate / sqrt(2), so that with the baseline's side
    as narrow the comparison's interval is about as wide as the gate."""
    return threshold / 2 ** 0.5
