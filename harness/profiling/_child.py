"""The profiled process: one kernel on one input, warmed in, then one launch for the profiler.

`bench trace` starts this module under ncu (`python -m harness.profiling._child ncu ...`), or alone for
a Proton timeline (`... proton ...`). Measurement and orchestration never share a process: the parent
only builds commands and parses what comes back. The last stdout line starting with `TRACE-CHILD `
is a JSON summary for the parent.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Callable

from harness.devices import open_device
from harness.errors import HarnessError
from harness.inputs import InputSpec, check_finite, make_inputs
from harness.kernels import default_registry
from harness.profiling._proton import parse_proton_trace, record_proton_trace, scope_summary, timeline_png

__all__ = ["CHILD_TAG", "child_argv", "main", "spec_from_json", "spec_to_json", "warm_then_profile"]

CHILD_TAG = "TRACE-CHILD "


def spec_to_json(spec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True)


def spec_from_json(text: str):
    return InputSpec.from_dict(json.loads(text))


def child_argv(*, mode: str, kernel: str, spec, device: str, warm_s: float, python: str = sys.executable,
               out: str | None = None) -> list[str]:
    """The child's argument list (never a shell string: kernel names and paths pass untouched)."""
    argv = [python, "-m", "harness.profiling._child", mode, "--kernel", kernel, "--spec", spec_to_json(spec),
            "--device", device, "--warm-s", repr(float(warm_s))]
    return argv + (["--out", out] if out else [])


def warm_then_profile(launch: Callable[[], object], *, device, warm_s: float,
                      clock: Callable[[], float] = time.monotonic) -> dict:
    """Back-to-back launches for `warm_s`, then exactly one launch between cudaProfilerStart and Stop.

    ncu runs with --profile-from-start off, so the warm-in is not profiled and the clock at the profiled
    launch is the clock of sustained work (ncu then replays that one launch once per counter pass).
    """
    n = 0
    t0 = clock()
    while clock() - t0 < warm_s:
        for _ in range(10):
            launch()
        n += 10
        device.synchronize()
    device.synchronize()
    profiled = device.kind in ("cuda", "rocm")
    if profiled:
        import torch

        torch.cuda.profiler.start()
    launch()
    device.synchronize()
    if profiled:
        torch.cuda.profiler.stop()
    return {"warm_launches": n, "warm_s": clock() - t0, "profiled_range": profiled}


def _prepared(args):
    device = open_device(args.device)
    inputs = make_inputs(spec_from_json(args.spec), device=device.torch_device)
    check_finite(inputs)
    kernel = default_registry().get(args.kernel)
    # A factory that can build a Proton-instrumented variant says so with a `proton` keyword; others are
    # prepared as timed (their timeline is then empty, and the error says which scopes to add).
    wants = args.mode == "proton" and "proton" in inspect.signature(kernel.prepare).parameters
    return device, (kernel.prepare(inputs, proton=True) if wants else kernel.prepare(inputs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.profiling._child")
    ap.add_argument("mode", choices=("ncu", "proton"))
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--spec", required=True, help="the InputSpec as JSON (spec_to_json)")
    ap.add_argument("--device", required=True)  # child_argv passes the parent's
    ap.add_argument("--warm-s", type=float, required=True)  # child_argv passes TraceConfig's
    ap.add_argument("--out", default=None, help="proton: where the Chrome trace goes")
    args = ap.parse_args(argv)
    try:
        device, launch = _prepared(args)
        if args.mode == "ncu":
            info = warm_then_profile(launch, device=device, warm_s=args.warm_s)
        else:
            trace = record_proton_trace(launch, out=Path(args.out), warm_s=args.warm_s, synchronize=device.synchronize)
            events, unit = parse_proton_trace(trace)
            png = trace.with_suffix(".png")
            png.write_bytes(timeline_png(trace, title=args.kernel))
            info = {"trace": str(trace), "png": str(png), "unit": unit, "events": len(events),
                    "scopes": scope_summary(events)}
    except HarnessError as exc:
        print(CHILD_TAG + json.dumps({"error": str(exc)}), flush=True)
        return 2
    print(CHILD_TAG + json.dumps(info), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
