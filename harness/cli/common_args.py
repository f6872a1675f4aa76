"""The options of the commands that take a suite (`sustained`, `error`, `repro`, `burst`, `commits`, `nightly`),
declared once, and what turns them into the suite's arguments.

Options come in groups (sources, shape, capture, protocol, run), each declared once and added to a
command's signature by `with_options`, so the commands cannot drift apart in a flag's name, default or
help. Options with a default are `None` here and decided in `harness.suite`; the help texts quote the suite's values
(and harness.config's protocol fields), never a number of their own.
What a command prints and how it ends (console, exports, the error exit) is `harness.cli.common_output`,
whose names this module also exports, so a command module imports both from here.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import List, Optional

import typer

from harness.analysis import BETWEEN_RUNS_CV
from harness.capture import DEFAULT_MODEL, MODELS, capture_progress
from harness.cli.common_output import (
    command_line,
    console,
    export,
    export_console,
    fail,
    need_polars,
    nothing_timed,
    reading_runs,
    stopped,
)
from harness.config import CPU_THREADS, RunWriting
from harness.errors import ConfigError
from harness.kernels import SPEC_OPTIONS
from harness.suite import (
    ADAPTIVE_PILOT,
    CAPTURES_ROOT,
    DEFAULT_CONTROLS,
    DEFAULT_DTYPE,
    DEFAULT_INPUTS,
    DEFAULT_SEED,
    DEFAULT_TEXT,
    DEVICE_HELP,
    MAX_REPEATS,
    MLA_DIMS,
    PROTOCOL_DEFAULTS as _P,
    QUICK_DEFAULTS as _Q,
    RESULTS_ROOT,
    SHAPE_DEFAULTS,
    CaptureArgs,
    ShapeArgs,
    default_seq_len,
    input_specs,
    run_device,
    sustained_protocol,
    until_ci,
)

__all__ = ["console", "fail", "command_line", "SOURCES", "SHAPE", "CAPTURE", "PROTOCOL", "RECORD", "RUN", "ISOLATE", "EXPORT",
           "HISTORY",
           "with_options", "split_list", "split_ints", "split_sizes", "split_or_none", "export", "export_console", "need_polars", "reading_runs",
           "shape_args", "capture_args", "protocol_of", "suite_inputs", "stopped", "nothing_timed", "split_kernels",
           "fail_on_slowdown_option", "renamed_option", "unresolved_option", "between_runs_option"]


def split_list(values):
    """`--x a,b --x c` -> [a, b, c]: every list option takes both spellings. A value that names nothing
    (`-k ''`) is refused: leaving it out gives the defaults, and an empty value must not do so unasked."""
    if values is None:
        return None
    for v in values:
        if not any(part.strip() for part in str(v).split(",")):
            raise typer.BadParameter(f"{str(v)!r} names nothing. Leave the option out for its default, or name "
                                     f"at least one value.")
    return [part.strip() for v in values for part in str(v).split(",") if part.strip()]


def split_kernels(values):
    """`-k a,b -k c` like split_list, but a callable's own options stay with it: `mod:fn@bshd,expand-gqa`."""
    out: list[str] = []
    for part in split_list(values) or []:
        if out and "@" in out[-1] and part in SPEC_OPTIONS:
            out[-1] += "," + part
        else:
            out.append(part)
    return out if values is not None else None


def split_ints(values):
    """`--layer 3,15` and `--layer 3 --layer 15` alike, as ints."""
    out = []
    for part in split_list(values) or []:
        try:
            out.append(int(part))
        except ValueError:
            raise typer.BadParameter(f"{part!r} is not a layer index; write e.g. --layer 3,15 or --layer 3 --layer 15.")
    return out

