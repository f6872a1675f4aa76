"""Kernel-only (burst) timing, per the protocol: 500 warm-up launches, then 100 timed launches whose time
is the device time of every kernel the operation dispatched, from the profiler's trace, / launches.

On CUDA the device times are CUPTI's kernel, memcpy and memset records (torch.profiler); every stream
counts, so work on a side stream cannot hide. On the CPU there is no device trace: the time is the
profiler's CPU op time of the top-level ops inside the timed range (what the launch closure called),
which leaves out the Python loop around them.

Burst rows go to the same store as sustained ones: a measurement row with status "burst" and
launch_strategy "burst-profiler"; the window columns span the timed launches, so telemetry over them
gives the clock and power the burst ran at. `--into RUN` appends them to an existing run, so one report
puts burst next to sustained for each kernel.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

from harness.analysis import summarize_window
from harness.config import BurstConfig, BurstProtocol
from harness.errors import KernelError, ResultsError
from harness.results import RunAppender, RunWriter, new_run_id, to_json
from harness.runner._loop import RunHooks, RunResult, run_loop
from harness.runner._run import _sample_row
from harness.runner._setup import run_info_row

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; the annotation is never evaluated at run time
    from typing import Unpack

__all__ = ["KernelTimes", "ProfEvent", "device_time_from_events", "run_burst"]

TIMED_RANGE = "harness::burst_timed"
_DEVICE_ACTIVITIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True, kw_only=True)
class ProfEvent:
    """One profiler record, reduced to what the timing needs (tests build these by hand)."""

    name: str
    on_device: bool
    activity: str  # kineto's category: "kernel", "gpu_memcpy", "cpu_op", "user_annotation", ...
    start_ns: int
    duration_ns: int


@dataclass(frozen=True, kw_only=True)
class KernelTimes:
    per_launch_ns: float
    total_ns: int
    launches: int
    source: str  # "cupti" or "cpu-ops"
    by_name: dict[str, tuple[int, int]]  # name -> (count, total ns)

    def note(self) -> str:
        what = ("kernel-only: CUPTI device time of every kernel/memcpy/memset in the timed range"
                if self.source == "cupti" else
                "kernel-only on the CPU: profiler CPU time of the top-level ops in the timed range")
        top = sorted(self.by_name.items(), key=lambda kv: -kv[1][1])[:4]
        parts = [f"{c / self.launches:g}x {n[:60]} ({ns / c / 1e6:.4g} ms)" for n, (c, ns) in top]
        return f"{what}; per launch: " + ", ".join(parts)


def device_time_from_events(events: Sequence[ProfEvent], *, launches: int, device_kind: str) -> KernelTimes:
    """Time per launch from the events of a profile that covered exactly the timed launches."""
    if device_kind == "cpu":
        ranges = [e for e in events if e.activity == "user_annotation" and e.name == TIMED_RANGE]
        if not ranges:
            raise KernelError(f"The CPU profile holds no {TIMED_RANGE!r} range; the timed launches were not recorded.")
        r0, r1 = ranges[0].start_ns, ranges[0].start_ns + ranges[0].duration_ns
        ops = sorted((e for e in events if e.activity == "cpu_op" and r0 <= e.start_ns <= r1),
                     key=lambda e: (e.start_ns, -e.duration_ns))
        picked, end = [], -1
        for e in ops:  # top level: not inside the op kept before it (nested ops are its own dispatches)
            if e.start_ns >= end:
                picked.append(e)
                end = e.start_ns + e.duration_ns
        source = "cpu-ops"
    else:
        picked = [e for e in events if e.on_device and e.activity in _DEVICE_ACTIVITIES]
        source = "cupti"
    if not picked:
        raise KernelError(
            "The profiler recorded no kernel in the timed range. On CUDA this means CUPTI is unavailable to "
            "torch.profiler (another profiler attached, or a build without Kineto/CUPTI); kernel-only timing "
            "needs it. Run without ncu/nsys attached, or check torch.profiler on a small matmul."
        )
    by_name: dict[str, tuple[int, int]] = {}
    for e in picked:
        c, ns = by_name.get(e.name, (0, 0))
        by_name[e.name] = (c + 1, ns + e.duration_ns)
    total = sum(e.duration_ns for e in picked)
    return KernelTimes(per_launch_ns=total / launches, total_ns=total, launches=launches, source=source,
                       by_name=by_name)


def _events(prof) -> list[ProfEvent]:
    """The profile's complete events, read from its Chrome trace: that export is the same in every torch
    version, while the in-memory kineto event API is not (activity_type() is recent)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    out = []
    for e in trace.get("traceEvents", []) if isinstance(trace, dict) else trace:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        out.append(ProfEvent(name=str(e.get("name", "")), on_device=cat in (*_DEVICE_ACTIVITIES, "gpu_user_annotation"),
                             activity=cat, start_ns=round(float(e["ts"]) * 1000),
                             duration_ns=round(float(e["dur"]) * 1000)))
    return out


