"""`run_sustained`: every kernel on every input, repeated with the kernel order rotated, written as it goes."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from harness.analysis import chunk_clock, median, summarize_window
from harness.config import RunConfig
from harness.errors import HarnessError, KernelError
from harness.runner._chunks import PipelinedChunks
from harness.runner._launch import build_launcher
from harness.runner._measure import run_protocol
from harness.runner._observer import NullObserver, RunObserver
from harness.runner._probe import InbandProbe, probe_unavailable_reason
from harness.runner._setup import config_row, run_info_row, set_up_run

__all__ = ["RunResult", "run_sustained"]


@dataclass(kw_only=True)
class RunResult:
    run_id: str
    path: Path
    status: str
    info: dict
    measurements: list[dict] = field(default_factory=list)


def _rotate(items: list, k: int) -> list:
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


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


def run_sustained(
    config: RunConfig,
    *,
    observer: RunObserver | None = None,
    registry=None,
    device=None,
    sampler=None,
    clock: Callable[[], int] = time.monotonic_ns,
    sleep: Callable[[float], None] = time.sleep,
    command: str = "",
) -> RunResult:
    """Run the sustained protocol for every kernel x input in `config` and write the results.

    `device` and `sampler` may be injected (tests, replayed telemetry); otherwise they are created from
    the config, and a telemetry backend that cannot start is an error, never a silent fallback.
    """
    from harness.results import RunWriter, new_run_id
    from harness.results._provenance import to_json
    from harness.telemetry import SamplerThread

    obs = observer or NullObserver()
    proto = config.protocol
    setup = set_up_run(config, registry=registry, device=device, sampler=sampler)
    kernels, device, ident, sampler = setup.kernels, setup.device, setup.ident, setup.sampler
    writer = RunWriter(config.results_dir, new_run_id(config.run_name))
    info = run_info_row(config, setup, command=command, protocol=proto)
    sampler.open()
    info["telemetry_json"] = to_json(sampler.describe())
    writer.write_run(info)
    result = RunResult(run_id=writer.run_id, path=writer.path, status="running", info=info)
    obs.on_run_start(result, total=len(config.inputs) * len(kernels) * proto.repeats)
    thread = SamplerThread(sampler, period_s=proto.sample_period_s, clock=clock)
    probe_reason = probe_unavailable_reason(device) if proto.probe else "probe disabled"
    probe = None
    try:
        thread.start()
        if probe_reason is None:
            probe = InbandProbe(device, period_s=proto.probe_period_s, spin_us=proto.probe_spin_us)
        session = _Session(config=config, kernels=kernels, device=device, ident=ident, thread=thread, probe=probe,
                           probe_reason=probe_reason, writer=writer, result=result, obs=obs, clock=clock, sleep=sleep)
        for ci, spec in enumerate(config.inputs):
            _run_config(session, ci, spec)
        result.status = "complete"
        writer.set_status("complete", finished_at=datetime.now(timezone.utc).isoformat())
    except KeyboardInterrupt:
        result.status = "incomplete"
        writer.set_status("incomplete", f"interrupted by the user after {len(result.measurements)} measurements",
                          finished_at=datetime.now(timezone.utc).isoformat())
        raise
    except BaseException as exc:
        result.status = "failed"
        detail = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
        writer.set_status("failed", detail, finished_at=datetime.now(timezone.utc).isoformat())
        raise
    finally:
        thread.stop()
        sampler.close()
        obs.on_run_end(result)
    return result


@dataclass(frozen=True, kw_only=True)
class _Session:
    """What every measurement of one run shares."""

    config: RunConfig
    kernels: list
    device: object
    ident: object
    thread: object
    probe: InbandProbe | None
    probe_reason: str | None
    writer: object
    result: RunResult
    obs: RunObserver
    clock: Callable[[], int]
    sleep: Callable[[float], None]


def _record_untimed(s: _Session, base: dict, kernel, *, mid: str, status: str, exc: Exception) -> None:
    """A kernel x input that is reported with its reason and never timed."""
    row = {**base, "measurement_id": mid, "kernel": kernel.name, "kernel_source": kernel.source, "repeat": -1,
           "order_index": -1, "status": status, "error": str(exc)}
    s.writer.append_measurement(measurement=row, chunks=[], samples=[], probes=[])
    s.result.measurements.append(row)
    s.obs.on_message(str(exc))


def _run_config(s: _Session, ci: int, spec) -> None:
    from harness.errors import GateFailure, InputError
    from harness.inputs import check_finite, make_inputs
    from harness.kernels import gate

    proto = s.config.protocol
    inputs = make_inputs(spec, device=s.device.torch_device)
    base = config_row(ci, spec, inputs)
    try:
        check_finite(inputs)
    except InputError as exc:
        # Reported per kernel and never timed; the run goes on with its other configurations.
        for kernel in s.kernels:
            _record_untimed(s, base, kernel, mid=f"c{ci}-{kernel.name}-input", status="input_error", exc=exc)
        return
    ready = []
    for kernel in s.kernels:
        try:
            launch = kernel.prepare(inputs)
            g = gate(kernel, inputs, launch) if s.config.gate else None
            _check_stream(s.device, kernel, launch)
            launcher = build_launcher(s.device, kernel, launch, strategy=s.config.launch,
                                      target_s=proto.graph_replay_s, max_launches=proto.max_graph_launches)
        except KernelError as exc:
            status = "gate_failed" if isinstance(exc, GateFailure) else "error"
            _record_untimed(s, base, kernel, mid=f"c{ci}-{kernel.name}-gate", status=status, exc=exc)
            continue
        ready.append((kernel, launch, launcher, g))
    for rep in range(proto.repeats):
        order = _rotate(ready, rep) if proto.rotate_order else ready
        for oi, (kernel, launch, launcher, g) in enumerate(order):
            idle = proto.idle_before_config_s if rep == 0 and oi == 0 else proto.idle_before_kernel_s
            mid = f"c{ci}-{kernel.name}-r{rep}"
            s.obs.on_measurement_start(kernel=kernel.name, input_label=spec.label, repeat=rep)
            row, chunks, samples, probes = _measure_one(s, launch, launcher, idle=idle, inputs=inputs, mid=mid)
            row.update(base)
            row.update({
                "measurement_id": mid, "kernel": kernel.name, "kernel_source": kernel.source, "repeat": rep,
                "order_index": oi, "launch_strategy": launcher.strategy,
                "launch_note": launcher.note or probe_reason_note(s.probe_reason),
                "launches_per_call": launcher.launches_per_call,
                "gate_max_abs_diff": g.max_abs_diff if g else None, "gate_snr_db": g.snr_db if g else None,
            })
            s.writer.append_measurement(measurement=row, chunks=chunks, samples=samples, probes=probes)
            s.result.measurements.append(row)
            s.obs.on_measurement_end(row)
    del ready, inputs
    if s.device.kind in ("cuda", "rocm"):
        import torch

        torch.cuda.empty_cache()


def probe_reason_note(reason: str | None) -> str:
    return f"in-band probe off: {reason}" if reason else ""


def _measure_one(s: _Session, launch, launcher, *, idle: float, inputs, mid: str):
    """One idle / warm-in / window; returns the measurement row and its chunk, sample and probe rows."""
    from harness.runner._launch import estimate_launch_ns

    proto, device, thread, probe = s.config.protocol, s.device, s.thread, s.probe

    def source_factory():
        # Sized after the idle, from the kernel as it runs now: chunks of about chunk_s of device time.
        per_call_ns = estimate_launch_ns(device, launch, repeats=2) * launcher.launches_per_call
        calls = max(1, round(proto.chunk_s * 1e9 / per_call_ns))
        return PipelinedChunks(device, launcher, calls_per_chunk=calls, clock=s.clock)

    if probe is not None:
        probe.calibrate()
    outcome = run_protocol(
        source_factory, protocol=proto, idle_s=idle, clock=s.clock, sleep=s.sleep, on_phase=s.obs.on_phase,
        on_chunk=lambda c, chk: s.obs.on_chunk(c, chk, thread.last_poll()),
        on_window_start=(probe.start if probe is not None else (lambda: None)),
    )
    readings = probe.stop() if probe is not None else []
    ph = outcome.phases
    samples = thread.samples_between(ph.idle[0], ph.window[1])
    summary = summarize_window(window_chunks=outcome.window_chunks, samples=samples, probes=readings,
                               flops_per_launch=float(inputs.shape.flops), sm_count=s.ident.sm_count)
    chunk_rows = []
    for c in outcome.chunks:
        inb = median([p.clock_mhz for p in readings if c.t_start_ns <= p.t_ns <= c.t_end_ns])
        powers = [x.power_w for x in samples if c.t_start_ns <= x.t_ns <= c.t_end_ns and x.power_w is not None]
        chunk_rows.append({
            "measurement_id": mid, "chunk_index": c.index, "phase": c.phase, "t_start_ns": c.t_start_ns,
            "t_end_ns": c.t_end_ns, "device_ns": c.device_ns, "launches": c.launches, "time_ns": c.time_ns,
            "sm_clock_mhz": chunk_clock(samples, c.t_start_ns, c.t_end_ns), "inband_clock_mhz": inb,
            "power_w": sum(powers) / len(powers) if powers else None,
        })
    settle = outcome.settle
    row = {
        **summary,
        "status": "ok" if outcome.settled else "unsettled",
        "error": None if outcome.settled else (
            f"warm-in reached the {proto.warmin_cap_s:g} s cap without settling ({settle.reason if settle else '?'}); "
            f"the window was timed anyway and is marked unsettled"),
        "settled": outcome.settled,
        "settled_after_s": outcome.settled_after_s,
        "settle_reason": settle.reason if settle else None,
        "warmin_s": (ph.warmin[1] - ph.warmin[0]) * 1e-9,
    }
    sample_rows = [_sample_row(x, _phase_of(x.t_ns, ph), mid) for x in samples]
    probe_rows = [{"measurement_id": mid, **dataclasses.asdict(p)} for p in readings]
    return row, chunk_rows, sample_rows, probe_rows
