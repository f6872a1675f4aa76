"""A user's kernel in a process of its own: whatever it does, the run goes on and says what happened.

asv's rule, applied per kernel: the code under test runs in a process that does nothing else, and the
process that records the run never runs it. A kernel named as `module:function` or `file.py:function`,
or registered by an installed plugin, is imported only in its child (`python -m harness.runner._child`);
the bundled kernels run in the run's own process unless `--isolation process` (docs/kernels.md: Isolation).

One child per kernel serves every configuration of the run (its imports, Triton compiles and CUDA context
are paid once), blocked on its pipe while other kernels measure, so only one process launches work on
the device at a time. Per configuration it makes its own inputs from the spec, prepares, gates and arms
the kernel with the same code as the in-process path (`_ready`), and for each repeat runs one timing and
sends it back as data; the run's own process turns it into rows with its telemetry (monotonic clocks are
system-wide, so the child's chunk times and the parent's samples share one time axis).

How a child's end becomes the kernel's row (`status` / `error`, never a new schema field):
- an Exception in the kernel: the child formats the row as in-process and goes on;
- `sys.exit`, KeyboardInterrupt or another BaseException raised by the kernel: the child reports it by
  name ("called sys.exit(3)") and ends; the next configuration starts a new child;
- a death without a word (os._exit, a signal such as SIGSEGV or SIGKILL): the exit status or the signal,
  with the last lines the child wrote to stderr;
- a hang: the child's watchdog (SIGALRM) stops Python-level hangs itself and reports `timeout`; each
  bounded stretch is announced to the parent, which kills the child (SIGKILL, its whole process group)
  when one outlasts the launch timeout by `grace_s` more: a C call or a GPU kernel that never returns.

Every wait on a child has a deadline: a bounded stretch's, else `quiet_s` (the harness's own work in the
child: inputs, the gate's fp64 reference), and a child whose process has ended is never waited on (a
grandchild that kept its stdout open cannot hold the run). A child serves several configurations at once
(those of one comparison group); when it dies, every configuration it held becomes that kernel's row with
the cause, as each comes up, and the next configuration prepared starts a new child.
"""

from __future__ import annotations

import os
import sys

from harness.errors import KernelError, KernelTimeout
from harness.kernels import Kernel
from harness.runner._chunks import Chunk
from harness.runner._ready import ReportedFailure
from harness.runner._settle import SettleCheck
from harness.workers import Deadline, WaitExpired, Worker, child_env, process_stopped, signal_name

__all__ = ["ChildKernel", "ChildDied", "ChildHung", "isolated", "grace_s", "quiet_s"]

_BUNDLED = "kernels_under_test"
_SIGNAL_CAUSE = {
    "SIGSEGV": "a crash in native code (segmentation fault)", "SIGBUS": "a crash in native code (bus error)",
    "SIGABRT": "an abort (a failed assertion in native code, or abort())", "SIGFPE": "a floating-point trap",
    "SIGILL": "an illegal instruction",
    "SIGKILL": "killed from outside (its own os.kill, another process, or the out-of-memory killer)",
    "SIGTERM": "terminated from outside", "SIGINT": "interrupted",
}


class ChildDied(KernelError):
    """A kernel's own process ended without reporting a failure (os._exit, a signal); `cause` says how."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"{cause}. It is not timed on this input; the run went on with the others")
        self.cause = cause


class ChildHung(KernelTimeout):
    """A kernel's own process outlasted a bounded stretch by the grace period and was killed."""


def grace_s(timeout_s: float) -> float:
    """How long past the launch timeout the parent waits before it calls a child hung: enough for the
    child's own watchdog to fire and report (milliseconds), bounded so that a C hang is not waited on long."""
    return min(10.0, max(2.0, timeout_s / 2))


def quiet_s(timeout_s: float) -> float:
    """How long the parent waits for a child that is outside any bounded stretch (the harness's own work
    there: making inputs, the gate's fp64 reference, a checksum) before it calls the child hung: generous,
    as an fp64 reference on a CPU takes minutes at full size, but never forever."""
    return max(900.0, 10.0 * timeout_s)


# After the child's process has ended, how long its last lines may still take to arrive on the pipe.
_DRAIN_S = 2.0
# How long a child asked to stop (or whose pipe has closed) may take to end before it is killed.
_END_S = 30.0


def _bundled(kernel) -> bool:
    return kernel.source.partition(":")[0].split(".")[0] == _BUNDLED


def isolated(name: str, registry, mode: str) -> bool:
    """Whether kernel `name` of `registry` (the default registry) runs in a process of its own."""
    if mode == "none":
        return False
    if name in registry:
        return mode == "process" or not _bundled(registry.get(name))
    return ":" in name  # a module:function or file.py:function spec: imported only in its child


