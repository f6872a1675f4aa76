"""One revision's measuring process: `python -m harness.commits._worker --spec JSON`.

The orchestrator (`compare_commits`) starts one worker per revision. A worker imports that revision's
kernel, then runs the ordinary `run_sustained` for it with one repeat per request: its observer blocks
before every measurement until the orchestrator says `go`, so the revisions' repeats interleave
(A B A B) while each worker keeps its prepared, gated kernel, its inputs and its own results run.

Protocol: JSON lines. Worker -> orchestrator on the original stdout (the kernel's own prints are sent
to stderr, so they cannot corrupt it): `{"event": "waiting", "repeat": r}` before each repeat,
`{"event": "measured", "row": {...}}` after it, `{"event": "message", "text": ...}` for the runner's
notes, then `{"event": "done", "run_dir": ..., "status": ...}` or `{"event": "error", "kind": ...,
"message": ...}`. Orchestrator -> worker on stdin: `{"op": "go"}` or `{"op": "stop"}` (EOF = stop).
With adaptive repeats (`until_ci` in the protocol) the worker asks before every repeat past the pilot:
`{"event": "more", "repeat": r}`, answered `{"op": "more"}` (take it) or `{"op": "finish"}` (the run ends
complete).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from harness.commits._loader import MissingKernelError, load_revision_kernel
from harness.config import RunConfig
from harness.devices import open_device
from harness.errors import HarnessError, RunStopped, StopRequested
from harness.kernels import KernelRegistry
from harness.runner import NullObserver, run_sustained
from harness.workers import JsonLinesChannel, protocol_channel, stop_on_signals, tolerate_children_of

__all__ = ["main", "spec_to_json", "MEASURED_FIELDS"]

# What the orchestrator shows live; the full rows are read back from each worker's results run.
MEASURED_FIELDS = ("measurement_id", "repeat", "status", "time_ns", "sm_clock_mhz", "inband_clock_mhz",
                   "cycles_per_launch", "settled_after_s", "power_w")


class _Stopped(StopRequested):
    """The orchestrator asked this worker to stop before its next repeat (interrupted, or another revision
    failed). A KeyboardInterrupt, so the runner marks the run `incomplete` with the orchestrator's reason:
    the run was stopped from outside, it did not fail."""


class _Relay(NullObserver):
    """A RunObserver that turns the runner's measurement loop into one repeat per `go`."""

    def __init__(self, channel: JsonLinesChannel) -> None:
        self.channel = channel
        self.messages: list[str] = []

    def on_run_start(self, result, *, total: int) -> None:
        self.channel.send(event="started", run_dir=str(result.path), total=total)

    def on_measurement_start(self, *, kernel: str, input_label: str, repeat: int) -> None:
        self.channel.send(event="waiting", repeat=repeat)
        order = self.channel.receive()
        if order.get("op") != "go":
            raise _Stopped(f"{order.get('reason') or 'stopped by the orchestrator'} (before repeat {repeat})")

    def on_measurement_end(self, row: dict) -> None:
        self.channel.send(event="measured", row={k: row.get(k) for k in MEASURED_FIELDS})

    def on_message(self, text: str) -> None:
        self.messages.append(text)
        self.channel.send(event="message", text=text)

    def more_repeats(self, repeat: int, rows: list) -> bool:
        """Past the pilot: the orchestrator decides from every revision's repeats so far."""
        self.channel.send(event="more", repeat=repeat)
        order = self.channel.receive()
        op = order.get("op")
        if op not in ("more", "finish"):
            raise _Stopped(f"{order.get('reason') or 'stopped by the orchestrator'} (after repeat {repeat - 1})")
        return op == "more"


def spec_to_json(*, tree: str, revision_text: str, kernel: str, run: dict, command: str) -> str:
    """The worker's `--spec`: its revision's tree and kernel, and the RunConfig it runs (`RunConfig.to_dict`)."""
    return json.dumps(dict(tree=tree, revision_text=revision_text, kernel=kernel, run=run, command=command))


def _run(spec: dict, channel: JsonLinesChannel) -> int:
    try:
        kernel = load_revision_kernel(Path(spec["tree"]), spec["kernel"], revision=spec["revision_text"])
        registry = KernelRegistry()
        registry.add(kernel)
        config = RunConfig.from_dict({**spec["run"], "kernels": [kernel.name]})  # by the name it registered
        # The other workers of this comparison hold a context on the GPU but sit blocked on their pipe while
        # this one measures; any other process still makes the run refuse the GPU.
        device = tolerate_children_of(open_device(config.device), os.getppid())
        relay = _Relay(channel)
        more = relay.more_repeats if config.protocol.until_ci is not None else None
        result = run_sustained(config, observer=relay, registry=registry, device=device, command=spec["command"],
                               more_repeats=more)
    except _Stopped as exc:
        channel.send(event="error", kind="stopped", message=str(exc))
        return 4
    except KeyboardInterrupt as exc:  # SIGINT from the orchestrator, or SIGTERM (below); the run is marked incomplete
        name = exc.signal_name if isinstance(exc, RunStopped) else "SIGINT"
        channel.send(event="error", kind="interrupted", message=f"stopped by {name}; its run is marked incomplete")
        return 128 + (exc.signum if isinstance(exc, RunStopped) else signal.SIGINT)
    except HarnessError as exc:
        kind = "missing_kernel" if isinstance(exc, MissingKernelError) else type(exc).__name__
        channel.send(event="error", kind=kind, message=str(exc))
        return 3
    except Exception as exc:  # a kernel's own bug: reported with its type, the traceback is on stderr
        traceback.print_exc()
        channel.send(event="error", kind=type(exc).__name__, message=f"{type(exc).__name__}: {exc}")
        return 5
    channel.send(event="done", run_dir=str(result.path), status=result.status, kernel=kernel.name,
                 kernel_source=kernel.source, messages=relay.messages)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commits._worker", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", required=True, help="JSON from spec_to_json")
    args = parser.parse_args(argv)
    # A kill (or the orchestrator passing on its SIGTERM / SIGHUP) ends the run as `incomplete`, the signal named.
    stop_on_signals()
    # The real stdout carries the protocol; fd 1 points at stderr, so a kernel's prints cannot corrupt it.
    return _run(json.loads(args.spec), protocol_channel(sys.stdin))


if __name__ == "__main__":
    sys.exit(main())
