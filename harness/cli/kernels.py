"""`bench error` and `bench repro`: parse, build the suite through `harness.suite`, call the kernels'
surveys (`harness.kernels.error_survey` / `repro_survey`), render. `bench error --model M` runs the model
itself with its attention replaced by each kernel (`harness.capture.model_error`, stored as a run) and
prints the KL divergence of its next-token distribution (`harness.analysis.model_error_summary`).

A kernel that fails on one input gets a red row, its message is printed under the table, and the other
kernels and inputs go on; once everything is printed (and `--json` written, failed rows included with
their message) the command exits 2. `bench repro --fail-on-diff` exits 1 when every kernel ran and some
launch differed bitwise from the first.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.analysis import model_error_summary
from harness.capture import model_error
from harness.cli.common_args import (
    CAPTURE,
    SHAPE,
    SOURCES,
    capture_args,
    command_line,
    console,
    fail,
    shape_args,
    split_list,
    stopped,
    suite_inputs,
    with_options,
)
from harness.errors import ConfigError, HarnessError, ResultsError
from harness.kernels import (
    check_interferers,
    error_survey,
    repro_survey,
    reproducibility,
    resolve_kernels,
    set_up_survey,
)
from harness.report import MODEL_ERROR_NOTE, model_error_table
from harness.results import write_json_atomic
from harness.runner import stop_signals
from harness.suite import (
    FLOOR_KERNELS,
    MODEL_ERROR_DEFAULTS,
    RESULTS_ROOT,
    given_settings,
    kernel_specs,
    model_error_config,
    model_error_kernels,
    run_device,
)

# The defaults these commands quote and leave to their owner: the bootstrap's resamples and the repro's launches.
_RESAMPLES = inspect.signature(model_error_summary).parameters["resamples"].default
_REPRO_LAUNCHES = inspect.signature(reproducibility).parameters["launches"].default

__all__ = ["error", "repro"]

_JSON = typer.Option(None, "--json", help="also write the rows to this JSON file")
_STAGE_LABELS = {"q": "Q term", "k": "K term", "v": "V term", "input": "input term", "p": "P term",
                 "accumulation": "accum. term", "kernel": "kernel term"}
_ERROR_NOTE = (
    "rel L2 (= rel. RMS), cos sim, max |diff| and SNR: vs fp64 attention on what the kernel multiplies (FP8 and "
    "low-precision recipes: its quantized inputs, P unrounded). Stage terms, rel L2: Q, K, V (a recipe's operand "
    "quantized alone) and input (all three) vs fp64 on the unquantized inputs; P (P rounded as declared) vs the "
    "quantized inputs; accum. (the declared fp32 accumulation) on top of that; kernel: the kernel vs the whole "
    "emulation. --json adds each stage's max |diff|, cosine and SNR, and the error vs the unquantized inputs."
)


@with_options(sources=SOURCES, shape=SHAPE, capture=CAPTURE)
def error(
    sources: dict,
    shape: dict,
    capture: dict,
    json_path: Optional[Path] = _JSON,
    per_call: bool = typer.Option(False, "--per-call", help="with --model: the error of one attention call on the "
                                                             "model's captured layers, not the model-level KL"),
    documents: Optional[int] = typer.Option(None, help=f"--model: documents of --text, one window each (default "
                                                       f"{MODEL_ERROR_DEFAULTS['gpu']['documents']} on a GPU, "
                                                       f"{MODEL_ERROR_DEFAULTS['cpu']['documents']} on the CPU)"),
    floor: Optional[str] = typer.Option(None, help=f"--model: the second correct BF16 kernel, the noise floor "
                                                   f"(default {FLOOR_KERNELS['cuda'][0]} on CUDA, "
                                                   f"{FLOOR_KERNELS['cpu'][0]} on the CPU)"),
    reference: Optional[str] = typer.Option(None, help="--model: a correct BF16 kernel whose model is the reference "
                                                       "instead of fp64 attention (ZYFA's band: KL between the "
                                                       "reference's and the floor's models, upper 95 %)"),
    per_layer: bool = typer.Option(True, "--per-layer/--no-per-layer", help="--model: also the kernel in each layer "
                                                                           "alone (--layer's, default on)"),
    all_layers: bool = typer.Option(True, "--all-layers/--no-all-layers", help="--model: also the kernel in every "
                                                                               "layer at once (default on)"),
    results: Path = typer.Option(RESULTS_ROOT, help="--model: results root directory"),
    name: Optional[str] = typer.Option(None, help="--model: a name for the run id"),
    resamples: Optional[int] = typer.Option(None, min=100, help=f"--model: bootstrap resamples over documents (default "
                                                               f"{_RESAMPLES})"),
) -> None:
    """Error of one call of each kernel vs fp64 attention (FP8: by stage, input / P / kernel); with --model, the
    model run with its attention replaced by each kernel: KL of its next-token distribution vs fp64 attention."""
    suite = dict(sources=sources, shape=shape, capture=capture)
    if capture["model"] and not per_call:
        model_only = dict(documents=documents, floor=floor, all_layers=all_layers, results=results, name=name,
                          resamples=resamples, reference=reference, per_layer=per_layer)
        return _model_error(suite, json_path=json_path, **model_only)
    out = console()
    rows = []
    try:
        given = [f for f, v in (("--documents", documents), ("--floor", floor), ("--name", name),
                                ("--no-all-layers", not all_layers), ("--reference", reference),
                                ("--no-per-layer", not per_layer)) if v]
        if given:
            raise ConfigError(f"{', '.join(given)} belong(s) to the model-level error: add --model NAME (without "
                              f"--per-call), or drop {', '.join(given)}.")
        _check_writable(json_path)
        setup = _setup(out, suite)
        for spec, table_rows in error_survey(setup, status=out.status):
            rows.extend(table_rows)
            out.print(_error_table(spec, table_rows))
            _print_failures(out, table_rows)
        _write_json(json_path, rows)
    except HarnessError as exc:
        fail(exc)
    out.print(_ERROR_NOTE, style="dim", highlight=False)
    _finish(out, json_path, rows, what="kernel x input pair(s)")


def _model_error(suite: dict, *, json_path, documents, floor, all_layers, results, name, resamples,
                 reference=None, per_layer=True) -> None:
    """`bench error --model`: the run, then its figures (bootstrap over documents), one table."""
    out = console()
    src = suite["sources"]
    try:
        if src["input_"]:
            raise ConfigError("--input names synthetic inputs, but `bench error --model` runs the model over its "
                              "documents. Drop --input.")
        _check_writable(json_path)
        device = run_device(src["device"])
        names, floor_name = model_error_kernels(src["kernel"], device=device, floor=floor, layout=src["layout"],
                                                gqa=src["gqa"], reference=reference)
        kernels = resolve_kernels(names)
        try:
            (floor_kernel,) = resolve_kernels([floor_name])
        except HarnessError as exc:  # the floor is named by --floor (or its default): say which flag
            raise ConfigError(f"--floor {floor_name!r} (the second correct BF16 kernel the others are read against): "
                              f"{exc}") from None
        ref_kernel = resolve_kernels([reference])[0] if reference else None
        config = model_error_config(model=suite["capture"]["model"], device=device, shape=shape_args(suite["shape"]),
                                    capture=capture_args(suite["capture"]), documents=documents, all_layers=all_layers,
                                    results=results, name=name, command=command_line(), reference=reference,
                                    per_layer=per_layer)
        with stop_signals(), out.status("model error") as status:  # SIGTERM / SIGHUP end the run as Ctrl-C does
            result = model_error(config, kernels=kernels, floor=floor_kernel, reference=ref_kernel,
                                 progress=status.update)
        figures = model_error_summary(result.rows, **given_settings(resamples=resamples)) if result.rows else []
        against = "fp64 attention" if ref_kernel is None else f"{ref_kernel.name} attention (BF16)"
        title = (f"model error: {result.info.get('device_name')}, {config.documents} documents x {config.seq_len} tokens "
                 f"of {config.text}, vs the model with {against} (floor: {floor_kernel.name})")
        out.print(model_error_table(figures, title=title, caption="", failed=result.failures).to_rich())
        for why in result.failures.values():
            out.print(f"[red]failed:[/] {escape(why)}", highlight=False)
        _write_json(json_path, figures + [{"kernel": k, "error": why} for k, why in result.failures.items()])
    except KeyboardInterrupt as exc:
        raise typer.Exit(stopped(out, exc))
    except HarnessError as exc:
        fail(exc)
    out.print(MODEL_ERROR_NOTE, style="dim", highlight=False, markup=False)
    out.print(f"run: {result.path}", highlight=False)
    if json_path is not None:
        out.print(f"figures: {json_path}", highlight=False)
    if result.failures:  # as the per-call `bench error`: the kernel's failure is a user error, exit 2
        out.print(f"[bold red]{len(result.failures)} kernel(s) failed[/] (see above).", highlight=False)
        raise typer.Exit(2)


@with_options(sources=SOURCES, shape=SHAPE, capture=CAPTURE)
def repro(
    sources: dict,
    shape: dict,
    capture: dict,
    launches: Optional[int] = typer.Option(None, min=2, help=f"launches per kernel x input x interferer (the first is "
                                                             f"the reference; default {_REPRO_LAUNCHES})"),
    interfere: List[str] = typer.Option(["none", "gemm"], "--interfere", callback=split_list,
                                        help="between launches: none, gemm or attention (repeatable or comma-separated)"),
    fail_on_diff: bool = typer.Option(False, "--fail-on-diff", help="exit 1 if any launch differs bitwise from the first"),
    json_path: Optional[Path] = _JSON,
) -> None:
    """Launch each kernel many times on the same inputs and count outputs bitwise different from the first."""
    suite = dict(sources=sources, shape=shape, capture=capture)
    out = console()
    try:
        modes = check_interferers(interfere)
        _check_writable(json_path)
        setup = _setup(out, suite)
        rows = repro_survey(setup, launches=_REPRO_LAUNCHES if launches is None else launches, modes=modes,
                            status=out.status)
        out.print(_repro_table(rows))
        _print_failures(out, rows)
        _write_json(json_path, rows)
    except HarnessError as exc:
        fail(exc)
    _finish(out, json_path, rows, what="run(s)")
    differing = [r for r in rows if r["differing"]]
    if differing:
        out.print(f"[yellow]{len(differing)} of {len(rows)} runs not bitwise reproducible.[/]", highlight=False)
        if fail_on_diff:
            raise typer.Exit(1)


def _setup(out, suite: dict):
    """Kernels first (an unknown name is refused before any capture), then inputs, then the device."""
    src = suite["sources"]
    device = run_device(src["device"])
    if not src["kernel"]:  # the defaults follow the inputs' workload (decode, paged, ...): inputs first
        specs = suite_inputs(out, **suite)
        kernels = resolve_kernels(kernel_specs((), device=device, shapes=[s.shape for s in specs]))
        return set_up_survey(kernels, specs, device)
    kernels = resolve_kernels(kernel_specs(src["kernel"], device=device, layout=src["layout"], gqa=src["gqa"]))
    specs = suite_inputs(out, **suite)
    return set_up_survey(kernels, specs, device)


def _finish(out, json_path: Path | None, rows: list[dict], *, what: str) -> None:
    """Name the --json file; when a kernel failed on an input, say so and exit 2 (its row says why)."""
    if json_path is not None:
        out.print(f"rows: {json_path}", highlight=False)
    failed = [r for r in rows if r["error"]]
    if failed:
        out.print(f"[bold red]{len(failed)} {what} failed[/] (see above).", highlight=False)
        raise typer.Exit(2)


def _check_writable(path: Path | None) -> None:
    """Fail before any launch when the --json file's folder cannot be made."""
    if path is None:
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"Cannot write {path}: {exc}. Give --json a path in a writable folder.") from None


