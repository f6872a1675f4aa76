"""The one run loop shared by the sustained and the burst protocol.

Set-up, the run row, per-configuration inputs, the gate, per-kernel x input failure isolation, rotated
repeats and every ending live here; a protocol supplies only its `Measurer` (how to get one kernel ready
for timing, how to time it once, and how that timing becomes rows). A kernel runs on an executor: in this
process (`_ready.InProcess`, the bundled kernels) or in a process of its own (`_isolation.ChildKernel`),
whose death by any cause becomes that kernel's row. Every way a run ends goes through `_end`: the row becomes
`complete`, `incomplete` (stopped: Ctrl-C or a signal, named in status_detail) or `failed` (the reason),
written with stop signals deferred so a second Ctrl-C cannot leave it `running`.
"""

from __future__ import annotations

import json
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, TypedDict

from harness.errors import GateFailure, HarnessError, InputError, KernelError, KernelTimeout, RunStopped, StopRequested
from harness.inputs import check_finite, make_inputs
from harness.runner._adaptive import own_precision
from harness.runner._endings import StopSignals, Watchdog, stop_signals
from harness.runner._observer import NullObserver, RunObserver
from harness.runner._ready import InProcess, InputsGuard, KernelSide, ReportedFailure
from harness.runner._setup import config_row, set_up_run, start_contention
from harness.telemetry import SamplerThread

__all__ = ["ISOLATION_NONE_NOTE", "Measurer", "RunHooks", "RunResult", "Session", "TIMED_STATUSES", "run_loop"]

# What `--isolation none` gives up, said when such a run starts and kept in its notes.
ISOLATION_NONE_NOTE = (
    "--isolation none: every kernel runs in this process. A kernel's exceptions and sys.exit are still its own "
    "row, and each kernel gets input tensors of its own, but os._exit or a crash (SIGSEGV) ends the whole run "
    "(left `running`; `bench list runs` and `bench report` say its process is gone), a hang inside one C call is "
    "not stopped, and a kernel's os.chdir, threads and writes to stdout act on this process. --isolation auto "
    "(the default) runs every user kernel in a process of its own.")

# Rows that hold a timing; every other status (gate_failed, error, timeout, input_error) says why not.
TIMED_STATUSES = ("ok", "unsettled", "burst")


@dataclass(kw_only=True)
class RunResult:
    run_id: str
    path: Path
    status: str
    info: dict
    measurements: list[dict] = field(default_factory=list)
    status_detail: str = ""

    @property
    def timed(self) -> list[dict]:
        """The rows that hold a timing."""
        return [r for r in self.measurements if r.get("status") in TIMED_STATUSES]

    @property
    def nothing_timed(self) -> bool:
        """True when every kernel x input failed the gate, errored, timed out or had bad inputs: a CLI exits
        non-zero then, because a run that timed nothing must not pass as a successful benchmark."""
        return not self.timed

    def untimed_summary(self) -> str:
        counts = Counter(r.get("status") for r in self.measurements if r.get("status") not in TIMED_STATUSES)
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no measurements"


@dataclass(frozen=True, kw_only=True)
class Session:
    """What every measurement of one run shares."""

    config: object
    protocol: object
    kernels: list
    device: object
    ident: object
    thread: object
    writer: object
    result: RunResult
    obs: RunObserver
    clock: Callable[[], int]
    sleep: Callable[[float], None]
    watchdog: Watchdog
    side: KernelSide  # this process's own side, for the kernels that run in it
    executors: dict  # kernel name -> the executor of a kernel that runs in a process of its own
    more_repeats: Callable[[int, list], bool] | None = None


class Measurer(Protocol):
    """What a protocol supplies to `run_loop`. `open`, `arm`, `row_extra` and `time` run where the kernel
    runs (this process, or the kernel's own: `runner._child` builds the measurer of `kind` there); `time`
    returns plain data, which `rows` turns into rows here, with this process's telemetry."""

    mid_prefix: str  # measurement ids are f"{prefix}{config}-{kernel}-..."
    kind: str  # "sustained" or "burst"

    def start(self, s: Session) -> None:
        """After telemetry started."""

    def open(self, side: KernelSide) -> None:
        """Once per process that runs kernels, before the first (the sustained protocol's in-band probe)."""

    def arm(self, side: KernelSide, kernel, launch):
        """Get a kernel that passed the gate ready for timing (runs under the watchdog); returns what
        `time` needs."""

    def row_extra(self, armed) -> dict: ...

    def time(self, side: KernelSide, kernel, launch, armed, *, idle_s: float, inputs) -> dict:
        """One measurement's timing as JSON-ready data (chunks, phases, probe readings)."""

    def rows(self, s: Session, timing: dict, *, inputs, mid: str):
        """(row, chunk rows, sample rows, probe rows) of one timing."""

    def idle_s(self, rep: int, order_index: int) -> float: ...

    def stop(self) -> None: ...


