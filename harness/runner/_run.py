"""`run_sustained`: every kernel on every input, repeated with the kernel order rotated, written as it goes."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from harness.analysis import chunk_clock, median, summarize_window
from harness.config import RunConfig
from harness.errors import KernelError
from harness.results import RunWriter, new_run_id
from harness.runner._chunks import Chunk, PipelinedChunks
from harness.runner._launch import build_launcher, estimate_launch_ns
from harness.runner._loop import RunHooks, RunResult, Session, run_loop
from harness.runner._measure import PhaseTimes, run_protocol
from harness.runner._probe import InbandProbe, ProbeReading, probe_unavailable_reason
from harness.runner._settle import SettleCheck
from harness.runner._setup import run_info_row

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; the annotation is never evaluated at run time
    from typing import Unpack

__all__ = ["RunResult", "run_sustained"]  # RunResult: runner._loop's, re-exported


def _sample_row(s, phase: str, mid: str) -> dict:
    row = dataclasses.asdict(s)
    row["chiplet_clocks_mhz"] = list(s.chiplet_clocks_mhz) if s.chiplet_clocks_mhz is not None else None
    return {**row, "phase": phase, "measurement_id": mid}


def _phase_of(t: int, phases) -> str:
    if phases.window[0] <= t <= phases.window[1]:
        return "window"
    if phases.warmin[0] <= t <= phases.warmin[1]:
        return "warmin"
    if phases.idle[0] <= t <= phases.idle[1]:
        return "idle"
    return "between"


def _check_stream(device, kernel, launch) -> None:
    """Reject kernels whose work does not run on the launch stream: events on that stream would time nothing.

    The device time that events measure is compared with the host wall time of the same launches with a
    device-wide synchronize; work launched on a side stream shows up only in the latter.
    """
    if device.kind not in ("cuda", "rocm"):
        return
    # One launch first: a cold first call (library handles, allocations, with --no-gate no earlier call)
    # puts set-up work on the launch stream and would hide a side stream (seen on the H200: 67 of 124 ms).
    launch()
    device.synchronize()
    t0 = time.perf_counter_ns()
    start = device.mark()
    for _ in range(3):
        launch()
    end = device.mark()
    device.synchronize()
    wall = time.perf_counter_ns() - t0
    evt = device.elapsed_ns(start, end)
    if wall > 2_000_000 and evt < 0.5 * wall:
        raise KernelError(
            f"Kernel {kernel.name!r}: 3 launches took {wall / 1e6:.2f} ms of wall time with the device synchronized "
            f"but only {evt / 1e6:.2f} ms on the launch stream's events. Its work runs on another stream, so stream "
            f"timing would under-report it. Launch on torch.cuda.current_stream(). It is not timed."
        )


def run_sustained(config: RunConfig, *, command: str = "", **hooks: Unpack[RunHooks]) -> RunResult:
    """Run the sustained protocol for every kernel x input in `config` and write the results.

    `hooks` (`RunHooks`: observer, registry, device, sampler, clock, sleep) replace what the config would
    create. The run loop, its failure isolation and its endings are `runner._loop.run_loop`'s; this
    supplies the sustained protocol's "measure one".
    """
    run_id = new_run_id(config.run_name)  # a bad --name is refused before anything runs
    proto = config.protocol
    return run_loop(
        config, protocol=proto, measurer=_Sustained(proto),
        open_writer=lambda setup: RunWriter(config.results_dir, run_id),
        info_row=lambda setup: run_info_row(config, setup, command=command, protocol=proto), **hooks,
    )


class _Sustained:
    """The sustained protocol's part of the run loop: launcher, idle, warm-in, window."""

    mid_prefix = "c"
    kind = "sustained"

    def __init__(self, proto) -> None:
        self.proto = proto
        self.probe = None
        self.probe_reason: str | None = None

    def start(self, s: Session) -> None:
        pass

    def open(self, side) -> None:
        self.probe_reason = probe_unavailable_reason(side.device) if self.proto.probe else "probe disabled"
        if self.probe_reason is None:
            self.probe = InbandProbe(side.device, period_s=self.proto.probe_period_s, spin_us=self.proto.probe_spin_us)

    def arm(self, side, kernel, launch):
        _check_stream(side.device, kernel, launch)
        return build_launcher(side.device, kernel, launch, strategy=side.launch, target_s=self.proto.graph_replay_s,
                              max_launches=self.proto.max_graph_launches)

    def idle_s(self, rep: int, order_index: int) -> float:
        p = self.proto
        return p.idle_before_config_s if rep == 0 and order_index == 0 else p.idle_before_kernel_s

    def time(self, side, kernel, launch, launcher, *, idle_s: float, inputs) -> dict:
        return _time_one(side, self.probe, launch, launcher, idle=idle_s)

    def rows(self, s: Session, timing: dict, *, inputs, mid: str):
        return _rows_of(s, timing, inputs=inputs, mid=mid)

    def row_extra(self, launcher) -> dict:
        return {"launch_strategy": launcher.strategy,
                "launch_note": launcher.note or probe_reason_note(self.probe_reason),
                "launches_per_call": launcher.launches_per_call}

    def stop(self) -> None:
        pass


