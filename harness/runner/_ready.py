"""Getting one kernel ready on one input and timing it, in whichever process the kernel runs in.

The run loop (`_loop`) hands each kernel to an executor: `InProcess` (the bundled kernels, in the run's own
process) or `runner._isolation.ChildKernel` (every other kernel, in a process of its own, which calls the
same functions below). Both answer the same three calls: `ready` (prepare, the gate's first calls, set-up
for timing), `time` (one measurement's idle, warm-in and window, as plain data) and `release`. So a kernel
is prepared, gated and timed by one piece of code wherever it runs; only the process boundary differs.

Every kernel's launches are bracketed by a checksum of q, k, v (`InputsGuard`): a kernel that writes into
its inputs is refused, and the inputs are restored before the next kernel sees them.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.config import BurstProtocol, SustainedProtocol
from harness.devices import open_device
from harness.errors import KernelError
from harness.inputs import changed, check_finite, fingerprint, make_inputs, restore, torch_dtype
from harness.kernels import gate, gate as run_gate, gate_columns
from harness.runner._endings import Watchdog
from harness.runner._l2 import cold_launch
from harness.runner._watch import OutputWatch

__all__ = ["KernelSide", "InputsGuard", "InputsWritten", "ReportedFailure", "InProcess", "check_kernel",
           "ready_kernel", "time_kernel", "drain_device"]


@dataclass(frozen=True, kw_only=True)
class KernelSide:
    """What getting a kernel ready and timing it needs, in the process it runs in: the device, the
    protocol, the watchdog, the clock, and where its live progress goes."""

    device: object
    protocol: SustainedProtocol | BurstProtocol
    gate: bool
    launch: str  # the launch strategy: auto, graph, loop
    watchdog: Watchdog
    clock: Callable[[], int]
    sleep: Callable[[float], None]
    on_phase: Callable[[str], None]
    on_chunk: Callable[[object, object], None]  # (chunk, settle check or None)


class ReportedFailure(KernelError):
    """A kernel's failure as its own process reported it: the row's status and text, complete."""

    def __init__(self, status: str, error: str, *, gate: dict | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.gate = gate  # a failed gate's numbers, as gate_columns gives them


class InputsWritten(KernelError):
    """A kernel changed q, k or v: refused, and the inputs were restored for the others."""


class InputsGuard:
    """The checksum of one configuration's q, k, v, verified after each kernel's calls (`verify`)."""

    def __init__(self, spec, inputs) -> None:
        self.spec, self.inputs = spec, inputs
        self.before = fingerprint(inputs)

    def verify(self, *, during: str, after: BaseException | None = None) -> None:
        """Raise InputsWritten (after restoring the inputs) when they changed `during` the kernel's calls."""
        now = fingerprint(self.inputs)
        bad = changed(self.before, now)
        if not bad:
            return
        restore(self.inputs, self.spec)
        self.before = fingerprint(self.inputs)
        sums = ", ".join(f"{n} {self.before[n][:12]}... -> {now[n][:12]}..." for n in bad)
        also = f" It also failed there: {type(after).__name__}: {after}" if after is not None else ""
        raise InputsWritten(
            f"it wrote into its inputs: {', '.join(bad)} changed during {during} (checksums {sums}). A kernel must not "
            f"modify q, k, v in place: every kernel after it would be gated and timed on what it left there. It is "
            f"refused and not timed on this input; q, k, v were made afresh for the others.{also}") from after


_NTH = ("first", "second", "third", "fourth", "fifth")
# What each of the gate's calls is for (kernels.gate): the judged output, the stale-output check, the check
# that the output follows inputs changed in place.
_GATE_CALLS = ("the gate", "the gate's stale-output check", "the gate, on inputs changed in place")


