"""`bench trace`: the kernels of a sustained run, one warm launch each under ncu, pipe cycles stored beside it.

The run directory names what to profile: every kernel x input it timed (optionally filtered). For each,
a child process (`_child`) warms the kernel in back to back and brackets one launch with
cudaProfilerStart/Stop; ncu (`--clock-control none --profile-from-start off`) profiles that launch.
The rows go to the run's `traces` table (`_store`: a part per kernel x input, merged at once), where the report
finds them and puts GPM's in-run utilisation of the same run beside them. With `timeline=True`, Triton kernels also get a Proton
timeline (`<run>/traces/timeline-<kernel>-<input>.chrome_trace` and `.png`) from a child of their own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Callable, Sequence

from harness.errors import ConfigError, ResultsError
from harness.inputs import AttentionShape, InputSpec
from harness.profiling._child import CHILD_TAG, child_argv
from harness.profiling._errors import NothingProfiled, ProfilerError
from harness.profiling._ncu import (
    NCU_METRICS,
    check_ncu_output,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
    pipe_cycles,
)
from harness.profiling._store import write_trace_table
from harness.results import read_rows

__all__ = ["TraceConfig", "TraceResult", "TraceTarget", "gpm_medians", "run_targets", "trace_run"]

TIMED = ("ok", "unsettled")


@dataclass(frozen=True, kw_only=True)
class TraceConfig:
    run_dir: Path
    kernels: tuple[str, ...] = ()  # empty: every kernel the run timed
    kernel_regex: str | None = None  # keep only profiled launches whose CUDA kernel name matches
    warm_s: float = 8.0  # cuDNN kept slowing for 4-8 s on the H200 (h200-measurements.md)
    metrics: tuple[str, ...] = NCU_METRICS
    ncu: str | None = None
    device: str | None = None  # default: the run's device
    timeout_s: float = 900.0
    timeline: bool = False

    def __post_init__(self) -> None:
        if self.warm_s < 0 or self.timeout_s <= 0:
            raise ConfigError(f"warm_s must be >= 0 and timeout_s > 0 (got {self.warm_s}, {self.timeout_s}).")
        if self.kernel_regex is not None:
            try:
                re.compile(self.kernel_regex)
            except re.error as exc:
                raise ConfigError(f"--kernel-regex {self.kernel_regex!r} is not a valid regular expression: {exc}.") from None


@dataclass(frozen=True, kw_only=True)
class TraceTarget:
    kernel: str
    spec: object  # harness.inputs.InputSpec


@dataclass(kw_only=True)
class TraceResult:
    rows: list[dict] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)  # one part file per kernel x input, written as each finishes
    timelines: list[dict] = field(default_factory=list)  # per Triton kernel: trace, png, scope summary
    gpm: dict = field(default_factory=dict)  # gpm_medians of the run's own measurements, beside the counters


def _measurements(run_dir: Path) -> list[dict]:
    run_dir = Path(run_dir)
    if not (run_dir / "runs.parquet").is_file():
        raise ResultsError(f"{run_dir} is not a run directory (no runs.parquet): pass a directory `bench sustained` wrote.")
    return read_rows(run_dir, "measurements")


def _config_inputs(run_dir: Path) -> dict:
    """The run's input specs as it stored them in its config, by label: a capture's loader and every
    input's softmax scale live there, not in the measurement rows."""
    import pyarrow.parquet as pq

    specs = [InputSpec.from_dict(d) for info in pq.read_table(run_dir / "runs.parquet", columns=["config_json"]).to_pylist()
             for d in json.loads(info["config_json"] or "{}").get("inputs") or []]
    return {s.label: s for s in specs}


