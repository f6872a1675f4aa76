"""`bench error --model`'s defaults: the floor kernel beside the kernels under test, documents, tokens and layers by
device."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from harness.capture import ModelErrorConfig, resolve_model
from harness.errors import ConfigError
from harness.suite._checks import positive
from harness.suite._devices import device_kind, kernel_specs
from harness.suite._inputs import CaptureArgs
from harness.suite._models import DEFAULT_TEXT, default_layers
from harness.suite._shapes import ShapeArgs

__all__ = ["FLOOR_KERNELS", "MODEL_ERROR_DEFAULTS", "model_error_kernels", "model_error_config"]


# The second correct BF16 kernel of `bench error --model` (the noise floor), by device: the first of these
# not among the kernels under test. On the CPU torch's SDPA, then the fp64 reference on the bf16 inputs.
FLOOR_KERNELS = {"cuda": ("sdpa-cudnn", "sdpa-flash", "triton-bf16"), "rocm": ("sdpa-flash", "sdpa-efficient"),
                 "cpu": ("sdpa-cpu", "reference-fp64")}
# Documents x tokens of `bench error --model`: on a GPU 24 documents of 1024 tokens (pydoc has 26 that long);
# on the CPU a dry run of 4 x 128. A forward pass stacks at most `tokens` tokens of documents (at least one
# document): 8 x 1024 on a GPU, 4 x 128 on the CPU. The cap is in tokens, not documents, because a pass's memory
# grows with them (the logits alone are tokens x vocabulary in fp32: 12.9 GB for 8 x 8192 of SmolLM2's 49152, and
# an emulated recipe's P per head is S^2) and because rows are written after each pass: at 8192 tokens a pass is
# one document, so a run stopped at its time limit keeps every document it finished. Every layer on a GPU (a
# forward of SmolLM2 is milliseconds there); an early and a middle one on the CPU.
MODEL_ERROR_DEFAULTS = {"gpu": dict(seq_len=1024, documents=24, tokens=8192),
                        "cpu": dict(seq_len=128, documents=4, tokens=512)}


def model_error_kernels(names: Sequence[str], *, device: str, floor: str | None = None, layout: str | None = None,
                        gqa: str | None = None, reference: str | None = None) -> tuple[tuple[str, ...], str]:
    """(kernels under test, floor kernel) of `bench error --model`: the named kernels and `floor` (or the first
    of FLOOR_KERNELS[device] not under test and not the --reference kernel); with none named, the device's
    default kernels but the floor."""
    kernels = kernel_specs(names, device=device, layout=layout, gqa=gqa)
    candidates = [c for c in FLOOR_KERNELS[device_kind(device)] if c != reference]
    if floor is None:
        # no kernel named: the device's other default kernels against its first; else the first not under test
        floor = candidates[0] if not names else next((c for c in candidates if c not in kernels), candidates[0])
    if reference is not None and reference == floor:
        raise ConfigError(f"--reference {reference} and --floor {floor} are one kernel: the band of BF16 noise needs "
                          f"two different correct BF16 kernels. Give --floor another one.")
    return tuple(k for k in kernels if k not in (floor, reference)) or (floor,), floor


def model_error_config(*, model: str, device: str, shape: ShapeArgs, capture: CaptureArgs, documents: int | None,
                       all_layers: bool, results: Path, name: str | None, command: str, reference: str | None = None,
                       per_layer: bool = True):
    """The frozen ModelErrorConfig of `bench error --model`, every default decided here; options that do not
    apply to a model run (synthetic shapes, controls, stacked windows, recapture) are refused by name."""
    ignored = shape.given(but=("seq_len",))
    unused = [flag for flag, v in (("--control", capture.controls), ("--windows", capture.windows),
                                   ("--capture-device", capture.capture_device), ("--recapture", capture.recapture),
                                   ("--allow-random-weights", capture.allow_random_weights)) if v]
    if ignored or unused:
        bad = ignored + unused
        raise ConfigError(f"{', '.join(bad)} do(es) not apply to `bench error --model`, which runs the model itself over "
                          f"whole documents (its own shapes, no controls, nothing captured). Drop {', '.join(bad)}, or "
                          f"add --per-call for the error of one attention call on the model's captured layers.")
    positive(shape.one("seq_len"), "--seq-len")
    positive(documents, "--documents")
    spec = resolve_model(model)
    defaults = MODEL_ERROR_DEFAULTS["cpu" if device_kind(device) == "cpu" else "gpu"]
    seq_len = min(shape.one("seq_len") or defaults["seq_len"], spec.max_positions)
    if not per_layer:
        if capture.layers:
            raise ConfigError(f"--layer {','.join(map(str, capture.layers))} and --no-per-layer contradict: drop one.")
        layers = ()
    elif capture.layers:
        layers = tuple(capture.layers)
    else:
        layers = default_layers(spec.num_layers) if device_kind(device) == "cpu" else tuple(range(spec.num_layers))
    n = documents or defaults["documents"]
    return ModelErrorConfig(
        model=model, text=capture.text or DEFAULT_TEXT, weights=capture.weights, seq_len=seq_len, documents=n,
        batch=max(1, min(n, defaults["tokens"] // seq_len)), layers=layers, all_layers=all_layers, device=device,
        dtype=capture.capture_dtype, random_weights=capture.random_weights, results_root=Path(results),
        run_name=name, command=command, reference=reference or "fp64",
    )
