"""`compare_commits`: one worker process per revision, repeats interleaved A B A B on one device.

Why persistent workers rather than a fresh process per measurement: a worker imports its revision's
kernel, prepares it (compiling a Triton kernel once), gates it and builds its inputs once, then times
one repeat per request. A fresh process per repeat would pay the import, the compile and the CUDA
context again before every repeat, and would put a cold context rather than a prepared kernel at the
start of each warm-in. Only one worker measures at a time; the others sit blocked on their pipe.

Inputs are identical by construction: every worker receives the same InputSpec (shape, dtype, source,
seed) and runs this same harness, whose synthetic inputs are drawn from a seeded CPU generator.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.analysis import OPEN, VerdictRule, compare_runs
from harness.commits._git import Revision, check_clean, repo_root, resolve_revision, worktrees
from harness.commits._result import CommitComparison, CommitsResult, RevisionRun
from harness.commits._schedule import look_one, measure_timeout, next_pair_fits, pair_order, plan_text
from harness.commits._worker import spec_to_json
from harness.config import RunConfig, RunSettings, SustainedProtocol, protocol_from_dict
from harness.errors import ConfigError, HarnessError, KernelError
from harness.inputs import InputSpec
from harness.results import end_abandoned_run, read_run_rows
from harness.workers import WaitExpired, Worker, child_env, exit_words, prestart

__all__ = ["CommitsConfig", "compare_commits", "WorkerError", "Terminated"]


class WorkerError(KernelError):
    """A revision's worker failed: its kernel is missing, failed the gate, or crashed. `cause` says what
    became of the worker, in words the other revisions' runs are stopped with."""

    def __init__(self, message: str, *, cause: str = "") -> None:
        super().__init__(message)
        self.cause = cause or message.split(". ")[0]