# Option groups: name -> (type, typer.Option). A command takes a group with `@with_options(shape=SHAPE)`
# and receives it as one dict argument `shape`; its other parameters are its own.
SOURCES = dict(
    kernel=(List[str], typer.Option([], "--kernel", "-k", callback=split_kernels,
                                    help="kernel name, module:function or file.py:function (repeatable or "
                                         "comma-separated; default: the device's SDPA kernels)")),
    input_=(Optional[List[str]], typer.Option(None, "--input", "-i", callback=split_list,
                                              help="input source, see `bench list inputs` (repeatable or "
                                                   f"comma-separated; default: {' and '.join(DEFAULT_INPUTS)})")),
    device=(Optional[str], typer.Option(None, help=DEVICE_HELP)),
    layout=(Optional[str], typer.Option(None, help="layout of the plain callables named with -k: bhsd (torch SDPA's, "
                                                   "the default) or bshd (flash-attn's)")),
    gqa=(Optional[str], typer.Option(None, help="plain callables and grouped-query inputs: native (K/V passed with "
                                                "Hkv < Hq) or expand (the harness repeats K/V heads first)")),
)
def split_sizes(values):
    """`--seq-len-kv 1024,4096 --seq-len-kv 16384` -> (1024, 4096, 16384): a shape option's values, a sweep when
    there are several (their range is checked in harness.suite, by flag)."""
    out = []
    for part in split_list(values) or []:
        try:
            out.append(int(part))
        except ValueError:
            raise typer.BadParameter(f"{part!r} is not an integer size; write e.g. 1024 or a list 1024,4096 (a sweep).")
    return tuple(out) or None


def split_or_none(values):
    """Sizes that may also say `none` (no window, no paging) at a point of a sweep: kept as typed, checked in the suite."""
    return tuple(split_list(values) or ()) or None


_LIST = "; a list (1,8 or the flag repeated) sweeps it"
SHAPE = dict(
    batch=(Optional[List[str]], typer.Option(None, callback=split_sizes, help=f"B (default {SHAPE_DEFAULTS['batch']}){_LIST}")),
    heads=(Optional[List[str]], typer.Option(None, callback=split_sizes,
                                             help=f"Hq (default {SHAPE_DEFAULTS['heads']}){_LIST}")),
    heads_kv=(Optional[List[str]], typer.Option(None, callback=split_sizes, help=f"Hkv (default: Hq){_LIST}")),
    seq_len=(Optional[List[str]], typer.Option(None, callback=split_sizes,
                                               help=f"S, queries and keys per sequence (default "
                                                    f"{default_seq_len('cuda', model=False)} on a GPU, "
                                                    f"{default_seq_len('cuda', model=True)} with --model; "
                                                    f"{default_seq_len('cpu', model=False)} on the CPU){_LIST}")),
    seq_len_q=(Optional[List[str]], typer.Option(None, callback=split_sizes,
                                                 help="S_q, queries per sequence, the last S_q tokens of it (decode: "
                                                      f"1-8; default: --seq-len, else S_kv){_LIST}")),
    seq_len_kv=(Optional[List[str]], typer.Option(None, callback=split_sizes,
                                                  help="S_kv, keys per sequence in the KV cache (with --seq-len-q; "
                                                       f"default as --seq-len){_LIST}")),
    head_dim=(Optional[List[str]], typer.Option(None, callback=split_sizes, help=f"dqk (default {SHAPE_DEFAULTS['head_dim']}){_LIST}")),
    head_dim_v=(Optional[List[str]], typer.Option(None, callback=split_sizes, help=f"dv (default: dqk){_LIST}")),
    causal=(Optional[bool], typer.Option(None, "--causal/--no-causal",
                                         help="causal mask, aligned to the end of the KV cache (default causal)")),
    window=(Optional[List[str]], typer.Option(None, callback=split_or_none,
                                              help=f"sliding window: keys a query sees at most (default none){_LIST}, "
                                                   f"none for no window")),
    page_size=(Optional[List[str]], typer.Option(None, callback=split_or_none,
                                                 help="paged KV cache with pages of this many tokens, shuffled as a "
                                                      f"serving engine leaves them (default not paged){_LIST}, none "
                                                      f"for not paged")),
    varlen=(Optional[List[str]], typer.Option(None, callback=split_list,
                                              help="sequences of different KV lengths: uniform (1..S_kv), uniform:F "
                                                   "(F S_kv..S_kv), lengths:L1/L2/... (one per sequence), drawn with "
                                                   f"--seed; none for equal lengths (default){_LIST}")),
    mla=(bool, typer.Option(False, "--mla", help=f"DeepSeek-V2/V3 MLA decode in its absorbed form: one latent KV head "
                                                 f"of dqk {MLA_DIMS['head_dim_qk']} ({MLA_DIMS['head_dim_v']} latent + "
                                                 f"{MLA_DIMS['head_dim_qk'] - MLA_DIMS['head_dim_v']} RoPE), V its first "
                                                 f"{MLA_DIMS['head_dim_v']} dims (read once); "
                                                 f"--heads default {MLA_DIMS['heads']} (a TP slice: --heads 16)")),
    dtype=(str, typer.Option(DEFAULT_DTYPE, help="bf16, fp16, fp32 or fp8 (e4m3 inputs for FP8 kernels)")),
    seed=(int, typer.Option(DEFAULT_SEED, help="seed of the synthetic inputs")),
)
CAPTURE = dict(
    model=(Optional[str], typer.Option(None, help="captured activations of this model (see `bench list models`)")),
    layer=(List[str], typer.Option([], "--layer", callback=split_ints,
                                   help="captured layer of --model (repeatable or comma-separated: --layer 3,15; "
                                        "default: an early and a middle one)")),
    control=(Optional[List[str]], typer.Option(None, "--control", callback=split_list,
                                               help="control input of the capture's shape (repeatable or "
                                                    f"comma-separated; default {', '.join(DEFAULT_CONTROLS)})")),
    text=(Optional[str], typer.Option(None, help=f"text for --model captures: {DEFAULT_TEXT} (default), "
                                                 f"wikitext2:PATH or a file")),
    weights=(Optional[Path], typer.Option(None, help="model weights for --model (folder or GGUF file)")),
    captures=(Optional[Path], typer.Option(None, help=f"captures root directory (default {CAPTURES_ROOT})")),
    windows=(Optional[int], typer.Option(None, help=f"text windows of --model stacked along the batch (default: the "
                                                    f"model's, e.g. {MODELS[DEFAULT_MODEL].gpu_windows} for "
                                                    f"{DEFAULT_MODEL} on a GPU, so a launch reaches the power "
                                                    f"limiter; 1 on the CPU)")),
    capture_device=(Optional[str], typer.Option(None, help="device of the capture's forward pass (default: the run's "
                                                           "--device)")),
    capture_dtype=(Optional[str], typer.Option(None, help="dtype of the capture's forward pass (default bf16 on a GPU, "
                                                          "fp32 on the CPU)")),
    random_weights=(bool, typer.Option(False, help="build --model from its published config with random weights "
                                                   "(checks the architecture and hook; refused as timing input)")),
    allow_random_weights=(bool, typer.Option(False, help="time captures of random-weight models anyway (recorded)")),
    recapture=(bool, typer.Option(False, help="capture again, replacing a damaged or outdated capture")),
)
def _both(field: str) -> str:
    """`(default 3; --quick 2)`: a protocol field's value and --quick's, as the help states them."""
    return f"(default {getattr(_P, field):g}; --quick {getattr(_Q, field):g})"


