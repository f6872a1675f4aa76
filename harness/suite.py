"""The suite layer: the one place for the defaults that depend on the device and the workload.

Every command that runs kernels on inputs (`bench sustained`, `burst`, `error`, `repro`, `commits`,
`nightly`, `slurm`, the multi-GPU workers, the pytest plugin) builds its frozen config here, so a
default kernel list, a default sequence length or a protocol override means the same thing everywhere.
Values are checked with the name of the option a user typed, before anything is allocated or written.

>>> from harness.suite import default_kernels, default_seq_len
>>> default_kernels("cpu"), default_kernels("cuda:1")
(('sdpa-cpu',), ('sdpa-cudnn', 'sdpa-flash'))
>>> default_seq_len("cpu", model=False), default_seq_len("cuda:0", model=True)
(1024, 8192)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.config import RESULTS_ROOT, RunConfig, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec, check_source

__all__ = [
    "CAPTURES_ROOT",
    "SEED_LIMIT",
    "check_seed",
    "RESULTS_ROOT",
    "NIGHTLY_RESULTS",
    "NIGHTLY_FAIL_ON_SLOWDOWN",
    "COMMITS_INPUT",
    "DEFAULT_INPUTS",
    "BURST_INPUTS",
    "DEFAULT_CONTROLS",
    "DEFAULT_TEXT",
    "ShapeArgs",
    "MLA_DIMS",
    "CaptureArgs",
    "device_kind",
    "default_kernels",
    "kernel_specs",
    "workload_kernels",
    "machine_device",
    "default_seq_len",
    "attention_shape",
    "attention_shapes",
    "synthetic_specs",
    "captured_specs",
    "input_specs",
    "sustained_protocol",
    "sustained_config",
    "nightly_shape",
    "nightly_shape_args",
    "HistorySettings",
    "history_settings",
    "HISTORY_CONTROL",
    "HISTORY_CONTROL_GEMM",
    "HISTORY_RECENT",
    "FLOOR_KERNELS",
    "model_error_config",
    "model_error_kernels",
    "verdict_rule",
    "until_ci",
    "nightly_until_ci",
    "MAX_REPEATS",
    "ADAPTIVE_PILOT",
    "COMMITS_IDLE_S",
    "UNRESOLVED_DEFAULT",
    "commits_protocol",
    "unresolved_policy",
]

# `--until-ci`: the cap on repeats, and the pilot whose spread (pilot - 1 df) sets how many: a pilot of 3
# (t 4.30) asks 2.4x the pairs a pilot of 5 (t 2.78) does (H200 fixture 20261203-131342-commits-*).
MAX_REPEATS = 10
ADAPTIVE_PILOT = 5

DEFAULT_INPUTS = ("gaussian:0.1", "gaussian:1")
# A burst is the figure other tools print; one control is enough to set it beside a sustained run.
BURST_INPUTS = ("gaussian:0.1",)
DEFAULT_CONTROLS = ("gaussian:0.1",)
DEFAULT_TEXT = "pydoc"
# Where captures are read and written unless told otherwise (runs: RESULTS_ROOT, from harness.config).
CAPTURES_ROOT = Path("captures")

# The bundled SDPA back-ends of each device kind; ROCm's PyTorch has no cuDNN.
_KERNELS = {"cpu": ("sdpa-cpu",), "rocm": ("sdpa-flash", "sdpa-efficient"), "cuda": ("sdpa-cudnn", "sdpa-flash")}
# S: long enough on a GPU for one launch to take milliseconds (the sustained clock needs seconds of load,
# not microseconds); on the CPU short enough that the fp64 gate reference stays in seconds.
_SEQ_LEN = {("gpu", False): 16384, ("gpu", True): 8192, ("cpu", False): 1024, ("cpu", True): 1024}
# The nightly job's synthetic suite: grouped-query attention (32 query heads over 8 KV heads), the layout
# of the 7-8B models it stands in for.
_NIGHTLY_HEADS = (32, 8)


def device_kind(device: str, *, flag: str = "--device") -> str:
    """`cpu`, `cuda` or `rocm` for a device string (`cuda:0`, `rocm:0000:1b:00.0`, `cpu`); `flag` names it."""
    kind = str(device).partition(":")[0]
    if kind not in _KERNELS:
        raise ConfigError(f"{flag} {device!r}: use cpu, cuda:N, rocm:N, or cuda:/rocm:<PCI bus id>.")
    return kind


def machine_device() -> str:
    """This machine's own device: cuda:0 where PyTorch sees a CUDA GPU, rocm:0 on its ROCm build, else cpu."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    return "rocm:0" if getattr(torch.version, "hip", None) else "cuda:0"


def default_kernels(device: str, shapes: Sequence[AttentionShape] = ()) -> tuple[str, ...]:
    """The kernels a run times when none is named: the device's own SDPA back-ends for dense self-attention, and for a
    serving workload (decode, paged, windowed, varlen: `AttentionShape.features`) the bundled kernels that compute it
    (`workload_kernels`)."""
    return workload_kernels(device, shapes)[0]