def _write_json(path: Path | None, rows: list[dict]) -> None:
    if path is None:
        return
    try:
        write_json_atomic(path, rows)
    except OSError as exc:
        raise ResultsError(f"Cannot write {path}: {exc}. Give --json a path in a writable folder.") from None


def _num(x) -> str:
    return "" if x is None else f"{x:.3g}"


def _error_table(spec, rows):
    t = Table(title=f"error vs fp64: {spec.label} ({spec.shape.label()}, {spec.dtype})", title_justify="left")
    t.add_column("kernel", overflow="fold")
    # stage columns no row fills (a BF16 kernel has none; an FP8 one no Q/K/V) are left out
    stages = [key for key in _STAGE_LABELS if any(r.get(f"{key}_rel_rms") is not None for r in rows)]
    for c in ("rel L2", "cos sim", "max |diff|", "SNR dB", *(_STAGE_LABELS[key] for key in stages)):
        t.add_column(c, justify="right", min_width=8, no_wrap=True)
    for r in rows:
        if r["error"]:
            t.add_row(r["kernel"], "failed", *[""] * (len(stages) + 3), style="red")
            continue
        t.add_row(r["kernel"], _num(r["rel_rms"]), _cos(r["cosine"]), _num(r["max_abs"]), _db(r["snr_db"]),
                  *(_num(r[f"{key}_rel_rms"]) for key in stages))
    return t