# The sustained protocol's settings; None = the protocol's default (or --quick's), given in the help.
PROTOCOL = dict(
    quick=(bool, typer.Option(False, help="short protocol for dry runs (not sustained figures)")),
    repeats=(Optional[int], typer.Option(None, help=f"repeats per kernel x input, kernel order rotated "
                                                    f"{_both('repeats')}")),
    window_s=(Optional[float], typer.Option(None, help=f"timed window per measurement, seconds {_both('window_s')}")),
    warmin_cap_s=(Optional[float], typer.Option(None, help=f"warm-in cap, seconds; past it the window is timed and "
                                                           f"marked unsettled {_both('warmin_cap_s')}")),
    idle_s=(Optional[float], typer.Option(None, help=f"idle before each kernel, seconds "
                                                     f"{_both('idle_before_kernel_s')}")),
    chunk_s=(Optional[float], typer.Option(None, help=f"warm-in chunk length, seconds {_both('chunk_s')}")),
    sample_period_ms=(Optional[float], typer.Option(None, help=f"telemetry sampling period, ms (default "
                                                               f"{_P.sample_period_s * 1000:g})")),
    probe=(Optional[bool], typer.Option(None, "--probe/--no-probe", help="in-band clock probe during the window "
                                                                         "(default on; CUDA)")),
    launch_timeout_s=(Optional[float], typer.Option(None, help=f"a kernel's first call or one chunk may take this "
                                                               f"long, then it is stopped and recorded as timeout "
                                                               f"(default {_P.launch_timeout_s:g})")),
    until_ci=(Optional[str], typer.Option(None, "--until-ci", help=f"adaptive repeats: add repeats (Stein's two-stage "
                                                                   f"rule; --repeats is the pilot, default "
                                                                   f"{ADAPTIVE_PILOT}) until each kernel x input's "
                                                                   f"interval is at most this wide, e.g. 0.25% "
                                                                   f"(default: off)")),
    max_repeats=(Optional[int], typer.Option(None, help=f"cap on repeats under --until-ci (default {MAX_REPEATS})")),
    threads=(Optional[int], typer.Option(None, "--threads", help=f"torch's CPU threads in every process that runs a "
                                                                 f"kernel, recorded with the run (default "
                                                                 f"{CPU_THREADS} on the CPU; on a GPU torch's own)")),
    l2=(Optional[str], typer.Option(None, "--l2", help="warm (launches back to back on one copy of the inputs; the "
                                                       "default) or cold (launches rotate through copies of the "
                                                       "inputs larger than twice the L2; nothing flushed, so no flush "
                                                       "time is timed)")),
)
# Where a run is recorded, and what it checks first.
# None = the config's own default (harness.config.RunSettings / RunWriting, filled in by harness.suite.given_settings).
RECORD = dict(
    telemetry=(Optional[str], typer.Option(None, help=f"auto (the device's own: nvml / amdsmi / host), nvml, amdsmi, "
                                                      f"host, none (default {RunWriting.telemetry})")),
    results=(Optional[Path], typer.Option(None, help=f"results root directory (default {RESULTS_ROOT})")),
    name=(Optional[str], typer.Option(None, help="a name for the run id (letters, digits, '.', '_' and '-')")),
    allow_busy=(bool, typer.Option(False, help="run even if other processes use the GPU (recorded)")),
    gate=(Optional[bool], typer.Option(None, "--gate/--no-gate", help=f"correctness gate before timing (default "
                                                                      f"{'on' if RunWriting.gate else 'off'})")),
)
RUN = {**RECORD, "launch": (Optional[str], typer.Option(None, help=f"auto (a CUDA graph where it captures, else a "
                                                                    f"loop), graph or loop (default "
                                                                    f"{RunWriting.launch})"))}