@dataclass(frozen=True, kw_only=True)
class CommitsConfig(RunSettings):
    """One `bench commits` invocation (built in harness.suite, which decides its defaults). `revisions[0]` is the base
    every other revision is compared with; each revision's worker runs `run_config` of it."""

    repo: Path
    kernel: str
    revisions: tuple[str, ...]
    input: InputSpec
    protocol: SustainedProtocol = field(default_factory=SustainedProtocol)
    allow_dirty: bool = False
    rule: VerdictRule | None = None  # None: the analysis package's default noise rule
    python: str = sys.executable
    startup_timeout_s: float = 1800.0  # import + compile + gate, per worker (Triton autotuning can be slow)
    # Under --until-ci: no pair is begun after the pilot that would end past this many seconds of timing
    # (counted from the first timed repeat; imports, compiles and gates are not counted). None: no limit.
    max_time_s: float | None = None
    # --until-ci as the user typed it: look 1 also needs every half-width at most this to stop (None: a verdict
    # resolved at the threshold is enough; the protocol's until_ci then only switches the sequential design on).
    width_target: float | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict from which `from_dict` rebuilds an equal CommitsConfig."""
        return {**self._settings_dict(), "repo": str(self.repo), "kernel": self.kernel,
                "revisions": list(self.revisions), "input": self.input.to_dict(), "protocol": self.protocol.to_dict(),
                "allow_dirty": self.allow_dirty, "rule": None if self.rule is None else dataclasses.asdict(self.rule),
                "python": self.python, "startup_timeout_s": self.startup_timeout_s, "max_time_s": self.max_time_s,
                "width_target": self.width_target}

    @classmethod
    def from_dict(cls, d: dict) -> "CommitsConfig":
        return cls(**{**d, "repo": Path(d["repo"]), "revisions": tuple(d["revisions"]),
                      "input": InputSpec.from_dict(d["input"]), "protocol": protocol_from_dict(d["protocol"]),
                      "results_dir": Path(d["results_dir"]),
                      "rule": None if d.get("rule") is None else VerdictRule(**d["rule"])})

    def run_config(self, *, run_name: str, notes: str) -> RunConfig:
        """The RunConfig one revision's worker runs: this config's kernel on its input, under its settings."""
        return RunConfig(**self.settings(), kernels=(self.kernel,), inputs=(self.input,), protocol=self.protocol, run_name=run_name,
                         notes=notes)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_time_s is not None:
            if self.protocol.until_ci is None:
                raise ConfigError("--max-time-s limits the adaptive repeats of --until-ci, which is off here "
                                  "(--until-ci off, or --quick); give --until-ci, or leave --max-time-s out.")
            if not self.max_time_s > 0:
                raise ConfigError(f"--max-time-s {self.max_time_s:g}: give a number of seconds above 0.")
        if len(self.revisions) < 2:
            raise ConfigError(f"`bench commits` needs at least two revisions to compare, got {list(self.revisions)}.")
        if not self.kernel:
            raise ConfigError("Name the kernel to compare with --kernel (a registered name or module:function).")


# How long a worker stopped with SIGTERM (its handler marks its run incomplete) has before SIGKILL.
_TERM_GRACE_S = 10.0


class _Worker:
    """One revision's process (harness.workers: a session of its own), every wait on it with a deadline."""

    def __init__(self, *, revision: Revision, argv: list[str], env: dict, cwd: Path, log: Path) -> None:
        self.revision = revision
        self.log = log
        # A session of its own: a Ctrl-C in the terminal reaches the orchestrator only, which then stops
        # each worker once (a second SIGINT from the terminal would interrupt the worker's own clean-up).
        self.proc = Worker.start(argv, env=env, cwd=cwd, log=log)
        self.run_dir: str | None = None

    def send(self, op: str) -> None:
        self.proc.send({"op": op})  # when the worker is gone, the next expect() reports why

    def _stderr_tail(self, n: int = 15) -> str:
        return "\n".join(self.proc.tail(n))

    def expect(self, events: tuple[str, ...], *, timeout: float, on_message: Callable[[str], None]) -> dict:
        while True:
            try:
                msg = self.proc.receive(timeout=timeout)
            except WaitExpired:  # stuck (it would not read a stop either): its group ends, SIGTERM first
                self.proc.kill(grace_s=_TERM_GRACE_S)
                raise WorkerError(f"The worker of revision {self.revision.describe()} sent nothing for {timeout:.0f} s "
                                  f"(waiting for {'/'.join(events)}); it was stopped. Last lines of its log:\n"
                                  f"{self._stderr_tail()}") from None
            if msg is None:
                rc = self.proc.wait(timeout=30)
                if rc is None:  # its stdout closed but it goes on: it is ended, with whatever it started
                    rc = self.proc.kill(grace_s=_TERM_GRACE_S)
                ended = exit_words(rc)
                cause = f"the worker of revision {self.revision.describe()} {ended}"
                if self.run_dir:  # it could not write its own ending: its run would stay `running`
                    end_abandoned_run(Path(self.run_dir), "failed", f"{cause} while {'/'.join(events)} was expected; "
                                                                   f"the measurements it finished are kept")
                raise WorkerError(
                    f"The worker of revision {self.revision.describe()} {ended} while {'/'.join(events)} was expected. "
                    f"Last lines of its log:\n{self._stderr_tail()}", cause=cause)
            if msg.get("event") == "started":
                self.run_dir = msg.get("run_dir")
            elif msg.get("event") == "message":
                on_message(f"{self.revision.describe()}: {msg['text']}")
            elif msg.get("event") == "error":
                raise WorkerError(msg["message"], cause=f"the worker of revision {self.revision.describe()} failed: "
                                                        f"{msg['message'].split('. ')[0]}")
            elif msg.get("event") in events:
                return msg

    def stop(self, *, interrupt: bool = False, reason: str = "", signum: int = signal.SIGINT) -> None:
        """End the worker. `interrupt`: `signum` first (the signal that stopped `bench commits`: SIGINT, SIGTERM
        or SIGHUP, so its run names the one that did), so a measurement under way ends and its run is marked
        incomplete by the runner; otherwise `stop` on its pipe, read before its next repeat, with the
        `reason` its run is then marked incomplete with. One that has not ended a minute later is killed
        with its whole process group (SIGTERM, then SIGKILL); what it started is ended either way."""
        if self.proc.poll() is None:
            if interrupt:
                self.proc.signal(signum)
            self.proc.send({"op": "stop", "reason": reason})
        self.proc.finish(wait_s=60, grace_s=_TERM_GRACE_S)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached `bench commits`: it ends as a Ctrl-C does (worktrees removed, runs incomplete)."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum).name
        super().__init__(f"stopped by {self.signal}")