# The bundled kernels that compute every serving workload, by device kind; the Triton ones only where they run.
_WORKLOAD_KERNELS = {"cpu": ("sdpa-kvcache",), "rocm": ("sdpa-kvcache",), "cuda": ("sdpa-kvcache",)}
_SPLITKV_MAX_QUERIES = 16  # kernels_under_test.decode.SPLITKV_MAX_QUERIES, read without importing the kernels


def _triton_runs_on(kind: str) -> bool:
    """Triton is installed and runs on this kind of device (on the CPU only in its interpreter)."""
    import importlib.util
    import os

    if importlib.util.find_spec("triton") is None:
        return False
    return kind == "cuda" or (kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")


def _pow2(n: int) -> bool:
    return n >= 16 and n & (n - 1) == 0


def workload_kernels(device: str, shapes: Sequence[AttentionShape] = ()) -> tuple[tuple[str, ...], str]:
    """(the default kernels, why those): a run of dense self-attention gets the device's SDPA back-ends; one whose
    shapes ask for more (S_q < S_kv, a page table, a window, lengths) the bundled kernels that compute all of them:
    sdpa-kvcache, triton-splitkv where it runs (Triton there; at most 16 queries a sequence; power-of-two head dims),
    triton-mla for MLA's latent cache (`--mla`).

    >>> from harness.inputs import AttentionShape
    >>> workload_kernels("rocm:0", [AttentionShape(batch=2, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=64,
    ...                                            head_dim_qk=64, page_size=16)])
    (('sdpa-kvcache',), 'the bundled kernels that compute a decode, paged workload on rocm')
    """
    kind = device_kind(device)
    features = sorted(set().union(*(s.features() for s in shapes))) if shapes else []
    if not features:
        return _KERNELS[kind], f"the SDPA back-ends of {kind}"
    picked = list(_WORKLOAD_KERNELS[kind])
    if _triton_runs_on(kind) and all(s.seq_len <= _SPLITKV_MAX_QUERIES for s in shapes):
        if all(s.latent_kv and _pow2(s.head_dim_v) and _pow2(s.head_dim_qk - s.head_dim_v) and s.heads_kv == 1
               for s in shapes):
            picked.insert(0, "triton-mla")
        elif not any(s.latent_kv for s in shapes) and all(_pow2(s.head_dim_qk) and _pow2(s.head_dim_v) for s in shapes):
            picked.append("triton-splitkv")
    return tuple(picked), f"the bundled kernels that compute a {', '.join(features)} workload on {kind}"


def kernel_specs(names: Sequence[str], *, device: str, layout: str | None = None, gqa: str | None = None,
                 shapes: Sequence[AttentionShape] = ()) -> tuple[str, ...]:
    """The kernels a run names (or the defaults for the device and the workload of `shapes`), with `--layout` /
    `--gqa` applied to the plain callables among them (`module:function`, `file.py:function`)."""
    from harness.kernels import apply_options

    return apply_options(tuple(names) or default_kernels(device, shapes), layout=layout, gqa=gqa)


def default_seq_len(device: str, *, model: bool) -> int:
    """S when none is given: 16384 on a GPU (8192 for captured models), 1024 on the CPU."""
    return _SEQ_LEN[("cpu" if device_kind(device) == "cpu" else "gpu", bool(model))]


def nightly_shape(device: str, *, seq_len: int | None = None, heads=None, heads_kv=None) -> AttentionShape:
    """The nightly job's synthetic shape on this device: 32/8 heads unless --heads / --heads-kv say otherwise
    (--heads alone: Hkv = Hq, as in `bench sustained`)."""
    hq, hkv = _NIGHTLY_HEADS
    if heads is not None and heads_kv is None:
        hkv = None
    return attention_shape(ShapeArgs(heads=hq if heads is None else heads, heads_kv=hkv if heads_kv is None else heads_kv,
                                     seq_len=seq_len), device=device)


def nightly_shape_args(args: "ShapeArgs") -> "ShapeArgs":
    """The shape options of `bench nightly` on synthetic inputs: `bench sustained`'s, with the nightly suite's 32 / 8
    heads where neither --heads nor --heads-kv (nor --mla) was given."""
    if args.heads is None and args.heads_kv is None and not args.mla:
        return dataclasses.replace(args, heads=_NIGHTLY_HEADS[0], heads_kv=_NIGHTLY_HEADS[1])
    return args


# The history's defaults (`bench history`, `bench nightly --history`): the verdict against the last N comparable
# nights (harness.history.NIGHTS, at its LEVEL), the change points of the last HISTORY_RECENT nights in a PR comment,
# and the control timed every night beside the suite: the bf16 GEMM at its power-capped peak (random operands),
# whose code never changes with the repository's; on the CPU (a dry run) at M = N = K = 256, which takes
# milliseconds there, not the GPU's 8192 (harness.profiling.peak_registry's default).
HISTORY_RECENT = 30
HISTORY_CONTROL = {"cuda": "peak-gemm-bf16-random", "rocm": "peak-gemm-bf16-random", "cpu": "peak-gemm-bf16-random"}
HISTORY_CONTROL_GEMM = {"cpu": 256}


@dataclass(frozen=True, kw_only=True)
class HistorySettings:
    """How a history is judged: the threshold (and where it came from), the comparable nights, the level."""

    threshold: float
    threshold_source: str
    nights: int
    level: float


def history_settings(fail_on_slowdown: str | None, *, nights: int | None = None) -> HistorySettings:
    """The history's verdict settings: --fail-on-slowdown (default nightly's 2 %) and --history-nights (default
    harness.history.NIGHTS, at least harness.history.MIN_NIGHTS)."""
    from harness.history import LEVEL, MIN_NIGHTS, NIGHTS

    rule, threshold = verdict_rule(fail_on_slowdown, default=NIGHTLY_FAIL_ON_SLOWDOWN)
    if nights is not None and nights < MIN_NIGHTS:
        raise ConfigError(f"--history-nights {nights}: a prediction interval needs at least {MIN_NIGHTS} comparable "
                          f"nights (two degrees of freedom). Give {MIN_NIGHTS} or more (default {NIGHTS}).")
    return HistorySettings(threshold=threshold, threshold_source=rule.threshold_source, nights=nights or NIGHTS,
                           level=LEVEL)


# `bench nightly`'s own defaults: where its outputs go, and its gate (a nightly job judges; compare and commits
# judge only when asked).
NIGHTLY_RESULTS = Path("out/nightly")
NIGHTLY_FAIL_ON_SLOWDOWN = "2%"
# One input per `bench commits` run: every revision is timed on it, interleaved.
COMMITS_INPUT = "gaussian:0.1"
# `bench commits` times the revisions back to back, their order alternating: no idle between them, so every window
# starts from the same hot card (an idle gap before a window put cuDNN into its 1 % faster state on the H200,
# benchmarks/h200/cudnn_states.py) and ten pairs fit in about two minutes of GPU time.
COMMITS_IDLE_S = 0.0
# What a gate does with a row it could not judge (`unresolved`, `too few repeats`): fail (exit 6) or pass.
UNRESOLVED_DEFAULT = "fail"


def unresolved_policy(text: str | None, *, flag: str = "--unresolved") -> str:
    """`--unresolved fail|pass` as typed, or the default (fail: no gate passes what it could not judge)."""
    from harness.analysis import UNRESOLVED_POLICIES

    if text is None:
        return UNRESOLVED_DEFAULT
    if text not in UNRESOLVED_POLICIES:
        raise ConfigError(f"{flag} {text!r}: fail (a row the gate could not judge fails it, exit 6; the default) or "
                          f"pass (such rows pass, and the gate's line still names them).")
    return text


def commits_protocol(*, quick: bool, gated: bool, repeats: int | None, until_ci: float | None,
                     max_repeats: int | None, window_s: float | None, idle_s: float | None,
                     warmin_cap_s: float | None = None) -> SustainedProtocol:
    """`bench commits`'s protocol: no idle between revisions (COMMITS_IDLE_S), and under a gate a pilot of at least
    MIN_GATE_PILOT interleaved pairs (--quick too: a gate never judges fewer), refused by flag when asked lower."""
    from harness.analysis import MIN_GATE_PILOT

    if gated and repeats is not None and repeats < MIN_GATE_PILOT:
        raise ConfigError(f"--repeats {repeats}: a gate (--fail-on-slowdown) judges a pilot of at least "
                          f"{MIN_GATE_PILOT} interleaved pairs ({MIN_GATE_PILOT - 1} degrees of freedom; fewer "
                          f"leave a 4x slowdown unresolved). Give --repeats {MIN_GATE_PILOT} or more, or leave it "
                          f"out.")
    if gated and repeats is None:
        repeats = MIN_GATE_PILOT
    return sustained_protocol(quick=quick, repeats=repeats, until_ci=until_ci, max_repeats=max_repeats,
                              window_s=window_s, warmin_cap_s=warmin_cap_s,
                              idle_s=COMMITS_IDLE_S if idle_s is None else idle_s)


# Seeds torch's generators take (and the gate adds 7919 to one): 64-bit signed, with room to spare.
SEED_LIMIT = 2**62


def check_seed(seed: int) -> int:
    """--seed as torch's generators can take it, refused by flag otherwise (2**70 was an internal error)."""
    if not -SEED_LIMIT < int(seed) < SEED_LIMIT:
        raise ConfigError(f"--seed {seed}: a seed must lie within +-2**62 (torch's generators are 64-bit). Pick a "
                          f"smaller one.")
    return int(seed)


def _positive(value, flag: str, *, allow_zero: bool = False):
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{flag} {value!r}: must be a finite number of seconds, milliseconds or items, as the "
                          f"option says. Leave the option out for its default.")
    if value < 0 or (value == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{flag} {value!r}: must be {need}. Leave the option out for its default.")
    return value


# The shape options in the order a sweep varies them (the last fastest), each with its flag and its short
# name in the label of a sweep point.
_SWEEP = (("batch", "--batch", "B"), ("heads", "--heads", "Hq"), ("heads_kv", "--heads-kv", "Hkv"),
          ("seq_len", "--seq-len", "S"), ("seq_len_q", "--seq-len-q", "Sq"), ("seq_len_kv", "--seq-len-kv", "Skv"),
          ("head_dim", "--head-dim", "d"), ("head_dim_v", "--head-dim-v", "dv"), ("window", "--window", "window"),
          ("page_size", "--page-size", "page"), ("varlen", "--varlen", "varlen"))
_FLAGS = {name: flag for name, flag, _ in _SWEEP}
# Options that may say `none` in a list: the feature off at that point of the sweep.
_OFF = ("window", "page_size", "varlen")


@dataclass(frozen=True, kw_only=True)
class ShapeArgs:
    """The shape options as typed (None = the default: B=1, Hq=32, Hkv=Hq, S by device, d=128, causal, no
    window, no paging, no varlen). Each size may be a tuple of values: a sweep over their product
    (`attention_shapes`). S_kv is --seq-len-kv, else --seq-len, else the device's default; S_q is --seq-len-q,
    else --seq-len, else S_kv (so `--seq-len-q 1 --seq-len 4096` is one decode step against 4096 keys)."""

    batch: int | tuple[int, ...] | None = None
    heads: int | tuple[int, ...] | None = None
    heads_kv: int | tuple[int, ...] | None = None
    seq_len: int | tuple[int, ...] | None = None
    seq_len_q: int | tuple[int, ...] | None = None
    seq_len_kv: int | tuple[int, ...] | None = None
    head_dim: int | tuple[int, ...] | None = None
    head_dim_v: int | tuple[int, ...] | None = None
    causal: bool | None = None
    window: int | str | tuple | None = None  # a size, or "none" in a sweep
    page_size: int | str | tuple | None = None
    varlen: str | tuple[str, ...] | None = None  # harness.inputs.VARLEN_FORMS
    mla: bool | None = None  # MLA_DIMS: DeepSeek's absorbed MLA (Hkv 1, latent K of 576 dims, V its first 512)

    def __post_init__(self) -> None:
        if self.mla is False:  # the CLI's flag off: not given
            object.__setattr__(self, "mla", None)
        for name, _, _ in _SWEEP:
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(value)
            if isinstance(value, tuple):
                value = None if not value else (value[0] if len(value) == 1 else value)
            object.__setattr__(self, name, value)

    def given(self, *, but: tuple[str, ...] = ()) -> list[str]:
        """The flags given, as typed."""
        return [f"--{f.name.replace('_', '-')}" if f.name != "causal" else "--causal/--no-causal"
                for f in dataclasses.fields(self) if getattr(self, f.name) is not None and f.name not in but]

    def swept(self) -> list[str]:
        """The flags given more than one value."""
        return [flag for name, flag, _ in _SWEEP if isinstance(getattr(self, name), tuple)]

    def one(self, name: str):
        """The single value of option `name` (None: not given); a list is refused, naming the flag."""
        value = getattr(self, name)
        if isinstance(value, tuple):
            raise ConfigError(f"{_FLAGS[name]} {','.join(map(str, value))}: this command takes one value of "
                              f"{_FLAGS[name]}. A list of values (a sweep) is taken by `bench sustained`, `bench error` "
                              f"and `bench repro` on synthetic inputs.")
        return value


def _values(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _off(name: str, value):
    """'none' in a list of --window / --page-size / --varlen: the feature off there."""
    if isinstance(value, str) and value.strip().lower() == "none":
        if name not in _OFF:
            raise ConfigError(f"{_FLAGS[name]} none: only --window, --page-size and --varlen can be switched off in a "
                              f"list. Give {_FLAGS[name]} a size.")
        return None
    if name in ("window", "page_size") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{_FLAGS[name]} {value!r} is not a size: give an integer, or none.") from None
    return value


def attention_shapes(args: ShapeArgs, *, device: str, model: bool = False, seed: int = 0
                     ) -> tuple[tuple[AttentionShape, str], ...]:
    """Every (AttentionShape, label of its sweep point) the options describe: the product of the values of every
    list-valued option (the label names those, e.g. "B8 Skv4096 page16"; "" without a sweep). Sizes of 0 or less
    are refused with their flag's name; --varlen lengths are drawn with `seed` (--seed)."""
    from harness.inputs import varlen_lengths

    if args.seq_len is not None and args.seq_len_kv is not None:
        raise ConfigError("--seq-len and --seq-len-kv both give the keys per sequence: give --seq-len-kv (with "
                          "--seq-len-q for the queries), or --seq-len alone for self-attention.")
    for name, flag, _ in _SWEEP:
        if name != "varlen":
            for value in _values(getattr(args, name)):
                _positive(_off(name, value), flag)
    swept = {name for name, _, _ in _SWEEP if isinstance(getattr(args, name), tuple)}
    out = []
    for point in itertools.product(*(_values(getattr(args, name)) for name, _, _ in _SWEEP)):
        v = {name: _off(name, x) for (name, _, _), x in zip(_SWEEP, point)}
        label = " ".join(f"{short}{v[name] if v[name] is not None else ' none'}" if name != "varlen"
                         else f"varlen {v[name] or 'none'}" for name, _, short in _SWEEP if name in swept)
        heads = (MLA_DIMS["heads"] if args.mla else 32) if v["heads"] is None else v["heads"]
        s_kv = v["seq_len_kv"] or v["seq_len"] or default_seq_len(device, model=model)
        s_q = v["seq_len_q"] or v["seq_len"] or s_kv
        batch = 1 if v["batch"] is None else v["batch"]
        dims = _mla_dims(v) if args.mla else dict(
            heads_kv=heads if v["heads_kv"] is None else v["heads_kv"],
            head_dim_qk=128 if v["head_dim"] is None else v["head_dim"], head_dim_v=v["head_dim_v"])
        try:
            lengths, how = varlen_lengths(v["varlen"], batch=batch, seq_len_kv=s_kv, seed=seed) if v["varlen"] else (
                None, None)
            shape = AttentionShape(
                batch=batch, heads_q=heads, seq_len=s_q, seq_len_kv=s_kv, **dims,
                causal=True if args.causal is None else args.causal, window=v["window"],
                page_size=v["page_size"], kv_lens=lengths, varlen=how)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (sweep point {label})" if label else str(exc)) from None
        out.append((shape, label))
    return tuple(out)


# DeepSeek-V2/V3's attention in the absorbed form decode kernels run (FlashMLA): 128 query heads (a TP slice has
# fewer), one latent KV head whose 576 dims are the 512-dim compressed KV and the 64-dim RoPE key, V its first 512.
MLA_DIMS = dict(heads=128, heads_kv=1, head_dim_qk=576, head_dim_v=512)


def _mla_dims(point: dict) -> dict:
    fixed = [_FLAGS[n] for n in ("heads_kv", "head_dim", "head_dim_v") if point[n] is not None]
    if fixed:
        raise ConfigError(f"--mla fixes Hkv 1, dqk 576 and dv 512 (DeepSeek's latent cache); drop {', '.join(fixed)}, "
                          f"or drop --mla and give the dims yourself (then K and V are separate tensors).")
    return dict(heads_kv=1, head_dim_qk=MLA_DIMS["head_dim_qk"], head_dim_v=MLA_DIMS["head_dim_v"], latent_kv=True)


def attention_shape(args: ShapeArgs, *, device: str, model: bool = False, seed: int = 0) -> AttentionShape:
    """The one AttentionShape the options describe (a sweep, a list of values, is refused by flag)."""
    for name, _, _ in _SWEEP:
        args.one(name)
    return attention_shapes(args, device=device, model=model, seed=seed)[0][0]


def synthetic_specs(sources: Sequence[str] | None, *, shape, dtype: str = "bf16",
                    seed: int = 0) -> tuple[InputSpec, ...]:
    """One InputSpec per synthetic source (None: DEFAULT_INPUTS) at `shape`, or at each (shape, sweep point
    label) of a sweep (`attention_shapes`), sources varying fastest and each named `source point`; every source is
    checked before any run directory exists."""
    sources = DEFAULT_INPUTS if sources is None else tuple(sources)
    check_seed(seed)
    for s in sources:
        check_source(s, flag="--input")
    points = ((shape, ""),) if isinstance(shape, AttentionShape) else tuple(shape)
    return tuple(InputSpec(shape=sh, dtype=dtype, source=s, seed=seed, name=f"{s} {label}" if label else None)
                 for sh, label in points for s in sources)


@dataclass(frozen=True, kw_only=True)
class CaptureArgs:
    """What selects captured activations: a model and its layers, or explicit capture files."""

    model: str | None = None
    layers: tuple[int, ...] = ()
    controls: tuple[str, ...] | None = None  # None = DEFAULT_CONTROLS
    text: str | None = None  # None = DEFAULT_TEXT
    weights: Path | None = None
    captures: Path = CAPTURES_ROOT
    files: tuple[Path, ...] = ()  # explicit capture layer files (nightly's --capture)
    windows: int | None = None  # None = the model's main-job default on this device
    capture_device: str | None = None  # None = the run's device
    capture_dtype: str | None = None  # None = bf16 on a GPU, fp32 on the CPU
    random_weights: bool = False
    allow_random_weights: bool = False
    recapture: bool = False

    @property
    def wanted(self) -> bool:
        return bool(self.model or self.files)

    def check(self) -> None:
        """Options that select captured data do nothing without --model: refuse them rather than ignore."""
        if self.model and self.files:
            raise ConfigError("--model and --capture both select captured inputs; give one of them.")
        if self.model or self.files:
            return
        given = [flag for flag, v in (("--layer", self.layers), ("--control", self.controls),
                                      ("--text", self.text), ("--weights", self.weights), ("--windows", self.windows),
                                      ("--capture-device", self.capture_device), ("--capture-dtype", self.capture_dtype),
                                      ("--random-weights", self.random_weights), ("--recapture", self.recapture),
                                      ("--allow-random-weights", self.allow_random_weights)) if v]
        if given:
            raise ConfigError(f"{', '.join(given)} select(s) captured activations of a model, but no --model was "
                              f"given. Add --model NAME (see `bench list models`) or drop {', '.join(given)}.")


def _labelled(spec: InputSpec, tag: str, controls: Sequence[str]) -> list[InputSpec]:
    """A capture labelled `TAG:captured`, followed by its same-shape controls `TAG:<source>`."""
    captured = dataclasses.replace(spec, name=f"{tag}:captured")
    return [captured, *(dataclasses.replace(captured, source=c, name=f"{tag}:{c}", loader=None) for c in controls)]


def captured_specs(args: CaptureArgs, *, device: str, seq_len: int | None, dtype: str = "bf16", seed: int = 0,
                   progress=None, on_estimate=None, decode_steps: int = 0,
                   page_size: int | None = None) -> tuple[InputSpec, ...]:
    """A model's captured layers (captured first where missing) each followed by its controls, or the
    explicit capture files with theirs. A control shares the capture's shape and softmax scale, so the
    only difference a kernel sees is the data: the comparison the harness exists for."""
    check_seed(seed)
    import re

    from harness.capture import capture_spec, main_job_defaults, model_input_specs

    controls = DEFAULT_CONTROLS if args.controls is None else tuple(args.controls)
    for c in controls:
        check_source(c, flag="--control")
    _positive(seq_len, "--seq-len")
    _positive(args.windows, "--windows")
    if args.files:
        out: list[InputSpec] = []
        for path in args.files:
            m = re.search(r"layer(\d+)", Path(path).name)
            tag = f"L{int(m.group(1)):02d}" if m else Path(path).stem
            spec = capture_spec(path, dtype=dtype, seed=seed, allow_random_weights=args.allow_random_weights)
            spec = dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, page_size=page_size))
            out.extend(_labelled(spec, tag, controls))
        return tuple(out)
    if Path(args.captures).exists() and not Path(args.captures).is_dir():
        raise ConfigError(f"--captures {args.captures} is a file; --captures names the folder captures are read from "
                          f"and written to (default captures/). Pass a folder.")
    job = main_job_defaults(args.model, device)
    return model_input_specs(
        args.model, layers=tuple(args.layers) or job.layers, seq_len=job.seq_len if seq_len is None else seq_len,
        text=args.text or DEFAULT_TEXT, weights=args.weights, root=args.captures, controls=controls, dtype=dtype,
        seed=seed, progress=progress, device=device, capture_device=args.capture_device,
        capture_dtype=args.capture_dtype, windows=job.windows if args.windows is None else args.windows,
        random_weights=args.random_weights, allow_random_weights=args.allow_random_weights, recapture=args.recapture,
        on_estimate=on_estimate, decode_steps=decode_steps, page_size=page_size,
    )