class RunHooks(TypedDict, total=False):
    """What a caller may inject into a run instead of what its config names (tests, replayed telemetry, a
    worker that already opened the device): the keywords `run_sustained`, `run_burst` and `run_loop` take.
    Left out, each is created from the config (a telemetry backend that cannot start is an error, never a
    silent fallback); `clock` is `time.monotonic_ns` and `sleep` `time.sleep`."""

    observer: RunObserver | None  # live progress (the CLI's view); None: NullObserver
    registry: Any  # the kernel registry the config's names are looked up in
    device: Any
    sampler: Any  # a telemetry Sampler, not yet opened
    clock: Callable[[], int]
    sleep: Callable[[float], None]
    # Adaptive repeats: after the protocol's repeats, asked before each further repeat (its index, and the timed
    # rows of this configuration so far); True takes it. Left out with `until_ci` in the protocol, each kernel's
    # own Stein rule decides (`runner._adaptive`); `bench commits` answers from the revisions' paired spread.
    more_repeats: Callable[[int, list], bool] | None


def _rotate(items: list, k: int) -> list:
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def run_loop(config, *, protocol, measurer: Measurer, open_writer, info_row, observer=None, registry=None,
             device=None, sampler=None, clock=time.monotonic_ns, sleep=time.sleep, more_repeats=None) -> RunResult:
    """Run `measurer` on every kernel x input x repeat of `config` and write the results.

    `open_writer(setup)` returns the writer (a new run directory or one appended to); `info_row(setup)`
    the runs row, or None when appending. Stop signals, the watchdog and every ending are handled here.
    """
    obs = observer or NullObserver()
    with stop_signals() as stops:
        setup = set_up_run(config, registry=registry, device=device, sampler=sampler, measurer=measurer,
                           protocol=protocol)
        try:
            with stops.deferred():
                writer = open_writer(setup)
                info = info_row(setup)
        except BaseException:
            setup.close_executors()
            raise
        result = RunResult(run_id=writer.run_id, path=writer.path, status="running", info=info or {})
        watchdog = Watchdog(protocol.launch_timeout_s)
        thread = SamplerThread(setup.sampler, period_s=protocol.sample_period_s, clock=clock)
        sampler_open = False
        try:
            setup.sampler.open()
            sampler_open = True
            if info is not None:
                info["telemetry_json"] = _to_json(setup.sampler.describe())
                notes = [watchdog.note, ISOLATION_NONE_NOTE if config.isolation == "none" else ""]
                if any(notes):
                    info["notes"] = "; ".join(x for x in (info.get("notes"), *notes) if x)
                with stops.deferred():
                    writer.write_run(info)
            obs.on_run_start(result, total=len(config.inputs) * len(setup.kernels) * protocol.repeats)
            if config.isolation == "none":
                obs.on_message(ISOLATION_NONE_NOTE)
            thread.start()
            side = KernelSide(device=setup.device, protocol=protocol, gate=config.gate,
                              launch=config.launch, watchdog=watchdog, clock=clock, sleep=sleep,
                              on_phase=obs.on_phase, on_chunk=lambda c, chk: obs.on_chunk(c, chk, thread.last_poll()))
            s = Session(config=config, protocol=protocol, kernels=setup.kernels, device=setup.device,
                        ident=setup.ident, thread=thread, writer=writer, result=result, obs=obs, clock=clock,
                        sleep=sleep, watchdog=watchdog, side=side, executors=setup.executors,
                        more_repeats=more_repeats or own_precision(protocol))
            for executor in setup.executors.values():
                executor.bind(obs, thread)
            measurer.start(s)
            if len(setup.executors) < len(setup.kernels):
                measurer.open(side)
            for group in comparison_groups(config.inputs, interleave=protocol.interleave_inputs):
                _run_group(s, measurer, group)
            # Every kernel x input attempted, but a run that timed none of them has no figures: it ends `failed`,
            # as `bench merge` calls such a run, never `complete` as if it had measured something.
            if result.nothing_timed:
                _end(stops, writer, result, thread, setup, measurer, "failed",
                     f"nothing timed ({result.untimed_summary()}): every kernel x input failed the gate, errored or "
                     f"timed out", sampler_open)
            else:
                _end(stops, writer, result, thread, setup, measurer, "complete", "", sampler_open)
        except BaseException as exc:
            status, detail = _ending_of(exc, result)
            _end(stops, writer, result, thread, setup, measurer, status, detail, sampler_open)
            raise
        finally:
            obs.on_run_end(result)
    return result