class ChildKernel:
    """One kernel's own process, seen from the run: `describe`, then per configuration `ready`, `time` per
    repeat and `release`; `close` at the run's end. Every failure is raised as a KernelError the run loop
    records as that kernel's row (ReportedFailure: the child's own text; ChildDied; ChildHung)."""

    where = "own process"

    def __init__(self, ref: str, *, device: str, device_kind: str, measurer: str, protocol, gate: bool, launch: str,
                 cwd: str | None = None, python: str = sys.executable) -> None:
        self.ref = ref
        self.timeout_s = float(protocol.launch_timeout_s)
        self._cwd = cwd or os.getcwd()
        self._python = python
        self._start = {"op": "start", "ref": ref, "cwd": self._cwd, "sys_path": [p or self._cwd for p in sys.path],
                       "device": device, "device_kind": device_kind, "measurer": measurer, "protocol": protocol.to_dict(),
                       "gate": gate, "launch": launch, "timeout_s": self.timeout_s}
        self.kernel = None
        self.stage = "importing it"
        self._worker = None
        self._spawn()

    # -- the process -------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self._worker.pid

    def _spawn(self) -> None:
        # A session of its own (harness.workers): a Ctrl-C in the terminal reaches the run alone, which then ends
        # its children, and a kill of the group also ends whatever the kernel itself started.
        self._worker = Worker.start([self._python, "-m", "harness.runner._child"], env=child_env(), cwd=self._cwd,
                                    on_stderr=self._relay_stderr, tail=8, drain_s=_DRAIN_S)
        self._alive, self._busy = True, False
        self._held: set = set()  # the configurations prepared in this process (their inputs, their kernel)
        self._send(self._start)

    def _relay_stderr(self, line: str) -> None:
        """The kernel's own prints and tracebacks reach the run's stderr (never its stdout, which may carry
        --json -); the worker keeps the last lines for the row of a child that dies."""
        label = self.kernel.name if self.kernel is not None else self.ref
        sys.stderr.write(f"[{label}] {line}")
        sys.stderr.flush()

    def _send(self, message: dict) -> None:
        self._worker.send(message)  # when it is gone, the next _await says why

    def _kill(self) -> None:
        """SIGKILL to its whole process group at once: a child called hung has had its grace already."""
        self._worker.kill(grace_s=0.0)
        self._alive = False
        self._held.clear()

    def _reap(self, timeout: float = _END_S) -> int | None:
        rc = self._worker.finish(wait_s=timeout, grace_s=0.0)
        self._alive = False
        self._held.clear()
        return rc

    def _died(self, rc: int) -> ChildDied:
        """The death of this child, remembered for the configurations it still held."""
        self._cause = self._death(rc)
        self._cause_stage = self.stage
        return ChildDied(self._cause)

    def _gone(self) -> ChildDied:
        """A configuration whose process ended before it came up: the earlier death, named with its stage."""
        cause = getattr(self, "_cause", None) or "its own process ended before this configuration was measured"
        where = getattr(self, "_cause_stage", "")
        return ChildDied(f"{cause} (while it ran {where} for another input; this input was prepared in that process "
                         f"and went with it)" if where else cause)

    def _death(self, rc: int | None) -> str:
        if rc is None:
            cause = "did not end even when killed (stuck in a driver call); it is left behind"
        elif rc < 0:
            name = signal_name(-rc)
            cause = f"was killed by {name}" + (f": {_SIGNAL_CAUSE[name]}" if name in _SIGNAL_CAUSE else "")
        else:
            cause = (f"ended with exit status {rc} without reporting why (os._exit({rc}), or an exit from native "
                     f"code: nothing the harness could catch)")
        lines = self._worker.tail(8)
        tail = f"; the last lines it wrote to stderr: {' | '.join(lines)}" if lines else ""
        return f"its own process {cause}{tail}"

    def _await(self, want: str) -> dict:
        """The child's next `want` event, forwarding progress; a failure, a death or a hang is raised. Never
        waits without a deadline: a bounded stretch's, else `quiet_s`; a process that has ended is reaped."""
        if not self._alive:
            raise self._gone()
        what = limit = None
        quiet = quiet_s(self.timeout_s)
        deadline = Deadline(quiet)
        self._busy = True
        try:
            while True:
                try:
                    ev = self._worker.receive(timeout=deadline.left())
                except WaitExpired:
                    stopped = process_stopped(self._worker.pid)
                    self._kill()
                    if stopped:  # a hang with a cause the row can name
                        text = (f"its own process was stopped (SIGSTOP or SIGTSTP: its state was T) and did not "
                                f"answer within {quiet if what is None else limit + grace_s(limit):g} s, so it "
                                f"was killed (SIGKILL)")
                    elif what is None:
                        text = (f"its own process sent nothing for {quiet:g} s outside any call of the kernel's "
                                f"code (stage {self.stage}), so it was killed (SIGKILL)")
                    else:
                        text = (f"{what} did not return within the {limit:g} s launch timeout, nor did its own "
                                f"process answer within {grace_s(limit):g} s more: it is stuck where the watchdog "
                                f"cannot reach it (a C call, or a GPU kernel that never finishes), so its process "
                                f"was killed (SIGKILL)")
                    self._cause, self._cause_stage = text, self.stage  # for the configurations it held
                    raise ChildHung(text) from None
                if ev is None:
                    raise self._died(self._reap())
                kind = ev.get("event")
                if kind == "limit":
                    what, limit = ev["what"], float(ev["s"] or self.timeout_s)
                    deadline.restart(limit + grace_s(limit))
                elif kind == "unlimit":
                    what = limit = None
                    deadline.restart(quiet)
                elif kind == "stage":
                    self.stage = ev["stage"]
                elif kind in ("phase", "chunk"):
                    self._progress(ev)
                elif kind == "failed":
                    if ev.get("exiting"):
                        self._reap()
                        self._cause, self._cause_stage = f"its own process ended after: {ev['error']}", self.stage
                    raise ReportedFailure(ev["status"], ev["error"], gate=ev.get("gate"))
                elif kind == want:
                    return ev
        finally:
            self._busy = False

    # -- what the run loop calls ---------------------------------------------------------------------
    def describe(self):
        """The kernel's declaration, read in the child: a Kernel the run checks and records but never calls."""
        ev = self._await("described")
        d = ev["kernel"]
        unavailable = d["unavailable"]

        def runs_elsewhere(inputs):
            raise KernelError(f"Kernel {d['name']!r} runs in its own process; it is never prepared in the run's.")

        self.kernel = Kernel(
            name=d["name"], prepare=runs_elsewhere, dtypes=frozenset(d["dtypes"]), devices=frozenset(d["devices"]),
            head_dims=None if d["head_dims"] is None else frozenset(tuple(h) for h in d["head_dims"]),
            availability=lambda kind: unavailable, description=d["description"], graph_safe=d["graph_safe"],
            causal_only=d["causal_only"], noncausal_only=d["noncausal_only"], output_dtype=d["output_dtype"],
            tolerance=d["tolerance"], source=d["source"], workloads=frozenset(d.get("workloads", ())),
            extra={**d["extra"], "provenance": {**ev["provenance"], "process": "own process"}})
        return self.kernel

    def bind(self, obs, thread) -> None:
        """Where the child's live progress goes (the run's observer, with its latest telemetry sample)."""
        self._obs, self._thread = obs, thread

    def _progress(self, ev: dict) -> None:
        obs = getattr(self, "_obs", None)
        if obs is None:
            return
        if ev["event"] == "phase":
            obs.on_phase(ev["phase"])
        else:
            obs.on_chunk(Chunk(**ev["chunk"]), SettleCheck(**ev["check"]) if ev["check"] else None,
                         self._thread.last_poll())

    def ready(self, config_index: int, spec, inputs, guard) -> dict:
        """Prepare, gate and arm in the child on its own inputs made from `spec` (the run's `inputs` and
        `guard` are not touched); the row columns it adds to each measurement."""
        if not self._alive:  # the last configuration's kernel ended its process: a new one for this one
            self.stage = "importing it"
            self._spawn()
            self._await("described")
        self.stage = "prepare"
        self._send({"op": "config", "index": config_index, "input": spec.to_dict()})
        extra = self._await("ready")["extra"]
        self._held.add(config_index)
        return extra

    def time(self, *, repeat: int, idle_s: float, config_index: int | None = None) -> dict:
        if config_index not in self._held:  # prepared in a process that has ended since: never sent to its successor
            raise self._gone()
        self.stage = f"measure (repeat {repeat})"
        self._send({"op": "measure", "index": config_index, "repeat": repeat, "idle_s": idle_s})
        timing = self._await("timed").get("timing")
        if not isinstance(timing, dict) or not {"chunks", "phases"} <= timing.keys() and "times" not in timing:
            # Not what the child writes: something in the kernel's process wrote into the harness's pipe. Its
            # process can no longer be trusted to answer in order, so it is ended.
            self._kill()
            self._cause, self._cause_stage = "its own process wrote into the harness's pipe", self.stage
            raise KernelError("its own process sent a timing the harness did not write (something in the kernel's "
                              "process wrote into the harness's pipe to it); that process was ended")
        return timing

    def drain(self) -> None:
        pass  # the child waits for its own queued work, or is gone

    def release(self, config_index: int | None = None) -> None:
        """The child drops a configuration's inputs and prepared kernel (every one's without `config_index`)."""
        self._held.discard(config_index) if config_index is not None else self._held.clear()
        if self._alive:
            self._send({"op": "release", "index": config_index})
            try:
                self._await("released")
            except KernelError:
                pass  # it ended on the way out; the next configuration starts a new one

    def close(self) -> None:
        if self._worker is None:
            return
        if self._worker.poll() is None:
            if self._busy:  # stopped mid-measurement (Ctrl-C, a signal): what it was timing is discarded
                self._kill()
                return
            self._send({"op": "stop"})
        self._reap(timeout=10.0)