def input_specs(*, sources: Sequence[str] | None, shape: ShapeArgs, capture: CaptureArgs, device: str,
                dtype: str = "bf16", seed: int = 0, progress=None, on_estimate=None) -> tuple[InputSpec, ...]:
    """The suite's inputs: captured activations (with their controls) when a model or files are named,
    else the synthetic sources at the shape the options give."""
    capture.check()
    if capture.wanted:
        return _captured_inputs(capture, shape, device=device, dtype=dtype, seed=seed, progress=progress,
                                on_estimate=on_estimate)
    return synthetic_specs(sources, shape=attention_shapes(shape, device=device, seed=seed), dtype=dtype, seed=seed)


def _captured_inputs(capture: CaptureArgs, shape: ShapeArgs, **kw) -> tuple[InputSpec, ...]:
    """Captured inputs at the shape flags that apply to them: --seq-len (prefill), or --seq-len-kv S with
    --seq-len-q N < S (a decode capture: N greedy steps after a prompt of S - N tokens), and --page-size."""
    keep = ("seq_len", "seq_len_q", "seq_len_kv", "page_size")
    ignored = shape.given(but=keep)
    if ignored:
        raise ConfigError(f"{', '.join(ignored)} set(s) the shape of synthetic inputs, but captured inputs take "
                          f"their shape from the model (--seq-len, or --seq-len-q/--seq-len-kv for decode, and "
                          f"--page-size apply). Drop {', '.join(ignored)}.")
    s, s_q, s_kv = (shape.one(n) for n in keep[:3])
    page = _positive(_off("page_size", shape.one("page_size")), "--page-size")
    if s is not None and s_kv is not None:
        raise ConfigError("--seq-len and --seq-len-kv both give the keys per sequence: give --seq-len-kv (with "
                          "--seq-len-q for the decode steps), or --seq-len alone.")
    s_kv = s_kv if s_kv is not None else s
    if s_q is not None and s_kv is None:
        raise ConfigError(f"--seq-len-q {s_q} with --model decodes {s_q} token(s) after a prompt: give the cache's "
                          f"length with --seq-len-kv too, e.g. --seq-len-q 1 --seq-len-kv 4096.")
    _positive(s_q, "--seq-len-q")
    decode = s_q if s_q is not None and s_q != s_kv else 0
    return captured_specs(capture, seq_len=s_kv, decode_steps=decode, page_size=page, **kw)


