"""One kernel's own process: `python -m harness.runner._child`, started by the run (`_isolation`), never by hand.

Protocol: JSON lines. The run -> child on stdin: `start` (the kernel spec, the run's working directory and
sys.path, device, protocol), then per configuration `config` (an InputSpec), `measure` per repeat,
`release`, and finally `stop` (EOF = stop, so a run that died stops its children). Child -> run on the
original stdout: `described`, `ready`, `timed`, `released` answer them; `stage`, `limit`/`unlimit` (a
bounded stretch of kernel code starts / ends: the run kills a child that outlasts one), `phase` and
`chunk` (live progress) come in between; `failed` carries a finished row's status and text, with
`exiting` when the child ends after it. fd 1 points at stderr, so the kernel's prints cannot corrupt it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from harness.config import protocol_from_dict
from harness.devices import open_device
from harness.errors import KernelError, KernelTimeout
from harness.inputs import InputSpec, make_inputs
from harness.kernels import default_registry, gate_columns, kernel_provenance
from harness.runner._burst import _Burst
from harness.runner._endings import Watchdog
from harness.runner._loop import _failure
from harness.runner._ready import (
    InputsGuard,
    KernelSide,
    _who,
    drain_device,
    exit_text,
    ready_kernel,
    time_kernel,
    where,
)
from harness.runner._run import _Sustained
from harness.workers import protocol_channel

__all__ = ["main"]


IMPORT_TIMEOUT_S = 300.0  # a kernel module's own import (a Triton compile at import time is not a launch)


def _load(start: dict, on_limit):
    """The kernel, imported here under a watchdog of its own; failures are the run's set-up paragraph."""
    import torch  # (the harness's own import is not the kernel's: paid before the limit starts)

    if start["protocol"].get("threads") is not None:  # as the run's own process (runner._setup.apply_threads)
        torch.set_num_threads(int(start["protocol"]["threads"]))

    watchdog = Watchdog(max(IMPORT_TIMEOUT_S, start["timeout_s"]), on_limit=on_limit)
    registry = default_registry()
    with watchdog.limit(what="importing it"):
        return registry.get(start["ref"], base_dir=Path(start["cwd"]))


def _describe(kernel, device_kind: str) -> dict:
    return {"name": kernel.name, "dtypes": sorted(kernel.dtypes), "devices": sorted(kernel.devices),
            "head_dims": None if kernel.head_dims is None else sorted(list(h) for h in kernel.head_dims),
            "description": kernel.description, "graph_safe": kernel.graph_safe, "causal_only": kernel.causal_only,
            "noncausal_only": kernel.noncausal_only, "output_dtype": kernel.output_dtype,
            "tolerance": kernel.tolerance, "source": kernel.source, "workloads": sorted(kernel.workloads),
            "extra": json.loads(json.dumps(kernel.extra, default=str)),
            "unavailable": kernel.unavailable_reason(device_kind)}