def run_targets(run_dir: Path, *, kernels: Sequence[str] = ()) -> list[TraceTarget]:
    """Every kernel x input the run timed, in run order, as (kernel, InputSpec) to profile again."""
    # Input by input (as the run went), kernels by name within an input: the same order every time.
    rows = sorted((r for r in _measurements(run_dir) if r.get("status") in TIMED),
                  key=lambda r: (r["config_index"], r["kernel"]))
    timed = list(dict.fromkeys(r["kernel"] for r in rows))
    unknown = [k for k in kernels if k not in timed]
    if unknown:
        raise ConfigError(f"Kernel(s) {unknown} were not timed in {run_dir}; it timed {timed or 'nothing'}. Pick from "
                          f"those with --kernel, or profile a run that timed them.")
    stored = _config_inputs(run_dir)
    out, seen = [], set()
    for r in rows:
        key = (r["kernel"], r["input_label"])
        if key in seen or (kernels and r["kernel"] not in kernels):
            continue
        seen.add(key)
        spec = stored.get(r["input_label"])
        if spec is None:  # not in the run's config (a merged run): rebuilt from the row, synthetic sources only
            shape = AttentionShape(batch=r["batch"], heads_q=r["heads_q"], heads_kv=r["heads_kv"], seq_len=r["seq_len"],
                                   head_dim_qk=r["head_dim_qk"], head_dim_v=r["head_dim_v"], causal=r["causal"])
            spec = InputSpec(shape=shape, dtype=r["dtype"], source=r["input_source"], seed=int(r["input_seed"] or 0),
                             name=r["input_label"] if r["input_label"] != r["input_source"] else None)
        out.append(TraceTarget(kernel=r["kernel"], spec=spec))
    if not out:
        raise NothingProfiled(f"{run_dir} timed no kernel (no measurement with status ok or unsettled): nothing to trace.")
    return out


def gpm_medians(measurements: Sequence[dict]) -> dict[tuple[str, str], dict[str, float | None]]:
    """Per (kernel, input label): medians over timed repeats of GPM's in-run utilisation and the clocks."""
    keys = ("tensor_util_pct", "sm_util_pct", "fp32_util_pct", "sm_clock_mhz", "inband_clock_mhz", "time_ns",
            "flops_per_launch", "tflops")
    acc: dict[tuple[str, str], dict[str, list[float]]] = {}
    for m in measurements:
        if m.get("status") not in TIMED:
            continue
        d = acc.setdefault((m["kernel"], m["input_label"]), {k: [] for k in keys})
        for k in keys:
            if m.get(k) is not None:
                d[k].append(float(m[k]))
    return {key: {k: (median(v) if v else None) for k, v in d.items()} for key, d in acc.items()}


def _child_info(stdout: str) -> dict:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(CHILD_TAG)), None)
    return json.loads(line[len(CHILD_TAG):]) if line else {}


def _env() -> dict:
    # The child imports harness from the same tree as the parent, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _run(runner, cmd: list[str], timeout_s: float, what: str):
    try:
        return runner(cmd, capture_output=True, text=True, timeout=timeout_s, env=_env())
    except subprocess.TimeoutExpired:
        raise ProfilerError(f"{what} did not finish within {timeout_s:.0f} s; raise --timeout-s or lower --warm-s.") from None
    except FileNotFoundError as exc:
        raise ProfilerError(f"{what} could not start: {exc}.") from None