def _profile_one(device, launch, proto: BurstProtocol, *, clock, sleep, on_phase) -> tuple[KernelTimes, dict, object]:
    """Idle, warm up, time. The profiler is entered first, so CUPTI's start-up cost falls before the idle
    and the warm-up runs in the profiler's own warm-up step: the timed launches follow without a gap.
    Returns the times, the phases and the last timed launch's output."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.kind in ("cuda", "rocm") else [])
    steps = schedule(wait=0, warmup=1, active=1, repeat=1)
    with torch.no_grad(), profile(activities=activities, schedule=steps) as prof:
        on_phase("idle")
        t_idle = clock()
        sleep(proto.idle_s)
        on_phase("warmup")
        t_warm = clock()
        for _ in range(proto.warmup_launches):
            launch()
        device.synchronize()
        prof.step()
        on_phase("timed")
        t0 = clock()
        with record_function(TIMED_RANGE):
            for _ in range(proto.timed_launches - 1):
                launch()
            last = launch()  # checked after the timed range (runner._watch)
        device.synchronize()
        t1 = clock()
        prof.step()
    times = device_time_from_events(_events(prof), launches=proto.timed_launches, device_kind=device.kind)
    return times, {"idle": (t_idle, t_warm), "warmup": (t_warm, t0), "timed": (t0, t1)}, last


def _append_writer(run_dir: Path, ident, command: str, proto: BurstProtocol):
    """The results writer that adds this burst's measurements to a finished run (`--into`): the same parts as a run's
    own (named so they cannot collide), merged into the run's tables when the burst ends, however it ends. The run's
    status stays the sustained run's: a failed or stopped burst leaves it alone."""
    writer = RunAppender(run_dir, flag="--into")
    info = writer.info
    if info.get("status") == "running":
        raise ResultsError(f"--into {run_dir}: that run is still marked running (in progress, or killed). "
                           f"Append only to a finished run, or leave --into out.")
    theirs, mine = (info.get("pci_bus_id"), info.get("device_name")), (ident.pci_bus_id, ident.name)
    if theirs != mine:
        raise ResultsError(f"--into {run_dir}: that run was measured on {theirs[1]} ({theirs[0]}), this burst "
                           f"runs on {mine[1]} ({mine[0]}). Burst and sustained figures side by side must come "
                           f"from the same GPU; leave --into out to write a separate run.")
    note = f"burst appended {datetime.now(timezone.utc).isoformat()} by `{command}` with {to_json(proto.as_dict())}"
    writer.update_run(notes="; ".join(x for x in (info.get("notes"), note) if x))
    return writer


def run_burst(config: BurstConfig, *, command: str = "", **hooks: Unpack[RunHooks]) -> RunResult:
    """Time every kernel x input kernel-only and write the rows (a new run, or appended `into` one).

    `hooks` (`RunHooks`) replace what the config would create, as for `run_sustained`. The run loop (gate,
    failure isolation, non-finite inputs per kernel, Ctrl-C -> incomplete) is the sustained runner's,
    `runner._loop.run_loop`; this supplies the burst protocol's "measure one".
    """
    proto = config.protocol
    run_id = new_run_id(config.run_name) if config.into is None else None

    def open_writer(setup):
        if config.into is not None:
            return _append_writer(config.into, setup.ident, command, proto)
        return RunWriter(config.results_dir, run_id)

    def info_row(setup):
        return run_info_row(config, setup, command=command, protocol=proto) if config.into is None else None

    return run_loop(config, protocol=proto, measurer=_Burst(proto), open_writer=open_writer, info_row=info_row,
                    **hooks)


