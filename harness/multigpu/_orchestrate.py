"""`run_multi`: one worker process per GPU of this node, each measuring alone, merged into one run.

Why processes, not threads: each worker's CUDA context, telemetry thread and protocol timing must not
share a Python interpreter (the GIL would couple the workers' launch loops). Why one GPU visible per worker:
a library that touches "device 0" on its own would otherwise leave a context, and so a process, on another
worker's GPU, which that worker's idle check would rightly refuse.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from harness.config import RunConfig
from harness.errors import DeviceBusyError, DeviceError
from harness.multigpu._merge import (
    GpuOutcome,
    MultiResult,
    Piece,
    merge_pieces,
    read_piece,
    read_rows,
)
from harness.multigpu._plan import assign_configs
from harness.multigpu._select import (
    GpuSlot,
    enumerate_cuda_gpus,
    select_gpus,
    worker_env,
)
from harness.results import RunWriter, git_state, gpu_dirname, host_facts, new_run_id, to_json, write_table_atomic
from harness.workers import WaitExpired, Worker, harness_root, receive_any

__all__ = ["run_multi"]


# How long a worker stopped with SIGTERM (its handler marks its run incomplete) has before SIGKILL.
_TERM_GRACE_S = 10.0


class _Worker:
    """One GPU's process (harness.workers: a session of its own) and what it has reported; its messages go
    to the queue all workers share."""

    def __init__(self, slot: GpuSlot, *, argv: list[str], env: dict, cwd: Path, log: Path, events: queue.Queue):
        self.slot, self.log = slot, log
        # A session of its own: Ctrl-C in the terminal reaches the orchestrator alone, which passes exactly one
        # SIGINT on to each worker (two could interrupt a worker while it marks its run incomplete).
        self.proc = Worker.start(argv, env=env, cwd=cwd, log=log, events=events, key=self)
        self.run_dir: Path | None = None
        self.final: dict | None = None  # the done / error / busy event, if one came
        self.stopped = False  # the orchestrator ended it (silent, or not ready): `final` says why, not its last words
        self.measured = 0
        self.ended = False
        self.returncode: int | None = None
        self.last_seen = time.monotonic()

    def send(self, **message) -> None:
        self.proc.send(message)  # when the worker is gone, its end of stream says so

    def stop(self, why: str) -> None:
        """End a worker that did not answer: its whole process group, SIGTERM first (its end arrives as None)."""
        self.final, self.stopped = {"event": "error", "message": why}, True
        self.proc.kill(grace_s=_TERM_GRACE_S)

    def stderr_tail(self, n: int = 3) -> str:
        return " | ".join(self.proc.tail(n))

    def finish(self, *, wait_s: float = 60.0) -> int | None:
        """EOF on its stdin ("stop"), `wait_s` for it to end, then its group is killed (SIGTERM first)."""
        return self.proc.finish(wait_s=wait_s, grace_s=_TERM_GRACE_S)


def _next(events: queue.Queue, workers: list[_Worker], *, timeout: float):
    """The next event of any worker; a worker silent for `timeout` is stopped (its end arrives as None)."""
    while True:
        try:
            return receive_any(events, timeout=min(1.0, timeout), workers=[w.proc for w in workers])
        except WaitExpired:
            now = time.monotonic()
            for w in workers:
                if not w.ended and now - w.last_seen > timeout and w.proc.poll() is None:
                    w.stop(f"sent nothing for {timeout:.0f} s; stopped")


def run_multi(
    config: RunConfig,
    *,
    gpus: str = "all",
    replicate: bool = False,
    present: Sequence[GpuSlot] | None = None,
    on_event: Callable[[str, dict], None] | None = None,
    python: str = sys.executable,
    command: str = "",
    startup_timeout_s: float = 1800.0,
) -> MultiResult:
    """Run `config`'s suite on several GPUs of this node, one worker process per GPU, merged into one run.

    `gpus` is `all`, indices (`0,2`) or PCI bus ids; `config.device` is replaced by each worker's GPU.
    Configurations are sharded round-robin over the GPUs that pass their idle check, or, with `replicate`,
    the whole suite runs on every GPU (to measure the spread between GPUs). `present` injects the GPU list
    (default: `enumerate_cuda_gpus()`; tests pass `cpu_stand_ins(n)`). `on_event(gpu, event)` hears the
    workers' JSON events. A busy GPU is skipped; a worker that dies keeps its finished measurements and makes
    the merged run incomplete. Raises DeviceBusyError when no GPU at all can be used.
    """
    emit = on_event or (lambda gpu, event: None)
    slots = select_gpus(gpus, present=list(present) if present is not None else enumerate_cuda_gpus())
    n = len(config.inputs)
    mode = "replicate" if replicate else "shard"
    assign_configs(n, len(slots), replicate=replicate)  # refuse more GPUs than configurations before starting
    writer = RunWriter(config.results_dir, new_run_id(config.run_name))
    started_at = datetime.now(timezone.utc).isoformat()
    config_json = to_json({**config.to_dict(), "protocol": None, "gpus": gpus, "replicate": replicate})
    commit, dirty = git_state(Path(__file__).resolve().parent)
    writer.write_run({"status": "running", "started_at": started_at, "command": command, "git_commit": commit,
                      "git_dirty": dirty, **host_facts(), "protocol_json": to_json(config.protocol.as_dict()),
                      "config_json": config_json, "pci_bus_id": ",".join(s.gpu_id for s in slots),
                      "notes": f"{mode} over {len(slots)} GPU(s); running"})
    sub_root = writer.path / "gpus"
    sub_root.mkdir()
    events: queue.Queue = queue.Queue()
    workers: list[_Worker] = []
    pythonpath = str(harness_root())
    cwd = Path.cwd()
    try:
        for slot in slots:
            spec = {"config": config.to_dict(), "gpu_id": slot.gpu_id, "device": slot.device,
                    "device_factory": slot.device_factory, "results_dir": str(sub_root.resolve()),
                    "run_name": f"gpu-{gpu_dirname(slot.gpu_id)}", "mode": mode, "command": command,
                    "orchestrator_pid": os.getpid()}
            spec_file = sub_root / f"{gpu_dirname(slot.gpu_id)}.worker.json"  # a file: argv has a size limit
            spec_file.write_text(json.dumps(spec, indent=1), encoding="utf-8")
            argv = [python, "-m", "harness.multigpu._worker", "--spec", str(spec_file)]
            workers.append(_Worker(slot, argv=argv, env=worker_env(slot, pythonpath=pythonpath), cwd=cwd,
                                   log=sub_root / f"{gpu_dirname(slot.gpu_id)}.log", events=events))
        ready = _await_ready(workers, events, emit, timeout=startup_timeout_s)
        if ready:
            for w, indices in zip(ready, assign_configs(n, len(ready), replicate=replicate)):
                w.send(op="run", configs=list(indices), workers=len(ready))
            _pump(workers, events, emit, timeout=_silence_timeout(config))
    except BaseException as exc:
        for w in workers:  # the workers keep what they finished: ask them to stop, as Ctrl-C in a terminal does
            w.proc.signal(signal.SIGINT)
        _finish(workers)
        if not isinstance(exc, KeyboardInterrupt):
            writer.set_status("failed", f"{type(exc).__name__}: {exc}",
                              finished_at=datetime.now(timezone.utc).isoformat())
            raise
        _merge(writer, workers, config, mode, config_json, started_at, command, interrupted=True)
        raise
    _finish(workers)
    result = _merge(writer, workers, config, mode, config_json, started_at, command, interrupted=False)
    if not any(w.run_dir for w in workers):
        reasons = "; ".join(f"{o.gpu}: {o.detail}" for o in result.gpus)
        busy = all((w.final or {}).get("event") == "busy" for w in workers)
        raise (DeviceBusyError if busy else DeviceError)(
            f"No GPU could be used ({reasons}). The run {result.path} is marked failed.")
    return result


def _await_ready(workers, events, emit, *, timeout: float) -> list[_Worker]:
    """Every worker's idle-check verdict; the ready ones, in GPU order."""
    pending = set(workers)
    deadline = time.monotonic() + timeout
    while pending:
        try:
            w, msg = receive_any(events, timeout=max(0.1, deadline - time.monotonic()), workers=[w.proc for w in pending])
        except WaitExpired:
            for w in pending:
                w.stop(f"not ready after {timeout:.0f} s; stopped")
            break
        if msg is None:
            w.ended = True
            pending.discard(w)
            continue
        emit(w.slot.gpu_id, msg)
        if msg.get("event") == "ready":
            pending.discard(w)
        elif msg.get("event") in ("busy", "error") and not w.stopped:
            w.final = msg
            pending.discard(w)
    return [w for w in workers if w.final is None and not w.ended]