def sustained_protocol(*, quick: bool = False, repeats: int | None = None, window_s: float | None = None,
                       warmin_cap_s: float | None = None, idle_s: float | None = None, chunk_s: float | None = None,
                       sample_period_ms: float | None = None, probe: bool | None = None,
                       launch_timeout_s: float | None = None, until_ci: float | None = None,
                       max_repeats: int | None = None, l2: str | None = None) -> SustainedProtocol:
    """The protocol's defaults (or `--quick`'s) with the options given on top; 0 and negatives refused by flag.
    `until_ci` (a fraction) makes the repeats adaptive: `repeats` (default ADAPTIVE_PILOT, or --quick's) is the
    pilot, `max_repeats` (default MAX_REPEATS) the cap."""
    if max_repeats is not None and until_ci is None:
        raise ConfigError("--max-repeats caps the adaptive repeats of --until-ci; without --until-ci (it is off by "
                          "default, and under --quick) give the number of repeats with --repeats.")
    if until_ci is not None and repeats is None and not quick:
        repeats = ADAPTIVE_PILOT
    checks = (("--repeats", repeats, False), ("--window-s", window_s, False), ("--warmin-cap-s", warmin_cap_s, False),
              ("--idle-s", idle_s, True), ("--chunk-s", chunk_s, False), ("--sample-period-ms", sample_period_ms, False),
              ("--launch-timeout-s", launch_timeout_s, False), ("--max-repeats", max_repeats, False))
    for flag, value, zero_ok in checks:
        _positive(value, flag, allow_zero=zero_ok)
    overrides = {k: v for k, v in dict(
        repeats=repeats, window_s=window_s, warmin_cap_s=warmin_cap_s, idle_before_kernel_s=idle_s, chunk_s=chunk_s,
        sample_period_s=None if sample_period_ms is None else sample_period_ms / 1000, probe=probe,
        launch_timeout_s=launch_timeout_s, until_ci=until_ci,
        max_repeats=(max_repeats or MAX_REPEATS) if until_ci is not None else max_repeats, l2=l2,
    ).items() if v is not None}
    # The protocol's own checks name its fields; what the user typed were flags, so these two say so first.
    base = SustainedProtocol.quick() if quick else SustainedProtocol()
    which = " (with --quick)" if quick else ""
    if warmin_cap_s is not None and warmin_cap_s < base.warmin_min_s:
        raise ConfigError(f"--warmin-cap-s {warmin_cap_s:g} is below the warm-in's minimum of {base.warmin_min_s:g} s"
                          f"{which}: the cap would end the warm-in before it may settle. Give --warmin-cap-s "
                          f"{base.warmin_min_s:g} or more.")
    if chunk_s is not None and base.settle_trend_window_s < 2 * chunk_s:
        raise ConfigError(f"--chunk-s {chunk_s:g}: the settle rule fits a trend over the trailing "
                          f"{base.settle_trend_window_s:g} s{which}, which must span two chunks at least. Give --chunk-s "
                          f"{base.settle_trend_window_s / 2:g} or less.")
    return SustainedProtocol.quick(**overrides) if quick else SustainedProtocol(**overrides)