def _checked(launch, inputs, kernel, watchdog: Watchdog, device, *, check_output: bool = True, on_stage=None,
             watch=None):
    """The launch closure as the gate calls it: each call, and the device work it queued, bounded by the
    watchdog (the gate's fp64 reference is not: on the CPU it can take minutes; a GPU kernel that never
    ends hangs in the synchronize, inside the limit, where a kernel's own process is killed for it), and
    what it returns checked to be a tensor shaped like the attention output, in the output's dtype, on the
    inputs' device. Each call names its stage (`on_stage`: "gate (second call: ...)"), and the first call's
    output is kept by `watch` (runner._watch), which checks the timed launches against it.
    Without the gate (`--no-gate`, the peak microbenchmarks, which return a GEMM or copy result) only the
    watchdog applies: the output is not judged at all then."""
    import torch

    want = inputs.shape.out_shape()
    what = "[1, Hq, total_q, dv] (varlen: sequences packed along S)" if inputs.shape.packed else "[B, Hq, S_q, dv]"
    want_dtype = torch_dtype(kernel.output_dtype or inputs.dtype)
    asynchronous = device.kind in ("cuda", "rocm")
    calls = [0]

    def call():
        n = calls[0]
        calls[0] += 1
        nth = _NTH[n] if n < len(_NTH) else f"call {n + 1}"
        purpose = _GATE_CALLS[n] if n < len(_GATE_CALLS) else "the gate"
        label = f"its {nth} call ({purpose})" if check_output else f"its {nth} call (no gate)"
        if on_stage is not None:
            on_stage(f"gate ({nth} call)" if check_output else f"{nth} call (no gate)")
        with watchdog.limit(what=label):
            out = launch()
            if asynchronous:
                device.synchronize()
        if not check_output:
            return out
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out = out.detach()  # judged as values: the gate's in-place checks must not trip autograd
        if not isinstance(out, torch.Tensor):
            raise KernelError(f"its launch returned {type(out).__name__}, not a tensor: the launch closure must "
                              f"return the attention output {what} = {list(want)}")
        if out.device != inputs.q.device:
            # Compared as it is, a tensor elsewhere fails inside torch with another device's message ("meta").
            raise KernelError(f"its launch returned a tensor on {out.device}; its inputs are on {inputs.q.device}, "
                              f"and the attention output must be there too")
        if tuple(out.shape) != want:
            raise KernelError(f"its launch returned a tensor of shape {list(out.shape)}; the attention output is "
                              f"{what} = {list(want)}")
        if out.dtype != want_dtype:
            # A float64 (or float32) output of bf16 inputs is more accurate and slower than the kernel asked
            # for: it would pass a gate meant for bf16 rounding and time another kernel.
            raise KernelError(f"its launch returned {str(out.dtype).replace('torch.', '')} values; the attention "
                              f"output of these inputs is {str(want_dtype).replace('torch.', '')}. Return the output "
                              f"in that dtype (a registered kernel that writes another one declares output_dtype)")
        if watch is not None and n == 0:
            watch.first(out)
        return out

    return call


def check_kernel(kernel, spec, *, device: str, gate: bool = True, timeout_s: float | None = 60.0):
    """What a run does to a kernel before timing it, once and alone: prepare() and the correctness gate (or,
    without the gate, one call whose output is not judged), each call bounded by the watchdog. Returns the
    GateResult (None without the gate); raises GateFailure or the kernel's own error. The pytest fixture runs
    this where benchmarks are disabled (--benchmark-disable, xdist), so a wrong kernel still fails its test."""
    dev = open_device(device)
    inputs = make_inputs(spec, device=dev.torch_device)
    check_finite(inputs)
    watchdog = Watchdog(timeout_s)
    with watchdog.limit(what="prepare()"):
        launch = kernel.prepare(inputs)
        _sync(dev)
    checked = _checked(launch, inputs, kernel, watchdog, dev, check_output=gate)
    if not gate:
        checked()
        return None
    return run_gate(kernel, inputs, checked)


def ready_kernel(side: KernelSide, measurer, kernel, inputs, guard: InputsGuard, *,
                 on_stage: Callable[[str], None] = lambda stage: None, who: str = ""):
    """prepare(), the gate (its first calls) and the set-up for timing, each bounded by the watchdog; then
    the inputs' checksum. Returns (launch, armed, gate result or None, OutputWatch); raises what the kernel
    raised (or InputsWritten), after `on_stage` named the stage it was in. `who` names the kernel and input in
    the watch's refusal (runner._watch)."""
    wd, during = side.watchdog, "prepare()"
    watch = OutputWatch(who or f"Kernel {kernel.name!r} on {inputs.source}")
    on_stage("prepare")
    try:
        # Each bounded stretch ends with the device work it queued: a GPU kernel that never ends must hang
        # inside a limit (where a kernel's own process is killed for it), not in the harness's next
        # synchronize (the gate's first reduction), where nothing would bound it.
        with wd.limit(what="prepare()"):
            launch = kernel.prepare(inputs)
            _sync(side.device)
        during = "its gate calls"
        checked = _checked(launch, inputs, kernel, wd, side.device, check_output=side.gate, on_stage=on_stage,
                           watch=watch)
        if side.gate:
            g = gate(kernel, inputs, checked)
            watch.arm(g)
        else:
            g = None
            checked()
        on_stage("set-up for timing")
        during = "its set-up for timing"
        with wd.limit(what="its set-up for timing"):
            if side.protocol.l2 == "cold":  # after the gate, which judged the first copy
                launch = cold_launch(kernel, inputs, launch, device=side.device)
            armed = measurer.arm(side, kernel, launch)
            _sync(side.device)
    except Exception as exc:
        drain_device(side)  # bounded: the checksum below synchronizes too
        guard.verify(during=during, after=exc)
        raise
    guard.verify(during=during)
    return launch, armed, g, watch