def probe_reason_note(reason: str | None) -> str:
    return f"in-band probe off: {reason}" if reason else ""


class _Watched:
    """A chunk source whose every chunk is bounded by the launch watchdog (one timer per chunk, not per
    launch: nothing is added to the launches being timed)."""

    def __init__(self, source, watchdog) -> None:
        self._source, self._watchdog = source, watchdog

    def next(self):
        with self._watchdog.limit(what="a chunk"):
            return self._source.next()

    def finish(self) -> None:
        with self._watchdog.limit(what="the end of its last chunk"):
            self._source.finish()


def _time_one(side, probe, launch, launcher, *, idle: float) -> dict:
    """One idle / warm-in / window where the kernel runs; its chunks, phases, settle check and probe
    readings as plain data (the same in this process and in a kernel's own: `_rows_of` reads them)."""
    proto, device = side.protocol, side.device

    def source_factory():
        # Sized after the idle, from the kernel as it runs now: chunks of about chunk_s of device time.
        with side.watchdog.limit(what="sizing its chunks"):
            per_call_ns = estimate_launch_ns(device, launch, repeats=2) * launcher.launches_per_call
        calls = max(1, round(proto.chunk_s * 1e9 / per_call_ns))
        return _Watched(PipelinedChunks(device, launcher, calls_per_chunk=calls, clock=side.clock), side.watchdog)

    if probe is not None:
        probe.calibrate()
    try:
        outcome = run_protocol(
            source_factory, protocol=proto, idle_s=idle, clock=side.clock, sleep=side.sleep, on_phase=side.on_phase,
            on_chunk=side.on_chunk, on_window_start=(probe.start if probe is not None else (lambda: None)),
        )
    finally:
        readings = probe.stop() if probe is not None else []
    return {"chunks": [dataclasses.asdict(c) for c in outcome.chunks], "settled": outcome.settled,
            "settled_after_s": outcome.settled_after_s,
            "settle": dataclasses.asdict(outcome.settle) if outcome.settle else None,
            "phases": dataclasses.asdict(outcome.phases), "probes": [dataclasses.asdict(p) for p in readings]}


def _rows_of(s: Session, timing: dict, *, inputs, mid: str, attention_flops: bool = True):
    """The measurement row and its chunk, sample and probe rows, from one timing and this process's telemetry.
    `attention_flops` False: one launch is not the inputs' attention (a model's forward), so no FLOP figures."""
    proto, thread = s.config.protocol, s.thread
    chunks = [Chunk(**c) for c in timing["chunks"]]
    readings = [ProbeReading(**p) for p in timing["probes"]]
    ph = PhaseTimes(**{k: tuple(v) for k, v in timing["phases"].items()})
    settle = SettleCheck(**timing["settle"]) if timing["settle"] else None
    samples = thread.samples_between(ph.idle[0], ph.window[1])
    summary = summarize_window(window_chunks=[c for c in chunks if c.phase == "window"], samples=samples,
                               probes=readings, flops_per_launch=float(inputs.shape.flops) if attention_flops else None,
                               sm_count=s.ident.sm_count)
    chunk_rows = []
    for c in chunks:
        inb = median([p.clock_mhz for p in readings if c.t_start_ns <= p.t_ns <= c.t_end_ns])
        powers = [x.power_w for x in samples if c.t_start_ns <= x.t_ns <= c.t_end_ns and x.power_w is not None]
        chunk_rows.append({
            "measurement_id": mid, "chunk_index": c.index, "phase": c.phase, "t_start_ns": c.t_start_ns,
            "t_end_ns": c.t_end_ns, "device_ns": c.device_ns, "launches": c.launches, "time_ns": c.time_ns,
            "sm_clock_mhz": chunk_clock(samples, c.t_start_ns, c.t_end_ns), "inband_clock_mhz": inb,
            "power_w": sum(powers) / len(powers) if powers else None,
        })
    settled = timing["settled"]
    row = {
        **summary,
        "status": "ok" if settled else "unsettled",
        "error": None if settled else (
            f"warm-in reached the {proto.warmin_cap_s:g} s cap (--warmin-cap-s) without settling "
            f"({settle.reason if settle else '?'}); the window was timed anyway and is marked unsettled"),
        "settled": settled,
        "settled_after_s": timing["settled_after_s"],
        "settle_reason": settle.reason if settle else None,
        "warmin_s": (ph.warmin[1] - ph.warmin[0]) * 1e-9,
    }
    # A sample is "window" by the bounds the row's figures use (the window chunks' own edges), not the
    # loop's phase times: a host stall between the last warm-in chunk and the first window chunk lies
    # inside the latter but outside the former, and its samples are in no figure.
    labelled = dataclasses.replace(ph, window=(summary["window_start_ns"], summary["window_end_ns"]))
    sample_rows = [_sample_row(x, _phase_of(x.t_ns, labelled), mid) for x in samples]
    probe_rows = [{"measurement_id": mid, **dataclasses.asdict(p)} for p in readings]
    return row, chunk_rows, sample_rows, probe_rows