def _cos(x) -> str:
    """Cosine similarity to 7 places: 0.9999 and 0.99999 must read apart."""
    return "" if x is None else f"{x:.7f}"


def _db(x) -> str:
    return "" if x is None else f"{x:.1f}"


def _repro_table(rows):
    t = Table(title="reproducibility: outputs bitwise equal to the first launch's", title_justify="left")
    t.add_column("kernel", overflow="fold")
    t.add_column("input", overflow="fold")
    t.add_column("interferer", no_wrap=True)
    for c in ("launches", "differing", "first\ndiffering", "max\n|diff|"):
        t.add_column(c, justify="right", no_wrap=True, min_width=8)
    for r in rows:
        if r["error"]:
            t.add_row(r["kernel"], r["input"], r["interfere"], str(r["launches"]), "failed", "", "", style="red")
            continue
        first = "" if r["first_differing"] is None else str(r["first_differing"])
        t.add_row(r["kernel"], r["input"], r["interfere"], str(r["launches"]), str(r["differing"]), first,
                  _num(r["max_abs_diff"]), style="yellow" if r["differing"] else None)
    return t


def _print_failures(out, rows) -> None:
    seen = set()
    for r in rows:
        key = (r["kernel"], r["input"], r["error"])
        if r["error"] and key not in seen:
            seen.add(key)
            out.print(f"[red]{escape(r['kernel'])} on {escape(r['input'])}:[/] {escape(r['error'])}", highlight=False)