def time_kernel(side: KernelSide, measurer, kernel, launch, armed, inputs, guard: InputsGuard, *, idle_s: float,
                repeat: int, watch=None) -> dict:
    """One measurement (`measurer.time`: plain data), then the inputs' checksum, then the output of its last
    timed launch against the gated one, and one more launch after it was poisoned (`watch`, runner._watch)."""
    during = f"its timed launches (repeat {repeat})"
    try:
        timing = measurer.time(side, kernel, launch, armed, idle_s=idle_s, inputs=inputs)
    except Exception as exc:
        drain_device(side)
        guard.verify(during=during, after=exc)
        raise
    guard.verify(during=during)
    if watch is not None and watch.armed:
        last = getattr(armed, "last", None)
        out = last() if last is not None else None
        if out is not None:
            import torch

            out = out.detach() if isinstance(out, torch.Tensor) else out
            what = f"the last launch of repeat {repeat}'s timed {'launches' if measurer.kind == 'burst' else 'window'}"
            try:
                with side.watchdog.limit(what="the check of its output after the window"):
                    watch.check(out, during=what)
                    watch.check_fresh(armed.again, out, during=what)
                    # Inputs that rotate through copies (--l2 cold) are not the ones scaled; a kernel that copies
                    # or quantizes its inputs in prepare() declares it and is not expected to follow them.
                    if getattr(launch, "rotation", 1) == 1 and kernel.extra.get("reads_inputs_at_launch", True):
                        watch.check_follows(armed.again, inputs, during=what)
                    _sync(side.device)
            except Exception as exc:
                drain_device(side)
                guard.verify(during=f"the check of its output after repeat {repeat}", after=exc)
                raise
            guard.verify(during=f"the check of its output after repeat {repeat}")
    return timing


def _sync(device) -> None:
    if device.kind in ("cuda", "rocm"):
        device.synchronize()


def drain_device(side: KernelSide) -> None:
    """After a kernel was stopped or raised: wait for what it queued so the next one starts from an idle
    device. Bounded, so that in a kernel's own process a GPU kernel that never finishes is a stretch the
    parent can time out (in-process the synchronize blocks, see _endings)."""
    try:
        with side.watchdog.limit(what="the end of its queued work"):
            side.device.synchronize()
    except Exception:
        pass


def exit_text(exc: BaseException) -> str:
    """What a kernel's own BaseException did, as a row says it: "called sys.exit(3)"."""
    if isinstance(exc, SystemExit):
        return "called sys.exit()" if exc.code is None else f"called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "raised KeyboardInterrupt"
    text = str(exc)
    return f"raised {type(exc).__name__} (a BaseException, not an Exception)" + (f": {text}" if text else "")


def where(exc: BaseException) -> str:
    """Where a kernel's exception was raised: " (at file.py:12)", or "" without a traceback."""
    tb = traceback.extract_tb(exc.__traceback__)
    return f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""


class _OwnExit:
    """Kernel code run in this process: its sys.exit (or another BaseException that is not a stop: Ctrl-C and
    the stop signals are KeyboardInterrupts) becomes its failure, never the exit status of the run."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, (Exception, KeyboardInterrupt)):
            return False
        raise KernelError(f"it {exit_text(exc)}{where(exc)}, which would have ended the run (it runs in the run's "
                          f"own process). It is not timed on this input; the run went on with the others") from None


def _who(kernel, spec) -> str:
    """How a row's text names the kernel and its input (as runner._loop's `_failure` does)."""
    return f"Kernel {kernel.name!r} on {spec.label} ({spec.shape.label()}, {spec.dtype})"


class InProcess:
    """A kernel run in the run's own process: the bundled kernels (docs/kernels.md: Isolation)."""

    where = "in-process"

    def __init__(self, side: KernelSide, measurer, kernel) -> None:
        self.side, self.measurer, self.kernel = side, measurer, kernel
        self.stage = ""
        self._state = None

    def _at(self, stage: str) -> None:
        self.stage = stage

    def ready(self, config_index: int, spec, inputs, guard: InputsGuard) -> dict:
        """The row columns this kernel adds to each of its measurements (gate figures, launch strategy)."""
        with _OwnExit():
            launch, armed, g, watch = ready_kernel(self.side, self.measurer, self.kernel, inputs, guard,
                                                   on_stage=self._at, who=_who(self.kernel, spec))
        self._state = (launch, armed, inputs, guard, watch)
        return {**gate_columns(g), **self.measurer.row_extra(armed)}

    def time(self, *, repeat: int, idle_s: float, config_index: int | None = None) -> dict:
        self.stage = f"measure (repeat {repeat})"
        launch, armed, inputs, guard, watch = self._state
        with _OwnExit():
            return time_kernel(self.side, self.measurer, self.kernel, launch, armed, inputs, guard, idle_s=idle_s,
                               repeat=repeat, watch=watch)

    def drain(self) -> None:
        drain_device(self.side)

    def release(self, config_index: int | None = None) -> None:
        self._state = None

    def close(self) -> None:
        self._state = None