def sustained_config(*, kernels: Sequence[str] = (), inputs: Sequence[InputSpec], device: str,
                     protocol: SustainedProtocol, **settings) -> RunConfig:
    """The RunConfig of a sustained run: the named kernels, or the defaults for the device and the inputs' workload."""
    return RunConfig(kernels=kernel_specs(kernels, device=device, shapes=[i.shape for i in inputs]),
                     inputs=tuple(inputs), device=device, protocol=protocol, **settings)


# The second correct BF16 kernel of `bench error --model` (the noise floor), by device: the first of these
# not among the kernels under test. On the CPU torch's SDPA, then the fp64 reference on the bf16 inputs.
FLOOR_KERNELS = {"cuda": ("sdpa-cudnn", "sdpa-flash", "triton-bf16"), "rocm": ("sdpa-flash", "sdpa-efficient"),
                 "cpu": ("sdpa-cpu", "reference-fp64")}
# Documents x tokens of `bench error --model`: on a GPU 24 documents of 1024 tokens (pydoc has 26 that long),
# 8 to a forward pass; on the CPU a dry run of 4 x 128, all in one pass. Every layer on a GPU (a forward of
# SmolLM2 is milliseconds there); an early and a middle one on the CPU.
_MODEL_ERROR = {"gpu": dict(seq_len=1024, documents=24, batch=8), "cpu": dict(seq_len=128, documents=4, batch=4)}