# Where kernels run (`bench sustained`, `bench burst`): docs/kernels.md, "Isolation".
ISOLATE = dict(isolation=(Optional[str], typer.Option(None, help=f"auto (a kernel named module:function or "
                                                                 f"file.py:function, or from a plugin, runs in a "
                                                                 f"process of its own; the bundled kernels in the "
                                                                 f"run's), process (every kernel in its own), none "
                                                                 f"(every kernel in the run's process; default "
                                                                 f"{RunWriting.isolation})")))
# The history store (harness.history): where a run is appended as a night, and that night's label.
HISTORY = dict(
    history=(Optional[Path], typer.Option(None, "--history", metavar="DIR",
                                          help="also append this run to the history in DIR (a folder of night-*.parquet "
                                               "files, one per night; see `bench history`)")),
    night=(Optional[str], typer.Option(None, "--night", help="the night's label in --history (default: the run's start "
                                                             "time); runs given one label are one night")),
)
# The figures of the tables as data (harness/report/figures.schema.json).
EXPORT = dict(
    json_out=(Optional[str], typer.Option(None, "--json", metavar="PATH",
                                          help="also write the figures as JSON (schema harness/report/"
                                               "figures.schema.json); - for stdout (the tables go to stderr)")),
    csv_out=(Optional[str], typer.Option(None, "--csv", metavar="PATH",
                                         help="also write the figures as CSV (one row per table row, `table` "
                                              "first); - for stdout (the tables go to stderr)")),
    table_format=(str, typer.Option("table", "--format",
                                    help="how tables are drawn: table (box lines and captions) or compact (the same "
                                         "cells, no box lines or captions, two spaces between columns: narrow "
                                         "terminals and CI logs); either way cells are whole and empty columns left "
                                         "out")),
)


def fail_on_slowdown_option(subject: str, *, default: str | None = None):
    """`--fail-on-slowdown`, worded the same in every command that judges (`compare`, `commits`, `nightly`):
    what is judged, and the default stated one way (harness.suite owns the default values)."""
    stated = (f"default {default}" if default else "default: none, the verdicts judge at 0.5 % and the exit is 0")
    return typer.Option(None, help=f"exit 1 when {subject} is slower by more than this, its interval excluding 1 "
                                   f"(e.g. 2%); exit 6 when a row cannot be judged at it (see --unresolved); the "
                                   f"verdicts then judge at it ({stated})")