def trace_run(config: TraceConfig, *, runner: Callable = subprocess.run, which: Callable = shutil.which,
              python: str = sys.executable, on_message: Callable[[str], None] = lambda text: None) -> TraceResult:
    """Profile every selected kernel x input of a run under ncu and store the pipe-cycle rows beside it."""
    ncu = find_ncu(config.ncu, which=which)  # before any work: a missing ncu costs nothing
    run_dir = Path(config.run_dir)
    targets = run_targets(run_dir, kernels=config.kernels)
    info = _run_info(run_dir)
    device = config.device or ("cpu" if info.get("device_kind") == "cpu" else f"cuda:{info.get('device_index') or 0}")
    rx = re.compile(config.kernel_regex) if config.kernel_regex else None
    result = TraceResult(gpm=gpm_medians(_measurements(run_dir)))
    stamp = datetime.now(timezone.utc).isoformat()
    for t in targets:
        on_message(f"ncu: {t.kernel} on {t.spec.label} (warm-in {config.warm_s:g} s, one profiled launch)")
        child = child_argv(mode="ncu", kernel=t.kernel, spec=t.spec, device=device, warm_s=config.warm_s, python=python)
        cmd = ncu_command(target=child, ncu=ncu, metrics=config.metrics)
        proc = _run(runner, cmd, config.timeout_s, f"ncu on {t.kernel}")
        child_out = _child_info(proc.stdout or "")
        if "error" in child_out:
            raise ProfilerError(f"The profiled child for {t.kernel} on {t.spec.label} failed: {child_out['error']}")
        check_ncu_output(stdout=proc.stdout or "", stderr=proc.stderr or "", returncode=proc.returncode)
        kernels = parse_ncu_csv(proc.stdout)
        chosen = [k for k in kernels if rx is None or rx.search(k.name)]
        if not chosen:
            names = "; ".join(dict.fromkeys(k.name for k in kernels))
            raise NothingProfiled(
                f"--kernel-regex {config.kernel_regex!r} matched none of the {len(kernels)} launch(es) ncu profiled for "
                f"{t.kernel} on {t.spec.label}; their names: {names}. Use a regex that matches one of them, or leave "
                f"--kernel-regex out to keep every launch.")
        rows = []
        for k in chosen:
            p = pipe_cycles(k)
            row = {f: v for f, v in asdict(p).items() if f not in ("launch_id", "name", "basis")}
            rows.append({
                **row, "run_id": run_dir.name, "trace_id": f"{t.kernel}|{t.spec.label}|{k.launch_id}", "tool": "ncu",
                "kernel": t.kernel, "input_label": t.spec.label, "launch_kernel": k.name, "launch_id": k.launch_id,
                "block": k.block, "grid": k.grid, "compute_capability": k.compute_capability, "cycles_basis": p.basis,
                "warm_s": child_out.get("warm_s"), "warm_launches": child_out.get("warm_launches"),
                "metrics_json": json.dumps({m: list(v) for m, v in k.metrics.items()}, sort_keys=True),
                "command_json": json.dumps(cmd), "created_at": stamp,
            })
        # Written per kernel x input: profiling is slow, so a later failure keeps what finished.
        result.paths.append(write_trace_table(run_dir, "traces", rows))
        result.rows += rows
        if config.timeline and t.kernel.startswith("triton"):
            try:
                result.timelines.append(_timeline(t, run_dir, device, config, runner, python, on_message))
            except ProfilerError as exc:
                # The pipe counters of this and later kernels are worth more than one missing picture.
                on_message(str(exc))
                result.timelines.append({"kernel": t.kernel, "input_label": t.spec.label, "error": str(exc)})
    return result


def _run_info(run_dir: Path) -> dict:
    import pyarrow.parquet as pq

    rows = pq.read_table(run_dir / "runs.parquet").to_pylist()
    return rows[0] if rows else {}


def _timeline(t: TraceTarget, run_dir: Path, device: str, config: TraceConfig, runner, python, on_message) -> dict:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{t.kernel}-{t.spec.label}")
    out = run_dir / "traces" / f"timeline-{safe}.chrome_trace"
    out.parent.mkdir(exist_ok=True)
    on_message(f"proton: {t.kernel} on {t.spec.label} -> {out.name}")
    argv = child_argv(mode="proton", kernel=t.kernel, spec=t.spec, device=device, warm_s=min(config.warm_s, 3.0),
                      python=python, out=str(out))
    proc = _run(runner, argv, config.timeout_s, f"Proton on {t.kernel}")
    info = _child_info(proc.stdout or "")
    if "error" in info or proc.returncode != 0:
        detail = info.get("error") or " | ".join((proc.stderr or proc.stdout or "").strip().splitlines()[-3:])
        raise ProfilerError(f"The Proton timeline of {t.kernel} on {t.spec.label} failed: {detail}")
    return {"kernel": t.kernel, "input_label": t.spec.label, **info}