def _to_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)  # as results' provenance writes its JSON columns


def _ending_of(exc: BaseException, result: RunResult) -> tuple[str, str]:
    n = len(result.timed)
    if isinstance(exc, RunStopped):
        return "incomplete", f"interrupted by {exc.signal_name} after {n} timed measurements; they are kept"
    if isinstance(exc, StopRequested):
        return "incomplete", f"{exc.reason} after {n} timed measurements; they are kept"
    if isinstance(exc, KeyboardInterrupt):
        return "incomplete", f"interrupted by the user (KeyboardInterrupt) after {n} timed measurements; they are kept"
    if isinstance(exc, HarnessError):
        return "failed", str(exc)
    return "failed", f"{type(exc).__name__}: {exc}"


def _end(stops: StopSignals, writer, result, thread, setup, measurer, status, detail, sampler_open) -> None:
    """The one ending: stop telemetry, write the status row. Signals are only recorded from here on."""
    stops.ending()
    # The host's load after the run: started before the clean-up below, which then overlaps its interval.
    contention_after = start_contention(setup.device) if setup.contention is not None and result.info else None
    for stop in (setup.close_executors, measurer.stop, thread.stop, setup.sampler.close if sampler_open else (lambda: None)):
        try:
            stop()
        except Exception:  # the status below is what matters now; a failing clean-up must not hide it
            pass
    result.status, result.status_detail = status, detail
    extra = {"finished_at": datetime.now(timezone.utc).isoformat()}
    if result.info:  # the row as written, for what the command prints and exports (--json's runs)
        result.info.update(status=status, status_detail=detail, finished_at=extra["finished_at"])
    if contention_after is not None:
        after = contention_after()
        extra["contention_json"] = _to_json({"before": setup.contention, "after": after})
        result.info["contention_json"] = extra["contention_json"]
    writer.finish(status, detail, **extra)


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    return f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""


def _record_untimed(s: Session, base: dict, kernel, *, mid: str, status: str, error: str, repeat: int = -1,
                    gate: dict | None = None) -> None:
    """A kernel x input reported with its reason and not timed (further); `gate`: a failed gate's numbers."""
    row = {**base, "measurement_id": mid, "kernel": kernel.name, "kernel_source": kernel.source, "repeat": repeat,
           "order_index": -1, "status": status, "error": error, **(gate or {})}
    s.writer.append_measurement(measurement=row, chunks=[], samples=[], probes=[])
    s.result.measurements.append(row)
    s.obs.on_message(error)


def _failure(kernel, spec, inputs, stage: str, exc: BaseException) -> tuple[str, str]:
    """(status, error text naming the kernel, the input and the stage) for a kernel that failed."""
    who = f"Kernel {kernel.name!r} on {spec.label} ({spec.shape.label()}, {spec.dtype})"
    if isinstance(exc, ReportedFailure):  # its own process wrote the text, with this same function
        return exc.status, str(exc)
    if isinstance(exc, KernelTimeout):
        return "timeout", (f"{who}: {exc} in stage {stage}; it was stopped and is not timed on this input. The "
                           f"other kernels still run. The limit is the protocol's launch_timeout_s "
                           f"(--launch-timeout-s).")
    if isinstance(exc, GateFailure):
        return "gate_failed", str(exc)
    if isinstance(exc, KernelError):
        return "error", f"{who}, stage {stage}: {exc}"
    return "error", (f"{who} raised in stage {stage}: {type(exc).__name__}: {exc}{_where(exc)}. It is not timed on "
                     f"this input; the run went on with the others.")


def _group_key(spec) -> tuple:
    tag, sep, _ = spec.label.partition(":")
    layer = tag if sep and tag[:1] == "L" and tag[1:].isdigit() else ""
    return layer, spec.shape, str(spec.dtype)


def comparison_groups(inputs, *, interleave: bool) -> list[list[tuple[int, object]]]:
    """The configurations as (index, spec) groups, in first-seen order. With `interleave` the configurations a
    run compares with each other (same layer tag, shape and dtype: a capture and its controls) form one group,
    timed in turn within every repeat, so their comparison pairs by repeat and a drift of the machine between
    them (the host's load, the card's temperature) cannot pass for a difference of the data; otherwise one
    configuration a group, one after the other."""
    groups: dict = {}
    for config_index, spec in enumerate(inputs):
        groups.setdefault(_group_key(spec) if interleave else config_index, []).append((config_index, spec))
    return list(groups.values())