def unresolved_option():
    """`--unresolved fail|pass`, worded the same in every command that gates."""
    return typer.Option(None, "--unresolved", help="what the gate does with a row it could not judge at the "
                                                   "threshold (unresolved, or too few repeats): fail (exit 6; the "
                                                   "default) or pass (exit 0, the row still named)")


def between_runs_option():
    """`--between-runs-cv`, for the commands that compare separate runs (compare, nightly)."""
    return typer.Option(None, "--between-runs-cv", help=f"the coefficient of variation between separate runs of this "
                                                        f"suite (e.g. 0.3%, from A/A nights or bench history); every "
                                                        f"interval between two runs includes it (default: "
                                                        f"{BETWEEN_RUNS_CV['gpu']:.1%} on a GPU, "
                                                        f"{BETWEEN_RUNS_CV['cpu']:.0%} on a CPU)")


def renamed_option(old: str, new: str, old_value, new_value, *, warn):
    """The value of an option that was renamed: `new`'s, or `old`'s with a deprecation line (`warn(text)`); both
    given is refused, naming the new one."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ConfigError(f"{old} is the old name of {new}; give only {new}.")
    warn(f"{old} is deprecated: it is the old name of {new}, which every command that writes runs takes. Use {new}.")
    return old_value


def with_options(**groups: dict):
    """Add option groups to a command: `@with_options(shape=SHAPE)` gives the command every option of
    SHAPE, and calls it with `shape={name: value, ...}`. Typer reads the signature built here, so one
    declaration serves every command that takes the group."""

    def decorate(fn):
        sig = inspect.signature(fn, eval_str=True)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values() if p.name not in groups]
        shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
                  for group in groups.values() for name, (annotation, option) in group.items()]

        @functools.wraps(fn)
        def command(**kwargs):
            for gname, group in groups.items():
                kwargs[gname] = {name: kwargs.pop(name) for name in group}
            return fn(**kwargs)

        params = [*(p for p in own if isinstance(p.default, typer.models.ArgumentInfo)), *shared,
                  *(p for p in own if not isinstance(p.default, typer.models.ArgumentInfo))]
        command.__signature__ = sig.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        del command.__wrapped__  # typer must see this signature, not fn's
        return command

    return decorate


def shape_args(shape: dict):
    """The ShapeArgs of a SHAPE group (dtype and seed are not part of the shape)."""
    return ShapeArgs(**{k: v for k, v in shape.items() if k not in ("dtype", "seed")})


def capture_args(capture: dict, *, files=()):
    """The CaptureArgs of a CAPTURE group (and nightly's explicit capture files)."""
    c = capture
    root = {} if c["captures"] is None else {"captures": c["captures"]}  # None: CaptureArgs' own (CAPTURES_ROOT)
    return CaptureArgs(model=c["model"], layers=tuple(c["layer"] or ()), controls=tuple(c["control"] or ()) or None,
                       text=c["text"], weights=c["weights"], **root, files=tuple(files or ()),
                       windows=c["windows"], capture_device=c["capture_device"], capture_dtype=c["capture_dtype"],
                       random_weights=c["random_weights"], allow_random_weights=c["allow_random_weights"],
                       recapture=c["recapture"])


def protocol_of(protocol: dict):
    """The SustainedProtocol of a PROTOCOL group (or part of one); `--until-ci` as typed is parsed here."""
    if isinstance(protocol.get("until_ci"), str):
        protocol = {**protocol, "until_ci": until_ci(protocol["until_ci"], default=None)}
    return sustained_protocol(**protocol)


def suite_inputs(out, *, sources: dict, shape: dict, capture: dict, files=()):
    """The suite's InputSpecs from its option groups (captures made first where missing, with progress)."""
    selection = capture_args(capture, files=files)
    dims = shape_args(shape)
    common = dict(shape=dims, capture=selection, device=run_device(sources["device"]), dtype=shape["dtype"],
                  seed=shape["seed"])
    if not selection.wanted:
        return input_specs(sources=sources["input_"], **common)
    if sources["input_"]:
        raise ConfigError("--input names synthetic inputs, but --model selects captured ones (each with its --control "
                          "inputs of the same shape). Give one or the other.")
    with capture_progress(out) as progress:
        return input_specs(sources=None, progress=progress, on_estimate=lambda e: out.print(e.describe(), highlight=False),
                           **common)