class _Served:
    """The kernel as this process serves it: its device, and per configuration (the run's index) its inputs and
    prepared state: the configurations of one comparison group are timed in turn, repeat by repeat."""

    def __init__(self, channel, start: dict, kernel, watchdog) -> None:
        self.ch, self.start, self.kernel, self.watchdog = channel, start, kernel, watchdog
        if start["measurer"] == "burst":
            self.measurer = _Burst(protocol_from_dict(start["protocol"]))
        else:
            self.measurer = _Sustained(protocol_from_dict(start["protocol"]))
        self.side = None
        self.stage = "prepare"
        self.spec = self.inputs = self.state = None
        self.configs: dict = {}  # index -> (spec, inputs, (launch, armed, guard))

    def _stage(self, stage: str) -> None:
        self.stage = stage
        self.ch.send(event="stage", stage=stage)

    def _open(self) -> None:
        ch = self.ch
        device = open_device(self.start["device"])
        self.side = KernelSide(
            device=device, protocol=self.measurer.proto, gate=self.start["gate"], launch=self.start["launch"],
            watchdog=self.watchdog, clock=time.monotonic_ns, sleep=time.sleep,
            on_phase=lambda phase: ch.send(event="phase", phase=phase),
            on_chunk=lambda c, chk: ch.send(event="chunk", chunk=dataclasses.asdict(c),
                                            check=dataclasses.asdict(chk) if chk is not None else None))
        self.measurer.open(self.side)

    def _failed(self, exc: BaseException, *, exiting: bool = False) -> None:
        if not isinstance(exc, Exception):  # the kernel's own sys.exit or BaseException: named, then this ends
            exc = KernelError(f"it {_exit_text(exc)}{_where(exc)}, which would have ended the run; its own process "
                              f"ended instead. It is not timed on this input; the run went on with the others")
        if self.side is not None:
            drain_device(self.side)
        status, error = _failure(self.kernel, self.spec, self.inputs, self.stage, exc)
        self.configs.pop(getattr(self, "index", None), None)
        self.state = None
        self.ch.send(event="failed", status=status, error=error, exiting=exiting, gate=getattr(exc, "gate", None))

    def config(self, op: dict) -> None:
        self.index = op.get("index")
        self.configs.pop(self.index, None)
        self.spec = InputSpec.from_dict(op["input"])
        self.stage = "its inputs"
        if self.side is None:
            self._open()
        self.inputs = make_inputs(self.spec, device=self.side.device.torch_device)
        guard = InputsGuard(self.spec, self.inputs)
        launch, armed, g, watch = ready_kernel(self.side, self.measurer, self.kernel, self.inputs, guard,
                                               on_stage=self._stage, who=_who(self.kernel, self.spec))
        self.state = (launch, armed, guard, watch)
        self.configs[self.index] = (self.spec, self.inputs, self.state)
        self.ch.send(event="ready", extra={**gate_columns(g), **self.measurer.row_extra(armed)})

    def measure(self, op: dict) -> None:
        self.index = op.get("index")
        self.spec, self.inputs, self.state = self.configs[self.index]
        self.stage = f"measure (repeat {op['repeat']})"
        launch, armed, guard, watch = self.state
        timing = time_kernel(self.side, self.measurer, self.kernel, launch, armed, self.inputs, guard,
                             idle_s=op["idle_s"], repeat=op["repeat"], watch=watch)
        self.ch.send(event="timed", timing=timing)

    def release(self, op: dict | None = None) -> None:
        index = (op or {}).get("index")
        if index is None:
            self.configs.clear()
        else:
            self.configs.pop(index, None)
        self.state = self.inputs = None
        if self.side is not None and self.side.device.kind in ("cuda", "rocm"):
            import torch

            torch.cuda.empty_cache()
        if op is not None:
            self.ch.send(event="released")


def _serve(channel, start: dict) -> int:
    def on_limit(what, timeout_s):
        if what is None:
            channel.send(event="unlimit")
        else:
            channel.send(event="limit", what=what, s=timeout_s)

    watchdog = Watchdog(start["timeout_s"], on_limit=on_limit)
    try:
        kernel = _load(start, on_limit)
    except KernelError as exc:  # load_target's paragraph (the module or file, and what failed), or a misfit
        text = str(exc) if not isinstance(exc, KernelTimeout) else f"Kernel spec {start['ref']!r}: {exc}."
        channel.send(event="failed", status="error", error=text, exiting=True)
        return 0
    except BaseException as exc:  # noqa: BLE001 - the module's own sys.exit, or anything else it raised
        what = _exit_text(exc) if not isinstance(exc, Exception) else f"raised {type(exc).__name__}: {exc}"
        channel.send(event="failed", status="error", exiting=True, error=(
            f"Kernel spec {start['ref']!r}: importing it {what}{_where(exc)}. Check that it imports on its own "
            f"(python -c 'import ...'); nothing was run."))
        return 0
    channel.send(event="described", kernel=_describe(kernel, start["device_kind"]),
                 provenance=kernel_provenance([kernel])[kernel.name])
    served = _Served(channel, start, kernel, watchdog)
    while True:
        op = channel.receive()
        name = op.get("op")
        if name == "stop":
            return 0
        try:
            getattr(served, name)(op)
        except Exception as exc:
            served._failed(exc)
        except BaseException as exc:  # noqa: BLE001
            served._failed(exc, exiting=True)
            return 0


def _exit_text(exc: BaseException) -> str:
    return exit_text(exc)


def _where(exc: BaseException) -> str:
    return where(exc)


def main() -> int:
    # The real stdout carries the protocol; fd 1 points at stderr, so a kernel's prints cannot corrupt it.
    channel = protocol_channel(sys.stdin)
    start = channel.receive()
    if start.get("op") != "start":
        return 2
    # The run's own imports resolve here as there: its sys.path first, its working directory.
    sys.path[:] = list(start["sys_path"]) + [p for p in sys.path if p not in start["sys_path"]]
    os.chdir(start["cwd"])
    try:
        return _serve(channel, start)
    except (BrokenPipeError, OSError):
        return 0  # the run is gone


if __name__ == "__main__":
    sys.exit(main())
