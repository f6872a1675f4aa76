"""The inputs of a run: synthetic sources at the shape the options give, or a model's captured layers (captured
first where missing) each followed by its same-shape controls."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.capture import capture_spec, model_input_specs
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec, check_source
from harness.suite._checks import check_seed, positive
from harness.suite._models import CAPTURES_ROOT, DEFAULT_TEXT, main_job_defaults
from harness.suite._shapes import DEFAULT_SEED, ShapeArgs, attention_shapes, off_value, seq_lens

__all__ = ["DEFAULT_INPUTS", "DEFAULT_DTYPE", "BURST_INPUTS", "DEFAULT_CONTROLS", "DEFAULT_TEXT", "CAPTURES_ROOT",
           "CaptureArgs",
           "synthetic_specs", "captured_specs", "input_specs"]


DEFAULT_INPUTS = ("gaussian:0.1", "gaussian:1")
# The dtype of a suite's inputs unless --dtype says otherwise (the seed: DEFAULT_SEED, suite._shapes).
DEFAULT_DTYPE = "bf16"
# A burst is the figure other tools print; one control is enough to set it beside a sustained run.
BURST_INPUTS = ("gaussian:0.1",)
DEFAULT_CONTROLS = ("gaussian:0.1",)


def synthetic_specs(sources: Sequence[str] | None, *, shape, dtype: str = DEFAULT_DTYPE,
                    seed: int = DEFAULT_SEED) -> tuple[InputSpec, ...]:
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


def captured_specs(args: CaptureArgs, *, device: str, seq_len: int | None, dtype: str = DEFAULT_DTYPE,
                   seed: int = DEFAULT_SEED,
                   progress=None, on_estimate=None, decode_steps: int = 0,
                   page_size: int | None = None) -> tuple[InputSpec, ...]:
    """A model's captured layers (captured first where missing) each followed by its controls, or the
    explicit capture files with theirs. A control shares the capture's shape and softmax scale, so the
    only difference a kernel sees is the data: the comparison the harness exists for."""
    check_seed(seed)
    controls = DEFAULT_CONTROLS if args.controls is None else tuple(args.controls)
    for c in controls:
        check_source(c, flag="--control")
    positive(seq_len, "--seq-len")
    positive(args.windows, "--windows")
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
                dtype: str = DEFAULT_DTYPE, seed: int = DEFAULT_SEED, progress=None,
                on_estimate=None) -> tuple[InputSpec, ...]:
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
    s_q_given = shape.one("seq_len_q")
    page = positive(off_value("page_size", shape.one("page_size")), "--page-size")
    s_q, s_kv = seq_lens(shape.one("seq_len"), s_q_given, shape.one("seq_len_kv"), default=None)
    if s_q_given is not None and s_kv is None:
        raise ConfigError(f"--seq-len-q {s_q} with --model decodes {s_q} token(s) after a prompt: give the cache's "
                          f"length with --seq-len-kv too, e.g. --seq-len-q 1 --seq-len-kv 4096.")
    positive(s_q_given, "--seq-len-q")
    decode = s_q if s_q_given is not None and s_q != s_kv else 0
    return captured_specs(capture, seq_len=s_kv, decode_steps=decode, page_size=page, **kw)