def model_error_kernels(names: Sequence[str], *, device: str, floor: str | None = None, layout: str | None = None,
                        gqa: str | None = None) -> tuple[tuple[str, ...], str]:
    """(kernels under test, floor kernel) of `bench error --model`: the named kernels and `floor` (or the first
    of FLOOR_KERNELS[device] not under test); with none named, the device's default kernels but the floor."""
    kernels = kernel_specs(names, device=device, layout=layout, gqa=gqa)
    candidates = FLOOR_KERNELS[device_kind(device)]
    if floor is None:
        # no kernel named: the device's other default kernels against its first; else the first not under test
        floor = candidates[0] if not names else next((c for c in candidates if c not in kernels), candidates[0])
    return tuple(k for k in kernels if k != floor) or (floor,), floor


def model_error_config(*, model: str, device: str, shape: ShapeArgs, capture: CaptureArgs, documents: int | None,
                       all_layers: bool, results: Path, name: str | None, command: str):
    """The frozen ModelErrorConfig of `bench error --model`, every default decided here; options that do not
    apply to a model run (synthetic shapes, controls, stacked windows, recapture) are refused by name."""
    from harness.capture import ModelErrorConfig, resolve_model

    ignored = shape.given(but=("seq_len",))
    unused = [flag for flag, v in (("--control", capture.controls), ("--windows", capture.windows),
                                   ("--capture-device", capture.capture_device), ("--recapture", capture.recapture),
                                   ("--allow-random-weights", capture.allow_random_weights)) if v]
    if ignored or unused:
        bad = ignored + unused
        raise ConfigError(f"{', '.join(bad)} do(es) not apply to `bench error --model`, which runs the model itself over "
                          f"whole documents (its own shapes, no controls, nothing captured). Drop {', '.join(bad)}, or "
                          f"add --per-call for the error of one attention call on the model's captured layers.")
    _positive(shape.one("seq_len"), "--seq-len")
    _positive(documents, "--documents")
    spec = resolve_model(model)
    defaults = _MODEL_ERROR["cpu" if device_kind(device) == "cpu" else "gpu"]
    seq_len = min(shape.one("seq_len") or defaults["seq_len"], spec.max_positions)
    if capture.layers:
        layers = tuple(capture.layers)
    else:
        from harness.capture import default_layers

        layers = default_layers(spec.num_layers) if device_kind(device) == "cpu" else tuple(range(spec.num_layers))
    n = documents or defaults["documents"]
    return ModelErrorConfig(
        model=model, text=capture.text or DEFAULT_TEXT, weights=capture.weights, seq_len=seq_len, documents=n,
        batch=min(defaults["batch"], n), layers=layers, all_layers=all_layers, device=device,
        dtype=capture.capture_dtype, random_weights=capture.random_weights, results_root=Path(results),
        run_name=name, command=command,
    )
