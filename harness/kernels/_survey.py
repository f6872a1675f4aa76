"""One call (`error_survey`) or many calls (`repro_survey`) of each kernel on each input, with every
kernel x input kept apart: a kernel that fails on one input is a row with its message, and the others go on.

Kernels, inputs and the device are resolved and checked as the runner does (`registry.get`,
`open_device`, `Kernel.check_supports`), so an unknown kernel, a dtype or head dim a kernel does not
support, or a device that is not there is refused before anything runs. Neither survey runs the
correctness gate: the error survey exists to report the error of kernels that may fail it, and the
reproducibility survey runs on any kernel. The rows are plain dicts (the `--json` schema of
`bench error` / `bench repro`).
"""

from __future__ import annotations

import math
import traceback
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from harness.devices import open_device
from harness.errors import ConfigError, HarnessError, InputError
from harness.inputs import check_finite, make_inputs
from harness.kernels._error import attention_error
from harness.kernels._registry import default_registry
from harness.kernels._repro import INTERFERERS, reproducibility

__all__ = ["ERROR_STAGES", "SurveySetup", "resolve_kernels", "set_up_survey", "error_survey", "repro_survey", "check_interferers"]

ERROR_STAGES = ("q", "k", "v", "input", "p", "accumulation", "kernel")


@dataclass(frozen=True, kw_only=True)
class SurveySetup:
    kernels: tuple
    device: object
    specs: tuple


def resolve_kernels(kernel_names: Sequence[str], *, registry=None) -> tuple:
    """The kernels by name (or `module:function`); an unknown one is refused before any input is made."""
    registry = registry or default_registry()
    return tuple(registry.get(name) for name in kernel_names)


def set_up_survey(kernels: Sequence, specs: Sequence, device: str) -> SurveySetup:
    """The opened device with the kernels and specs; refuses inputs a kernel does not support."""
    kernels = tuple(kernels)
    dev = open_device(device)
    for spec in specs:
        for k in kernels:
            k.check_supports(dtype=spec.dtype, head_dim_qk=spec.shape.head_dim_qk, head_dim_v=spec.shape.head_dim_v,
                             causal=spec.shape.causal, device_kind=dev.kind, shape=spec.shape)
    return SurveySetup(kernels=kernels, device=dev, specs=tuple(specs))


def check_interferers(modes: Sequence[str]) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(modes))
    unknown = [m for m in modes if m != "none" and m not in INTERFERERS]
    if unknown or not modes:
        known = ", ".join(f"{k} ({v})" for k, v in INTERFERERS.items())
        raise ConfigError(f"Unknown --interfere {', '.join(map(repr, unknown)) or '(none given)'}; "
                          f"use none (back-to-back launches) or {known}. Repeat the option for several.")
    return modes


def _materialized(specs, dev) -> Iterator[tuple]:
    """(spec, inputs, why) per spec, made as they are reached; `why` says why the inputs are unusable."""
    for spec in specs:
        inputs = make_inputs(spec, device=dev.torch_device)
        try:
            check_finite(inputs)
            why = None
        except InputError as exc:
            why = str(exc)
        yield spec, inputs, why


def _attempt(fn, *args, **kwargs):
    """(fn(...), None), or (None, the message) when it raises: one kernel's failure must not stop the others. The
    kernel runs in this process, so its sys.exit (or another BaseException that is not Ctrl-C or a stop signal) is
    its row too, never the command's exit status."""
    try:
        return fn(*args, **kwargs), None
    except HarnessError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel's own crash (compile error, CUDA error) is reported as its row
        return None, f"{type(exc).__name__}: {exc}"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit in kernel code
        tb = traceback.extract_tb(exc.__traceback__)
        at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        what = (f"called sys.exit({'' if exc.code is None else repr(exc.code)})" if isinstance(exc, SystemExit)
                else f"raised {type(exc).__name__} (a BaseException, not an Exception)")
        return None, f"it {what}{at}, which would have ended the command; the other kernels went on"


def _common(kernel: str, spec) -> dict:
    return {"kernel": kernel, "input": spec.label, "source": spec.source, "shape": spec.shape.label(),
            "dtype": spec.dtype, "seed": spec.seed}


def _error_row(kernel: str, spec, report, why: str | None) -> dict:
    row = {**_common(kernel, spec), "reference": None, "p_mode": None, "rel_rms": None, "max_abs": None,
           "cosine": None, "snr_db": None}
    for key in ERROR_STAGES:
        for figure in _FIGURES:
            row[f"{key}_{figure}"] = None
    row["vs_unquantized_rel_rms"] = row["vs_unquantized_max_abs"] = None
    row["error"] = why
    if report is not None:
        row.update(reference=report.reference, p_mode=report.p_mode, rel_rms=report.total.rel_rms,
                   max_abs=report.total.max_abs, cosine=_finite(report.total.cosine), snr_db=_finite(report.total.snr_db))
        for key, stage in report.stages.items():
            for figure in _FIGURES:
                row[f"{key}_{figure}"] = _finite(getattr(stage, figure))
        if report.vs_unquantized is not None:
            row["vs_unquantized_rel_rms"] = report.vs_unquantized.rel_rms
            row["vs_unquantized_max_abs"] = report.vs_unquantized.max_abs
    return row


_FIGURES = ("rel_rms", "max_abs", "cosine", "snr_db")  # per stage; rel_rms is the relative L2 error


def _finite(x):
    """JSON has no inf: an infinite SNR (no difference at all) is written as null."""
    return x if x is None or math.isfinite(x) else None


def _repro_row(kernel: str, spec, mode: str, launches: int, report, why: str | None) -> dict:
    row = {**_common(kernel, spec), "interfere": mode, "launches": launches, "differing": None,
           "first_differing": None, "max_abs_diff": None, "reproducible": None, "error": why}
    if report is not None:
        row.update(launches=report.launches, differing=report.differing, first_differing=report.first_differing,
                   max_abs_diff=report.max_abs_diff, reproducible=report.reproducible)
    return row


def _error_of(kernel, inputs):
    return attention_error(kernel, inputs, launch=kernel.prepare(inputs))


Status = Callable[[str], AbstractContextManager]  # e.g. rich's Console.status: a spinner around each step


def error_survey(setup: SurveySetup, *, status: Status | None = None) -> Iterator[tuple]:
    """Per input, as it is reached: (spec, one error row per kernel)."""
    status = status or (lambda text: nullcontext())
    for spec, inputs, bad in _materialized(setup.specs, setup.device):
        rows = []
        for k in setup.kernels:
            with status(f"error of {k.name} on {spec.label}"):
                report, why = (None, bad) if bad else _attempt(_error_of, k, inputs)
            rows.append(_error_row(k.name, spec, report, why))
        yield spec, rows


def repro_survey(setup: SurveySetup, *, launches: int, modes: Sequence[str], status: Status | None = None) -> list[dict]:
    """One row per kernel x input x interferer: launches whose output differs bitwise from the first."""
    status = status or (lambda text: nullcontext())
    rows = []
    for spec, inputs, bad in _materialized(setup.specs, setup.device):
        for k in setup.kernels:
            launch, why = (None, bad) if bad else _attempt(k.prepare, inputs)
            for mode in modes:
                with status(f"{launches} launches of {k.name} on {spec.label}, interferer {mode}"):
                    report, err = (None, why) if why else _attempt(
                        reproducibility, k, inputs, launches=launches, interfere=None if mode == "none" else mode,
                        launch=launch)
                rows.append(_repro_row(k.name, spec, mode, launches, report, err))
    return rows