def _pump(workers, events, emit, *, timeout: float) -> None:
    live = {w for w in workers if not w.ended}
    for w in live:
        w.last_seen = time.monotonic()
    while live:
        w, msg = _next(events, list(live), timeout=timeout)
        w.last_seen = time.monotonic()
        if msg is None:
            w.ended = True
            live.discard(w)
            continue
        kind = msg.get("event")
        if kind == "started":
            w.run_dir = Path(msg["run_dir"])
        elif kind == "measured":
            w.measured += 1
        elif kind in ("done", "error", "busy") and not w.stopped:
            w.final = msg
        emit(w.slot.gpu_id, msg)


def _silence_timeout(config: RunConfig) -> float:
    # A measurement is idle + warm-in (capped) + window, each measured kernel sends an event; the margin covers
    # preparing inputs, compiling a kernel and the correctness gate of a new configuration.
    p = config.protocol
    return p.idle_before_config_s + p.warmin_cap_s + p.window_s + 900.0


def _finish(workers) -> None:
    for w in workers:
        w.returncode = w.finish()


def _merge(writer, workers, config, mode, config_json, started_at, command, *, interrupted: bool) -> MultiResult:
    pieces: list[Piece] = []
    stopped: dict[Path, str] = {}
    not_run: list[GpuOutcome] = []
    for w in workers:
        final = w.final or {}
        if w.run_dir is None or not (w.run_dir / "runs.parquet").is_file():
            status = "busy" if final.get("event") == "busy" else ("idle" if final.get("status") == "idle" else "error")
            why = final.get("message") or (f"the worker exited with status {w.returncode} before it reported; "
                                           f"its log {w.log} ends: {w.stderr_tail() or '(empty)'}")
            not_run.append(GpuOutcome(gpu=w.slot.gpu_id, status=status, detail=why))
            continue
        piece = read_piece(w.run_dir)
        pieces.append(piece)
        if final.get("event") != "done":
            why = ("interrupted" if interrupted else f"the worker exited with status {w.returncode}"
                   + (f": {final['message']}" if final.get("message") else ""))
            stopped[piece.path] = why
            info = read_rows(w.run_dir, "runs")[0]
            if info.get("status") == "running":  # the worker died before it could say so in its own run
                write_table_atomic(w.run_dir / "runs.parquet", "runs",
                                   [{**info, "status": "incomplete", "status_detail": why}])
    header = {"command": command, "config_json": config_json, "started_at": started_at}
    result = merge_pieces(writer, pieces, header=header, not_run=not_run, stopped=stopped, suite_size=len(config.inputs),
                          mode=mode)
    if interrupted and result.status == "complete":
        writer.set_status("incomplete", "interrupted by the user")
        result.status, result.status_detail = "incomplete", "interrupted by the user"
    return result