@contextmanager
def _terminate_as_interrupt():
    """SIGTERM/SIGHUP raise `Terminated` in the main thread for the duration, so every `finally` runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _same_commit(a: Revision, b: Revision) -> str:
    if a.commit != b.commit:
        return ""
    return (f"{a.describe()} and {b.describe()} are the same commit ({a.commit[:12]}): this is an A/A check of the "
            f"noise, and no gate fails on it")


def compare_commits(config: CommitsConfig, *, on_message: Callable[[str], None] = lambda text: None,
                    command: str = "", clock: Callable[[], float] = time.monotonic) -> CommitsResult:
    """Measure `config.kernel` at every revision, interleaved, and compare each with the first.

    Raises `RevisionError` for a revision git cannot resolve, `DirtyWorktreeError` for uncommitted
    changes (unless `allow_dirty`), and `WorkerError` when a revision's kernel is missing or fails.
    """
    rule = config.rule or VerdictRule()
    root = repo_root(config.repo)
    # --repo may be a folder inside a larger repository: worktrees are of the top level, and the kernels,
    # their imports and pyproject.toml come from that folder in each worktree.
    sub = Path(config.repo).resolve().relative_to(root.resolve())
    revisions = [resolve_revision(root, r) for r in config.revisions]  # all checked before anything runs
    dirty = check_clean(root, allow_dirty=config.allow_dirty, under=str(sub))
    results_dir = Path(config.results_dir).resolve()
    env = child_env()
    prestart(python=config.python, env=env)  # the workers' torch, imported while the worktrees are made
    names = ", ".join(r.describe() for r in revisions)
    with _terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp, \
            worktrees(root, revisions, root=Path(tmp)) as trees:
        cwd = Path(tmp) / "cwd"  # not a tree: `-m` puts the cwd first on sys.path, and a tree may hold a harness/
        cwd.mkdir()
        workers: list[_Worker] = []
        try:
            for i, rev in enumerate(revisions):
                notes = (f"bench commits {names} in {root}: this run is revision {rev.describe()} = {rev.commit}"
                         + (f"; --allow-dirty with uncommitted changes to {', '.join(dirty)} (not measured)" if dirty else ""))
                run = config.replace(results_dir=results_dir).run_config(run_name=f"commits-{i}-{rev.short[:8]}",
                                                                         notes=notes)
                spec = spec_to_json(tree=str(trees[rev.commit] / sub), revision_text=rev.describe(),
                                    kernel=config.kernel, run=run.to_dict(), command=command)
                workers.append(_Worker(revision=rev, argv=[config.python, "-m", "harness.commits._worker", "--spec", spec],
                                       env=env, cwd=cwd, log=Path(tmp) / f"worker-{i}.log"))
            for w in workers:  # every revision prepared and gated before the first timed repeat
                msg = w.expect(("waiting", "done"), timeout=config.startup_timeout_s, on_message=on_message)
                if msg["event"] == "done":
                    why = "; ".join(msg.get("messages") or []) or "no repeat was timed"
                    raise WorkerError(f"Kernel {config.kernel!r} at revision {w.revision.describe()} was not timed: {why}")
            on_message(f"all {len(workers)} revisions ready; timing {plan_text(config.protocol)}")
            timeout = measure_timeout(config.protocol)
            times: dict[int, list[float]] = {i: [] for i in range(len(workers))}

            def one_repeat(rep: int, *, asked: bool) -> None:
                # The revisions' order alternates from repeat to repeat (A B, B A, ...), so a drift within a
                # repeat adds noise to the paired differences instead of a bias.
                for i in pair_order(len(workers), rep):
                    w = workers[i]
                    if asked:
                        w.expect(("more",), timeout=timeout, on_message=on_message)
                        w.send("more")
                    if rep:
                        w.expect(("waiting",), timeout=timeout, on_message=on_message)
                    w.send("go")
                    row = w.expect(("measured",), timeout=timeout, on_message=on_message)["row"]
                    if row.get("time_ns"):
                        times[i].append(row["time_ns"])
                    on_message(f"repeat {rep} {w.revision.describe()}: {row['time_ns'] / 1e6:.4f} ms/launch "
                               f"({row['status']})")

            started = clock()
            for rep in range(config.protocol.repeats):
                one_repeat(rep, asked=False)
            total = config.protocol.repeats
            timed_out, looked = False, []
            if config.protocol.until_ci is not None:
                looked = look_one(times, config.protocol, config.rule, config.width_target)
                open_ = [workers[i + 1].revision.describe() for i, v in enumerate(looked) if v in OPEN]
                cap = config.protocol.max_repeats
                if not open_ or cap <= total:
                    on_message(f"look 1 after the pilot of {total} pairs: " + ", ".join(
                        f"{workers[i + 1].revision.describe()} {v}" for i, v in enumerate(looked))
                        + ("; no look 2" if not open_ else f"; no look 2 (--max-repeats {cap})"))
                else:
                    on_message(f"look 1 after the pilot of {total} pairs left {', '.join(open_)} unresolved; "
                               f"timing pairs up to {cap} for look 2")
                    for rep in range(config.protocol.repeats, cap):
                        if not next_pair_fits(clock() - started, rep, config.max_time_s):
                            timed_out = True
                            on_message(f"--max-time-s {config.max_time_s:g}: {rep} pairs in {clock() - started:.0f} s;"
                                       f" one more would end past the limit")
                            break
                        one_repeat(rep, asked=True)
                        total = rep + 1
                for w in workers:
                    w.expect(("more",), timeout=timeout, on_message=on_message)
                    w.send("finish")
            done = [w.expect(("done",), timeout=300, on_message=on_message) for w in workers]
        except WorkerError as exc:  # one revision cannot go on: the others stop, saying why (not "the user")
            for w in workers:
                w.stop(reason=f"stopped by bench commits because {exc.cause}")
            raise
        except KeyboardInterrupt as exc:
            signum = signal.Signals[exc.signal] if isinstance(exc, Terminated) else signal.SIGINT
            for w in workers:  # each run is marked incomplete by its own worker's runner, naming the signal
                w.stop(interrupt=True, signum=signum)
            kept = ", ".join(w.run_dir for w in workers if w.run_dir) or "none had started"
            on_message(f"{exc or 'interrupted'}: the worktrees are removed; runs kept, marked incomplete: {kept}")
            raise
        finally:
            for w in workers:
                w.stop()
    runs = tuple(RevisionRun(revision=rev, run_dir=Path(d["run_dir"]), status=d["status"]) for rev, d in zip(revisions, done))
    # Plain rows (pyarrow), not polars frames: the GPU images that measure have no polars, and this is
    # all a comparison of interleaved repeats needs.
    read = [read_run_rows(r.run_dir) for r in runs]
    comparisons = tuple(
        CommitComparison(base=runs[0], head=runs[i], comparison=compare_runs(
            read[0], read[i], rule=rule, design="interleaved", same_code=_same_commit(revisions[0], revisions[i])))
        for i in range(1, len(runs))
    )
    for c in comparisons:
        if not c.comparison.rows:
            raise HarnessError(f"Revision {c.head.revision.describe()} produced no timed measurement to compare "
                               f"({', '.join(c.comparison.unmatched) or 'nothing matched'}).")
    info = read[0].info
    adaptive = ""
    if config.protocol.until_ci is not None:
        pilot, cap = config.protocol.repeats, config.protocol.max_repeats
        if not any(v in OPEN for v in looked):
            adaptive = f"sequential: look 1 on the pilot's {pilot} pairs decided every revision"
        elif total == pilot:
            adaptive = (f"sequential: look 1 on the pilot's {pilot} pairs left a revision unresolved; no look 2: "
                        + (f"--max-time-s {config.max_time_s:g}: one more pair would have ended past it" if timed_out
                           else f"--max-repeats {cap} allows no pair after the pilot"))
        else:
            adaptive = (f"sequential: look 1 on the pilot's {pilot} pairs left a revision unresolved; look 2 on "
                        f"{total} pairs (skipped mean)" + (
                            f", stopped by --max-time-s {config.max_time_s:g} before --max-repeats {cap}"
                            if timed_out else ""))
    return CommitsResult(
        kernel=done[0]["kernel"], input_label=config.input.label, device=config.device,
        device_name=info.get("device_name") or config.device, repo=root, runs=runs, comparisons=comparisons,
        rule=rule, dirty_files=tuple(dirty), adaptive_note=adaptive,
    )
