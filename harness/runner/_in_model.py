"""In-model timing (`bench in-model`): a model's forward pass, with each kernel in every attention layer, timed
under the sustained protocol by the one run loop.

A forward is a launch closure like any kernel's. Each kernel named is wrapped into a kernel of the same name whose
prepare() binds it into every layer of the loaded model (`harness.capture.bind_forward`: prepared once per layer,
gated on every layer's own q, k, v, refused whole when any layer fails) and returns one forward pass (or decode
step). The run loop then does for it what it does for every kernel: idle, warm-in until settled, the timed window
(a CUDA graph of forwards where the forward captures, else a loop: the launch note says which and why), rotated
repeats, telemetry, the in-band clock, every ending. The loop's own gate is off for these wrapped kernels (a
forward's output is not an attention output; every layer was gated in prepare() instead) and its input tensors are
the first layer's q, k, v, which nothing reads.

After each window, still under load, the attention pass (`pass_s` seconds, at least `MIN_PAIRS` pairs) times
forwards in pairs, one plain and one with device marks around every attention call, order alternating, as a loop
of launches: per layer the kernel's time, the copies, what the marks cost (reported beside, not subtracted), and
the pass's own clocks (samples phase "attention-pass", the probe's readings in its span). Its figures go to the
run's `in_model` table (results schema v8) beside the window's measurements row.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis import attention_figures, chunk_clock, median, samples_in
from harness.capture import bind_forward, open_forward, resolve_model
from harness.config import RunConfig, RunSettings, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionInputs, AttentionShape, InputSpec, register_source
from harness.kernels import KernelRegistry, default_registry, gate_columns
from harness.results import RunWriter, new_run_id
from harness.runner._loop import RunResult, run_loop
from harness.runner._run import _rows_of, _sample_row, _Sustained, _time_one
from harness.runner._setup import run_info_row

__all__ = ["InModelConfig", "InModelResult", "run_in_model", "MIN_PAIRS"]

MIN_PAIRS = 3  # plain + marked pairs an attention pass takes at least, however long a forward is
_SOURCE = "in-model"  # the input source of the wrapped kernels' (unread) input tensors


@dataclass(frozen=True, kw_only=True)
class InModelConfig(RunSettings):
    """One `bench in-model` run: which model over which text, which kernels against which reference, how timed
    (built by harness.suite.in_model_job, which decides every default).

    `seq_len` S (the KV cache's length when decoding); `seq_len_q` N < S: each call is a decode step of N tokens
    (None: the prefill of B = `windows` windows x S tokens). `dtype` None: bf16 on a GPU, fp32 on the CPU (kernels
    get bf16 q, k, v either way). `attention_pass_s`: the attention pass after each window."""

    model: object  # a registered name, a local path, or a ModelSpec
    kernels: tuple[str, ...]
    reference: str
    text: str
    seq_len: int
    windows: int
    attention_pass_s: float
    weights: Path | None = None
    seq_len_q: int | None = None
    dtype: str | None = None
    random_weights: bool = False
    seed: int = 0
    protocol: SustainedProtocol = field(default_factory=SustainedProtocol)
    run_name: str | None = None
    # the isolated run its comparison reads, recorded in the runs row's config so that `bench report` of this run
    # finds it again (set by run_in_model_job, not by the user): its directory and the input compared on
    isolated_run: Path | None = None
    isolated_input: str | None = None

    def __post_init__(self) -> None:
        if not self.kernels:
            raise ConfigError("No kernels given: name at least two with -k (the reference and one to compare).")
        if len(set(self.kernels)) != len(self.kernels):
            raise ConfigError(f"Kernel list {list(self.kernels)} names a kernel twice.")
        if self.reference not in self.kernels:
            raise ConfigError(f"--reference {self.reference!r} is not among the kernels timed ({', '.join(self.kernels)}); "
                              f"every ratio is against it, so it is timed in the model too. Add it with -k.")
        for flag, value in (("--seq-len", self.seq_len), ("--windows", self.windows)):
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{flag} {value!r}: must be a positive integer.")
        if not self.attention_pass_s > 0:
            raise ConfigError(f"--attention-pass-s {self.attention_pass_s!r}: must be above 0.")
        if self.protocol.l2 != "warm":
            raise ConfigError("--l2 cold rotates a kernel's inputs through copies; a model's forward has its own memory "
                              "traffic and no input copies to rotate. Drop --l2 for in-model timing.")
        super().__post_init__()


@dataclass(kw_only=True)
class InModelResult:
    run: RunResult
    rows: list[dict]  # the in_model table's rows, in measurement order
    workload: str  # the input label: model, phase, B, S (RANDOM-WEIGHTS)
    random_weights: bool
    reference: str  # the reference kernel's name, as its rows name it


def _early_checks(config: InModelConfig, kernels, device_kind: str) -> None:
    """Every kernel against the model's attention shape, before the model is loaded."""
    spec = resolve_model(config.model)
    s_q = config.seq_len if config.seq_len_q is None else config.seq_len_q
    shape = AttentionShape(batch=config.windows, heads_q=spec.heads_q, heads_kv=spec.heads_kv, seq_len=s_q,
                           seq_len_kv=config.seq_len, head_dim_qk=spec.head_dim_qk, head_dim_v=spec.head_dim_v,
                           causal=True)
    for k in kernels:
        k.check_supports(dtype="bfloat16", head_dim_qk=spec.head_dim_qk, head_dim_v=spec.head_dim_v, causal=True,
                         device_kind=device_kind, shape=shape)


def _wrapped(forward, inner, *, gate: bool):
    """`inner` as a kernel whose prepare() binds it into every layer and returns one forward."""

    def prepare(inputs):
        bound = bind_forward(forward, inner, gate=gate)

        def launch():
            return bound.run()

        launch.bound = bound
        return launch

    extra = {**inner.extra, "reads_inputs_at_launch": True, "in_model": forward.label()}
    return dataclasses.replace(inner, prepare=prepare, extra=extra, description=f"{inner.name} in every layer of "
                               f"{forward.label()}")


def run_in_model(config: InModelConfig, *, command: str = "", registry=None, observer=None, device=None,
                 sampler=None, clock=time.monotonic_ns, sleep=time.sleep, progress=None) -> InModelResult:
    """Load the model, run its reference pass, then time its forward with each kernel in every layer (module doc),
    written as one run under `config.results_dir`. `progress(text)` hears the loading steps; the other keywords
    are the run loop's hooks (`RunHooks`)."""
    run_id = new_run_id(config.run_name)
    registry = registry or default_registry()
    inner = [registry.get(name) for name in config.kernels]
    _early_checks(config, inner, device.kind if device is not None else str(config.device).partition(":")[0])
    forward = open_forward(model=config.model, text=config.text, weights=config.weights, seq_len=config.seq_len,
                           seq_len_q=config.seq_len_q, windows=config.windows, device=config.device,
                           dtype=config.dtype, random_weights=config.random_weights, seed=config.seed,
                           progress=progress)
    try:
        label = forward.label()
        first = forward.layers[0]

        def unread_inputs(spec, dev):
            q, k, v, scale = forward.calibration[first]
            return AttentionInputs(q=q.clone(), k=k.clone(), v=v.clone(), shape=spec.shape, dtype=spec.dtype,
                                   scale=scale, source=spec.source, seed=spec.seed)

        register_source(_SOURCE, unread_inputs)
        spec = InputSpec(shape=forward.shape(), dtype="bfloat16", source=f"{_SOURCE}:{label}", name=label,
                         scale=forward.calibration[first][3])
        wrapped = KernelRegistry()
        for k in inner:
            wrapped.add(_wrapped(forward, k, gate=config.gate))
        notes = [f"in-model: {label}, every attention layer's kernel swapped, every kernel in this process (the model "
                 f"lives here); " + ("the run loop's own gate is off for the wrapped kernels (a forward returns "
                                     "logits) and every layer was gated in their prepare() instead" if config.gate
                                     else "--no-gate: no layer was gated")]
        if forward.random_weights:
            notes.insert(0, "RANDOM WEIGHTS: the model was built from its published config with random weights; an "
                            "architecture check, never a model's figures (data moves the clock)")
        # by the kernels' own names: a plain function named `module:function` is registered as `function`
        run_config = RunConfig(**{**config.settings(), "gate": False}, kernels=tuple(k.name for k in inner),
                               inputs=(spec,), protocol=config.protocol, run_name=config.run_name,
                               notes="; ".join(notes), isolation="auto")
        measurer = _InModel(config.protocol, pass_s=config.attention_pass_s, forward=forward)

        def info_row(setup):
            row = run_info_row(run_config, setup, command=command, protocol=config.protocol)
            row["config_json"] = json.dumps({"kind": "in_model", **_described(config, forward),
                                             "run": json.loads(row["config_json"])}, sort_keys=True, default=str)
            return row

        result = run_loop(run_config, protocol=config.protocol, measurer=measurer,
                          open_writer=lambda setup: RunWriter(config.results_dir, run_id), info_row=info_row,
                          observer=observer, registry=wrapped, device=device, sampler=sampler, clock=clock,
                          sleep=sleep)
    finally:
        forward.close()
    reference = inner[config.kernels.index(config.reference)].name
    return InModelResult(run=result, rows=measurer.written, workload=label, random_weights=forward.random_weights,
                         reference=reference)


def _described(config: InModelConfig, forward) -> dict:
    """What the runs row's config_json says about the model run (beside the run loop's own config)."""
    s = forward.shape()
    return {"model": forward.spec.name, "phase": forward.phase, "workload": forward.label(),
            "random_weights": forward.random_weights, "weights": forward.weights, "text": forward.text,
            "reference": config.reference, "kernels": list(config.kernels), "model_dtype": forward.dtype,
            "kernel_dtype": "bfloat16", "layers": len(forward.layers), "windows": config.windows,
            "seq_len_q": s.seq_len, "seq_len_kv": s.seq_len_kv, "heads_q": s.heads_q, "heads_kv": s.heads_kv,
            "head_dim_qk": s.head_dim_qk, "head_dim_v": s.head_dim_v, "attention_pass_s": config.attention_pass_s,
            "gate": "every layer, in prepare()" if config.gate else "off (--no-gate)", "seed": config.seed,
            "isolated_run": None if config.isolated_run is None else {
                "run_id": Path(config.isolated_run).name, "path": str(config.isolated_run),
                "input": config.isolated_input}}


@dataclass(frozen=True)
class _Armed:
    launcher: object
    bound: object


class _InModel(_Sustained):
    """The sustained protocol's measurer, with the attention pass after each window and the in_model rows."""

    def __init__(self, proto, *, pass_s: float, forward) -> None:
        super().__init__(proto)
        self.pass_s = pass_s
        self.forward = forward
        self.written: list[dict] = []

    def arm(self, side, kernel, launch):
        return _Armed(launcher=super().arm(side, kernel, launch), bound=launch.bound)

    def row_extra(self, armed) -> dict:
        gates = [g for g in armed.bound.gates.values() if g is not None]
        # The measurements row keeps its layers' worst gate figures; every layer's are in the in_model row.
        worst = max(gates, key=lambda g: (g.max_ratio if g.max_ratio is not None else g.max_abs_diff), default=None)
        cols = gate_columns(worst)
        if worst is not None:
            cols["gate_reference"] = f"{worst.reference} (the worst of {len(gates)} layers)"
        return {**super().row_extra(armed.launcher), **cols, "flops_per_launch": None, "bytes_per_launch": None}

    def time(self, side, kernel, launch, armed, *, idle_s: float, inputs) -> dict:
        timing = _time_one(side, self.probe, launch, armed.launcher, idle=idle_s)
        timing["pass"] = _attention_pass(side, self.probe, armed.bound, pass_s=self.pass_s)
        timing["gates"] = {str(layer): gate_columns(g) for layer, g in armed.bound.gates.items()}
        timing["kernel"] = kernel.name
        return timing

    def rows(self, s, timing: dict, *, inputs, mid: str):
        # One launch is a forward: throughput from one layer's attention FLOPs would be a wrong figure.
        row, chunks, samples, probes = _rows_of(s, timing, inputs=inputs, mid=mid, attention_flops=False)
        p = timing["pass"]
        t0, t1 = p["t_start_ns"], p["t_end_ns"]
        pass_samples = s.thread.samples_between(t0, t1 + 1)
        readings = [r for r in p["probes"] if t0 <= r["t_ns"] <= t1]
        powers = [x.power_w for x in samples_in(pass_samples, t0, t1) if x.error is None and x.power_w is not None]
        figures = attention_figures(plain_ns=p["plain_ns"], marked_ns=p["marked_ns"], calls=p["calls"],
                                    layers=self.forward.layers)
        gates = [timing["gates"][str(layer)] for layer in self.forward.layers]
        fwd, shape = self.forward, self.forward.shape()
        im = {
            "measurement_id": mid, "kernel": timing["kernel"], "model": fwd.spec.name,
            "phase": fwd.phase, "random_weights": fwd.random_weights, "weights": fwd.weights, "batch": shape.batch,
            "seq_len_q": shape.seq_len, "seq_len_kv": shape.seq_len_kv, "layers": len(fwd.layers),
            "pass_start_ns": t0, "pass_end_ns": t1, **figures,
            "pass_sm_clock_mhz": chunk_clock(pass_samples, t0, t1),
            "pass_inband_clock_mhz": median([r["clock_mhz"] for r in readings]),
            "pass_power_w": sum(powers) / len(powers) if powers else None, "pass_probes": len(readings),
            "layer_gate_max_abs_diff": [g["gate_max_abs_diff"] for g in gates],
            "layer_gate_snr_db": [g["gate_snr_db"] for g in gates],
            "layer_gate_max_ratio": [g["gate_max_ratio"] for g in gates],
        }
        s.writer.append_rows("in_model", [im])  # before its measurements row, as a measurement's samples are
        self.written.append(im)
        samples = samples + [_sample_row(x, "attention-pass", mid) for x in pass_samples]
        probes = probes + [{"measurement_id": mid, **r} for r in readings]
        return row, chunks, samples, probes


def _attention_pass(side, probe, bound, *, pass_s: float) -> dict:
    """Forwards in pairs, one plain and one marked (order alternating), as a loop of launches, for `pass_s` seconds
    and at least MIN_PAIRS pairs; each forward bounded by the watchdog. Plain data (module doc)."""
    device, clock = side.device, side.clock
    plain, marked, calls = [], [], []
    side.on_phase("attention pass")
    if probe is not None:
        probe.start()
    t0 = clock()
    try:
        pair = 0
        while pair < MIN_PAIRS or (clock() - t0) * 1e-9 < pass_s:
            for what in (("plain", "marked") if pair % 2 == 0 else ("marked", "plain")):
                with side.watchdog.limit(what=f"a {what} forward of the attention pass"):
                    if what == "plain":
                        plain.append(bound.timed(device))
                    else:
                        m = bound.marked(device)
                        marked.append(m.total_ns)
                        calls.append([list(c) for c in m.calls])
            pair += 1
    finally:
        readings = probe.stop() if probe is not None else []
    t1 = clock()
    return {"t_start_ns": t0, "t_end_ns": t1, "plain_ns": plain, "marked_ns": marked, "calls": calls,
            "probes": [dataclasses.asdict(r) for r in readings]}