class _Burst:
    """The burst protocol's part of the run loop: profile the warm-up and timed launches."""

    mid_prefix = "b"
    kind = "burst"

    def __init__(self, proto: BurstProtocol) -> None:
        self.proto = proto

    def start(self, s) -> None:
        pass

    def open(self, side) -> None:
        pass

    def arm(self, side, kernel, launch):
        return _Armed(launch)

    def idle_s(self, rep: int, order_index: int) -> float:
        return self.proto.idle_s

    def time(self, side, kernel, launch, armed, *, idle_s: float, inputs) -> dict:
        with side.watchdog.limit(what="its warm-up and timed launches"):
            times, phases, armed.held = _profile_one(side.device, launch, self.proto, clock=side.clock,
                                                     sleep=side.sleep, on_phase=side.on_phase)
        return {"times": {**dataclasses.asdict(times), "by_name": {k: list(v) for k, v in times.by_name.items()}},
                "phases": {k: list(v) for k, v in phases.items()}}

    def rows(self, s, timing: dict, *, inputs, mid: str):
        times = KernelTimes(**{**timing["times"], "by_name": {k: tuple(v) for k, v in timing["times"]["by_name"].items()}})
        phases = {k: tuple(v) for k, v in timing["phases"].items()}
        row, chunks, samples = _rows(times, phases, s.ident, s.thread, self.proto, inputs, mid=mid,
                                     sample_row=_sample_row)
        return row, chunks, samples, []

    def row_extra(self, armed) -> dict:
        return {}

    def stop(self) -> None:
        pass


class _Armed:
    """A burst kernel ready to time: its launch, and the output of the last timed launch (`Launcher`'s `last` and
    `again`, for the check after the timed launches)."""

    def __init__(self, launch) -> None:
        self.again, self.held = launch, None

    def last(self):
        return self.held


def _rows(times: KernelTimes, phases: dict, ident, thread, proto, inputs, *, mid, sample_row):
    t0, t1 = phases["timed"]
    # One chunk spanning the timed launches lets summarize_window give the clock, power and limiters of
    # the burst exactly as it does for a sustained window.
    chunk = SimpleNamespace(t_start_ns=t0, t_end_ns=t1, device_ns=times.total_ns, launches=times.launches)
    samples = thread.samples_between(phases["idle"][0], t1)
    summary = summarize_window(window_chunks=[chunk], samples=samples, probes=[],
                               flops_per_launch=float(inputs.shape.flops), sm_count=ident.sm_count)
    note = times.note()
    if summary["sm_clock_mhz"] is None and summary["power_w"] is None:
        # Timed launches shorter than the sampling period hold no sample; the card state just around them
        # (end of warm-up, first idle moment) is the nearest reading, and the note says it was used.
        pad = int(2 * proto.sample_period_s * 1e9)
        wide = SimpleNamespace(t_start_ns=t0 - pad, t_end_ns=t1 + pad, device_ns=times.total_ns,
                               launches=times.launches)
        around = summarize_window(window_chunks=[wide], samples=samples, probes=[],
                                  flops_per_launch=float(inputs.shape.flops), sm_count=ident.sm_count)
        keep = ("sm_clock_mhz", "cycles_clock", "cycles_per_launch", "cycles_per_launch_nvml", "power_w",
                "temp_max_c", "reasons_mask", "reason_names", "flop_per_cycle_per_sm", "tflop_per_j",
                "energy_per_launch_from_power_j")
        if around["sm_clock_mhz"] is not None or around["power_w"] is not None:
            summary.update({k: around[k] for k in keep})
            note += f"; clock and power from samples within {pad / 1e6:g} ms of the timed launches (they were shorter)"
    row = {
        **summary, "measurement_id": mid, "status": "burst", "error": None,
        "launch_strategy": "burst-profiler", "launch_note": note, "launches_per_call": 1,
        "settled": None, "settled_after_s": None, "settle_reason": None,
        "warmin_s": (phases["warmup"][1] - phases["warmup"][0]) * 1e-9,
    }
    chunks = [{"measurement_id": mid, "chunk_index": 0, "phase": "burst", "t_start_ns": t0, "t_end_ns": t1,
               "device_ns": times.total_ns, "launches": times.launches, "time_ns": times.per_launch_ns,
               "sm_clock_mhz": summary["sm_clock_mhz"], "inband_clock_mhz": None, "power_w": summary["power_w"]}]

    def phase_of(t):
        return next((name for name, (a, b) in phases.items() if a <= t <= b), "between")

    return row, chunks, [sample_row(s, phase_of(s.t_ns), mid) for s in samples]
