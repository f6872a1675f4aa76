"""One GPU's measuring process: `python -m harness.multigpu._worker --spec FILE` or `--job FILE --task I`.

Each worker sees one GPU (the orchestrator sets CUDA_VISIBLE_DEVICES to it), opens it, checks that no other
process uses it, and runs the ordinary `run_sustained` on its configurations into its own run directory,
with its own telemetry and protocol. Workers never talk to each other: there is no collective.

`--spec` (one node, `run_multi`; the file says which GPU and suite): JSON lines. Worker -> orchestrator on the original stdout:
`{"event": "ready", ...}` or `{"event": "busy", "message": ...}` after the idle check, then `started`,
`measured` (one per measurement), `message`, and `done` or `error`. Orchestrator -> worker on stdin, once:
`{"op": "run", "configs": [...]}` or `{"op": "stop"}` (EOF = stop). Assigning after the idle check lets the
configurations of a busy GPU go to the others.

`--job FILE --task I` (a Slurm array task): the same events, no handshake; task I runs the configurations
the job file assigns it on the device the job names (under Slurm, `cuda:0` is the task's allocated GPU).

Every sub-run gets `multigpu.json` beside its runs.parquet: the GPU, the suite indices of its
configurations and the plan, which `merge_runs` needs to put the pieces back together.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import socket
import sys
import traceback
from pathlib import Path

from harness.config import RunConfig
from harness.devices import check_idle, open_device
from harness.errors import ConfigError, DeviceBusyError, HarnessError
from harness.multigpu._plan import SIDECAR, subset_config
from harness.runner import NullObserver, run_sustained
from harness.workers import JsonLinesChannel, protocol_channel, stop_on_signals, tolerate_pids

__all__ = ["SIDECAR", "main"]
EXIT_BUSY, EXIT_ERROR, EXIT_STOPPED, EXIT_CRASH, EXIT_INTERRUPTED = 6, 3, 4, 5, 130
_MEASURED = ("measurement_id", "config_index", "input_label", "kernel", "repeat", "status", "time_ns",
             "sm_clock_mhz", "inband_clock_mhz", "error")


class _Relay(NullObserver):
    """A RunObserver: writes the sidecar as soon as the run directory exists, then relays progress."""

    def __init__(self, channel: JsonLinesChannel, sidecar: dict, indices: tuple[int, ...]) -> None:
        self.channel, self.sidecar, self.indices = channel, sidecar, indices

    def on_run_start(self, result, *, total: int) -> None:
        (Path(result.path) / SIDECAR).write_text(json.dumps(self.sidecar, indent=1), encoding="utf-8")
        self.channel.send(event="started", run_dir=str(result.path), total=total)

    def on_measurement_end(self, row: dict) -> None:
        shown = {k: row.get(k) for k in _MEASURED}
        shown["config_index"] = self.indices[row["config_index"]]  # the suite's index, not the worker's
        self.channel.send(event="measured", row=shown)

    def on_message(self, text: str) -> None:
        self.channel.send(event="message", text=text)


def _open(device: str, factory: str | None):
    if factory:  # injected device (tests): "module:function" called with the device string
        module, _, attr = factory.partition(":")
        return getattr(importlib.import_module(module), attr)(device)
    return open_device(device)


def _measure(config, device, channel: JsonLinesChannel, *, indices: tuple[int, ...], sidecar: dict, command: str) -> int:
    n = len(config.inputs)
    note = (f"{sidecar['mode']} over {sidecar['workers']} GPU(s): this run is GPU {sidecar['gpu_id']}, "
            f"configurations {list(indices)} of the suite's {n}")
    sub = subset_config(config, indices, results_dir=Path(sidecar["results_dir"]), run_name=sidecar["run_name"],
                        notes=f"{note}; {config.notes}" if config.notes else note)
    result = run_sustained(sub, observer=_Relay(channel, {**sidecar, "config_indices": list(indices),
                                                          "suite_size": n}, indices),
                           device=device, command=command)
    channel.send(event="done", run_dir=str(result.path), status=result.status, measurements=len(result.measurements))
    return 0


def _guarded(channel: JsonLinesChannel, body) -> int:
    try:
        return body()
    except DeviceBusyError as exc:
        channel.send(event="busy", message=str(exc))
        return EXIT_BUSY
    except HarnessError as exc:
        channel.send(event="error", kind=type(exc).__name__, message=str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        channel.send(event="error", kind="interrupted", message="interrupted; finished measurements are kept")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a kernel's own bug: reported with its type, the traceback goes to stderr
        traceback.print_exc()
        channel.send(event="error", kind=type(exc).__name__, message=f"{type(exc).__name__}: {exc}")
        return EXIT_CRASH


def _run_spec(spec: dict, channel: JsonLinesChannel) -> int:
    def body() -> int:
        config = RunConfig.from_dict(spec["config"])
        device = _open(spec["device"], spec.get("device_factory"))
        # The orchestrator may hold a CUDA context from reading the GPUs' properties; any other process is busy.
        device = tolerate_pids(device, {spec["orchestrator_pid"]})
        busy = check_idle(device, allow_busy=config.allow_busy)
        ident = device.identity()  # `cuda:<PCI bus id>` already refused any GPU but the one assigned
        channel.send(event="ready", gpu_id=spec["gpu_id"], device_name=ident.name, pci_bus_id=ident.pci_bus_id,
                     busy=[dataclasses.asdict(p) for p in busy])
        order = channel.receive()
        if order.get("op") != "run" or not order.get("configs"):
            channel.send(event="done", run_dir=None, status="idle", measurements=0)
            return EXIT_STOPPED if order.get("op") != "run" else 0
        sidecar = {"gpu_id": spec["gpu_id"], "host": socket.gethostname(), "mode": spec["mode"],
                   "workers": order.get("workers", 1), "task": None, "tasks": None,
                   "results_dir": spec["results_dir"], "run_name": spec["run_name"]}
        return _measure(config, device, channel, indices=tuple(order["configs"]), sidecar=sidecar,
                        command=spec.get("command", ""))

    return _guarded(channel, body)


def _run_job(job_path: Path, task: int, channel: JsonLinesChannel) -> int:
    def body() -> int:
        try:
            job = json.loads(Path(job_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"Cannot read the job file {job_path}: {exc}") from None
        config, tasks = RunConfig.from_dict(job["config"]), job["tasks"]
        if not 0 <= task < len(tasks):
            raise ConfigError(f"Task {task} is outside the job's {len(tasks)} task(s) (0..{len(tasks) - 1}).")
        device = _open(config.device, job.get("device_factory"))
        ident = device.identity()
        gpu_id = ident.pci_bus_id or (f"{ident.kind}{ident.index}" if ident.index is not None else ident.kind)
        sidecar = {"gpu_id": gpu_id, "host": socket.gethostname(), "mode": job["mode"], "workers": len(tasks),
                   "task": task, "tasks": len(tasks), "results_dir": job["results_dir"], "run_name": f"task{task:04d}"}
        channel.send(event="ready", gpu_id=gpu_id, device_name=ident.name, pci_bus_id=ident.pci_bus_id, task=task)
        return _measure(config, device, channel, indices=tuple(tasks[task]), sidecar=sidecar,
                        command=job.get("command", ""))

    return _guarded(channel, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.multigpu._worker", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, help="worker file written by run_multi")
    parser.add_argument("--job", type=Path, help="job file written by `bench slurm`")
    parser.add_argument("--task", type=int, help="array task index (with --job; default $SLURM_ARRAY_TASK_ID)")
    args = parser.parse_args(argv)
    if (args.spec is None) == (args.job is None):
        parser.error("give exactly one of --spec and --job")
    # SIGTERM (scancel, a job's time limit, a plain `kill`) or SIGHUP ends the run like Ctrl-C: finished
    # measurements are kept and the run is marked incomplete, naming the signal.
    stop_on_signals()
    if args.spec is not None:
        spec = json.loads(args.spec.read_text(encoding="utf-8"))
        # The real stdout carries the protocol; fd 1 points at stderr, so a kernel's prints cannot corrupt it.
        return _run_spec(spec, protocol_channel(sys.stdin))
    task = args.task if args.task is not None else int(os.environ.get("SLURM_ARRAY_TASK_ID", "-1"))
    return _run_job(args.job, task, protocol_channel(None))


if __name__ == "__main__":
    sys.exit(main())