@dataclass
class _Config:
    config_index: int
    spec: object
    inputs: object
    base: dict
    guard: object
    ready: list  # (kernel, executor, row columns) of the kernels that passed the gate


def _open_config(s: Session, m: Measurer, config_index: int, spec) -> _Config | None:
    """Inputs made and checked, every kernel prepared and gated on them (failures recorded); None when the
    inputs themselves are unusable."""
    p = m.mid_prefix
    inputs = make_inputs(spec, device=s.device.torch_device)
    base = config_row(config_index, spec, inputs)
    try:
        check_finite(inputs)
    except InputError as exc:
        # Reported per kernel and never timed; the run goes on with its other configurations.
        for kernel in s.kernels:
            _record_untimed(s, base, kernel, mid=f"{p}{config_index}-{kernel.name}-input", status="input_error",
                            error=str(exc))
        return None
    guard = InputsGuard(spec, inputs)
    ready = []
    local = [k for k in s.kernels if k.name not in s.executors]
    for kernel in s.kernels:
        executor = s.executors.get(kernel.name) or InProcess(s.side, m, kernel)
        # Each kernel in this process gets tensors of its own (the last one the originals): a thread one kernel
        # left running cannot write into the next one's inputs, nor get an innocent kernel refused for it. A
        # kernel in its own process makes its own from the spec.
        mine = inputs if kernel.name in s.executors or kernel is local[-1] else inputs.copy()
        try:
            extra = executor.ready(config_index, spec, mine, guard if mine is inputs else InputsGuard(spec, mine))
        except Exception as exc:
            executor.drain()
            status, error = _failure(kernel, spec, inputs, executor.stage, exc)
            _record_untimed(s, base, kernel, mid=f"{p}{config_index}-{kernel.name}-gate", status=status, error=error,
                            gate=getattr(exc, "gate", None))
            executor.release(config_index)
            continue
        ready.append((kernel, executor, extra))
    return _Config(config_index=config_index, spec=spec, inputs=inputs, base=base, guard=guard, ready=ready)


def _run_group(s: Session, m: Measurer, group) -> None:
    """Every repeat of a group's configurations: within a repeat each configuration in turn, and each kernel in
    turn within it, both orders rotated from repeat to repeat."""
    proto, p = s.protocol, m.mid_prefix
    configs = [c for c in (_open_config(s, m, config_index, spec) for config_index, spec in group) if c is not None]
    indices = {c.config_index for c in configs}
    rotate = proto.rotate_order
    rep = -1
    while True:
        rep += 1
        live = [c for c in configs if c.ready]
        if rep >= proto.repeats and not (live and s.more_repeats is not None and s.more_repeats(
                rep, [r for r in s.result.measurements if r.get("config_index") in indices and r.get("time_ns")])):
            break
        oi = 0  # the measurement's place in this repeat: the first of the group's first repeat idles longest
        for c in (_rotate(live, rep) if rotate else live):
            for entry in list(_rotate(c.ready, rep) if rotate else c.ready):
                kernel, executor, extra = entry
                mid = f"{p}{c.config_index}-{kernel.name}-r{rep}"
                s.obs.on_measurement_start(kernel=kernel.name, input_label=c.spec.label, repeat=rep)
                try:
                    timing = executor.time(repeat=rep, idle_s=m.idle_s(rep, oi), config_index=c.config_index)
                    row, chunks, samples, probes = m.rows(s, timing, inputs=c.inputs, mid=mid)
                except Exception as exc:
                    # This kernel x input stops here (its later repeats too); the others go on.
                    executor.drain()
                    status, error = _failure(kernel, c.spec, c.inputs, f"measure (repeat {rep})", exc)
                    _record_untimed(s, c.base, kernel, mid=mid, status=status, error=error, repeat=rep)
                    executor.release(c.config_index)
                    c.ready.remove(entry)
                    continue
                finally:
                    oi += 1
                row.update(c.base)
                row.update({"measurement_id": mid, "kernel": kernel.name, "kernel_source": kernel.source,
                            "repeat": rep, "order_index": oi - 1, **extra})
                s.writer.append_measurement(measurement=row, chunks=chunks, samples=samples, probes=probes)
                s.result.measurements.append(row)
                s.obs.on_measurement_end(row)
    for c in configs:
        for _, executor, _ in c.ready:
            executor.release(c.config_index)
    del configs
    if s.device.kind in ("cuda", "rocm"):
        import torch

        torch.cuda.empty_cache()