def verdict_rule(fail_on_slowdown: str | None, *, flag: str = "--fail-on-slowdown", default: str | None = None,
                 between_runs_cv: str | None = None):
    """(the comparison's VerdictRule, the gate's threshold or None). The rule judges at the user's threshold where
    one is given (so a 0.3 % gate is a 0.3 % gate), else at the analysis default, and names where it came from.
    `default`: the command's own default gate (nightly's 2 %), used and named when the flag is absent.
    `between_runs_cv`: `--between-runs-cv` as typed (the between-run variance separate runs add; None: the
    device kind's stated default, `harness.analysis.BETWEEN_RUNS_CV`)."""
    from dataclasses import replace

    from harness.analysis import VerdictRule, parse_threshold

    base = VerdictRule()
    if between_runs_cv is not None:
        try:
            cv = parse_threshold(between_runs_cv)
        except ConfigError:
            raise ConfigError(f"--between-runs-cv {between_runs_cv!r} is not a percentage; write it like 0.3% (the "
                              f"coefficient of variation between separate runs of this suite, e.g. from A/A nights "
                              f"or `bench history`).") from None
        base = replace(base, between_runs_cv=cv, between_runs_source=f"--between-runs-cv {between_runs_cv}")
    text, source = (fail_on_slowdown, f"{flag} {fail_on_slowdown}") if fail_on_slowdown is not None else (
        (default, f"{flag} default {default}") if default is not None else (None, "default"))
    if text is None:
        return base, None
    threshold = parse_threshold(text)
    return base.with_threshold(threshold, source=source), threshold


def until_ci(text: str | None, *, default: float | None, flag: str = "--until-ci") -> float | None:
    """The target half-width of adaptive repeats as typed, or (None) the command's default (commits: the
    verdict's threshold; sustained: off)."""
    from harness.analysis import parse_until_ci

    return default if text is None else parse_until_ci(text, flag=flag)


def nightly_until_ci(threshold: float) -> float:
    """Nightly's default target for tonight's own intervals: the gate / sqrt(2), so that with the baseline's side
    as narrow the comparison's interval is about as wide as the gate."""
    return threshold / 2 ** 0.5
