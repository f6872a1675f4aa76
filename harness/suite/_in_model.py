"""`bench in-model`'s defaults: the in-model run's shape, windows, protocol and reference kernel, and the isolated run
timed beside it on the captured layer."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from harness.capture import resolve_model
from harness.config import RESULTS_ROOT
from harness.errors import ConfigError
from harness.results import resolve_run
from harness.runner import InModelConfig, InModelJob
from harness.suite._checks import check_seed, positive
from harness.suite._devices import kernel_specs
from harness.suite._inputs import CaptureArgs, captured_specs
from harness.suite._models import DEFAULT_TEXT, main_job_defaults
from harness.suite._protocol import given_settings, sustained_config, sustained_protocol
from harness.suite._shapes import DEFAULT_SEED, ShapeArgs, seq_lens
from harness.suite._verdicts import until_ci

__all__ = ["IN_MODEL_PASS_S", "IN_MODEL_LAUNCH_TIMEOUT_S", "in_model_job"]


# `bench in-model` (issue 43): the attention pass after each window (--attention-pass-s; --quick's), the watchdog's
# limit on one step when none is given (a wrapped kernel's prepare() gates every layer of the model: minutes on a
# large one, where a kernel's first call takes seconds), and the isolated run's name beside the in-model run's.
IN_MODEL_PASS_S = {False: 1.0, True: 0.2}
IN_MODEL_LAUNCH_TIMEOUT_S = 900.0


def in_model_job(*, model: str, kernels: Sequence[str], reference: str | None, device: str, shape: ShapeArgs,
                 capture: CaptureArgs, protocol_options: dict, attention_pass_s: float | None, isolated: str | None,
                 isolated_input: str | None, results: Path | None, name: str | None,
                 telemetry: str | None = None, launch: str | None = None, allow_busy: bool | None = None,
                 gate: bool | None = None, isolation: str | None = None, layout: str | None = None,
                 gqa: str | None = None, seed: int = DEFAULT_SEED,
                 progress=None, on_estimate=None):
    """The `InModelJob` of `bench in-model`, every default decided here: the main job's S and stacked windows on this
    device (`main_job_defaults`), the device's SDPA kernels, the reference the first of them (added when not named),
    and the isolated run: `isolated` names a run (a directory, run id or --name under `results`), "none" for none, or
    (None) it is timed first: the same kernels on the captured layer (--layer, default the model's middle layer;
    captured first where missing), no controls."""
    if capture.controls:
        raise ConfigError("--control adds controls to a captured input; `bench in-model` compares kernels on the "
                          "captured layer alone and in the model. Drop --control (or run `bench sustained --model`).")
    ignored = shape.given(but=("seq_len", "seq_len_q", "seq_len_kv"))
    if ignored:
        raise ConfigError(f"{', '.join(ignored)} set(s) the shape of synthetic inputs; a model's forward takes its "
                          f"shape from the model (--seq-len, or --seq-len-q N with --seq-len-kv S for a decode step). "
                          f"Drop {', '.join(ignored)}.")
    if len(capture.layers) > 1:
        raise ConfigError(f"--layer {','.join(map(str, capture.layers))}: the isolated ratio is one captured layer's; "
                          f"give one --layer (the in-model run puts the kernel in every layer anyway).")
    spec = resolve_model(model)
    job = main_job_defaults(model, device)
    results = RESULTS_ROOT if results is None else Path(results)
    settings = given_settings(telemetry=telemetry, launch=launch, allow_busy=allow_busy, gate=gate)
    s_q = shape.one("seq_len_q")
    _, s_kv = seq_lens(shape.one("seq_len"), s_q, shape.one("seq_len_kv"), default=job.seq_len)
    positive(s_kv, "--seq-len")
    positive(s_q, "--seq-len-q")
    windows = capture.windows if capture.windows is not None else job.windows
    positive(windows, "--windows")
    names = kernel_specs(kernels, device=device, layout=layout, gqa=gqa)
    reference = reference or names[0]
    names = names if reference in names else (reference, *names)
    quick = bool(protocol_options.get("quick"))
    opts = dict(protocol_options)
    if isinstance(opts.get("until_ci"), str):
        opts["until_ci"] = until_ci(opts["until_ci"], default=None)
    proto = sustained_protocol(**{**opts, "launch_timeout_s": opts.get("launch_timeout_s") or IN_MODEL_LAUNCH_TIMEOUT_S})
    decode = s_q if s_q is not None and s_q != s_kv else None
    config = InModelConfig(
        model=model, kernels=tuple(names), reference=reference, text=capture.text or DEFAULT_TEXT,
        weights=capture.weights, seq_len=s_kv, seq_len_q=decode, windows=windows, device=device,
        dtype=capture.capture_dtype, random_weights=capture.random_weights, seed=check_seed(seed), protocol=proto,
        attention_pass_s=attention_pass_s or IN_MODEL_PASS_S[quick], results_dir=results, run_name=name, **settings)
    iso_config = isolated_run = None
    if isolated not in (None, "none"):
        isolated_run = resolve_run(isolated, results=results)
    elif isolated is None:
        layer = capture.layers[0] if capture.layers else spec.num_layers // 2
        args = dataclasses.replace(capture, layers=(layer,), controls=(), windows=windows,
                                   allow_random_weights=capture.random_weights or capture.allow_random_weights)
        inputs = captured_specs(args, device=device, seq_len=s_kv, decode_steps=decode or 0, seed=seed,
                                progress=progress, on_estimate=on_estimate)
        iso_config = sustained_config(kernels=names, inputs=inputs, device=device, protocol=sustained_protocol(**opts),
                                      results_dir=results, run_name=f"{name}-isolated" if name else "isolated",
                                      isolation=isolation, **settings)
    return InModelJob(in_model=config, isolated=iso_config, isolated_run=isolated_run, isolated_input=isolated_input)
