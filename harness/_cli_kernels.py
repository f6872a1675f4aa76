"""`bench error` and `bench repro`: parse, build frozen input specs, call the library, render. No logic of their own.

`bench error` launches each kernel once per input and measures its error against fp64 attention on the
inputs it multiplies (`harness.kernels.attention_error`; for FP8 kernels also the error by stage);
`bench repro` launches it many times and compares the outputs bit for bit with the first
(`harness.kernels.reproducibility`). Neither runs the correctness gate: `error` exists to report the
error of kernels that may fail it, and `repro` runs on any kernel.

Kernels, inputs and the device are resolved and checked as the runner does (`registry.get`,
`open_device`, `Kernel.check_supports`), so an unknown kernel, a dtype or head dim a kernel does not
support, or a device that is not there exits 2 with its one-paragraph message before anything runs.
After that, a kernel that fails on one input (an error in prepare or launch, or inputs holding NaN or
Inf) gets a red row, its message is printed under the table, and the other kernels and inputs go on;
once everything is printed (and `--json` written, failed rows included with their message) the
command exits 2. `bench repro --fail-on-diff` exits 1 when every kernel ran and some launch differed
bitwise from the first.

The functions are registered on the `bench` app in `harness.cli` (`app.command("error")(error)`, ...).
"""

from __future__ import annotations

from pathlib import Path

import typer

from harness._cli_common import SUITE_OPTIONS as _OPT
from harness._cli_common import console as _console
from harness._cli_common import fail as _fail
from harness._cli_common import input_specs

__all__ = ["error", "repro"]

_JSON = typer.Option(None, "--json", help="also write the rows to this JSON file")
_STAGES = (("input", "input term"), ("p", "P term"), ("kernel", "kernel term"))
_ERROR_NOTE = (
    "rel. RMS and max |diff|: vs fp64 attention on what the kernel multiplies (FP8: its quantized inputs). "
    "Stage terms (FP8 kernels, and kernels declaring their P rounding): rel. RMS. --json adds the stages' "
    "max |diff| and, for FP8, the error vs the unquantized inputs."
)


def error(
    kernel: list[str] = _OPT["kernel"],
    input_: list[str] = _OPT["input_"],
    batch: int = _OPT["batch"],
    heads: int = _OPT["heads"],
    heads_kv: int | None = _OPT["heads_kv"],
    seq_len: int | None = _OPT["seq_len"],
    head_dim: int = _OPT["head_dim"],
    head_dim_v: int | None = _OPT["head_dim_v"],
    dtype: str = _OPT["dtype"],
    causal: bool = _OPT["causal"],
    seed: int = _OPT["seed"],
    device: str = _OPT["device"],
    model: str | None = _OPT["model"],
    layer: list[int] = _OPT["layer"],
    control: list[str] = _OPT["control"],
    text: str = _OPT["text"],
    weights: Path | None = _OPT["weights"],
    captures: Path = _OPT["captures"],
    json_path: Path | None = _JSON,
) -> None:
    """Error of one call of each kernel vs fp64 attention; for FP8 kernels by stage (input, P, kernel)."""
    from harness.errors import HarnessError

    console = _console()
    rows, failed = [], []
    try:
        _check_writable(json_path)
        kernels, dev, specs = _suite(console, kernel=kernel, input_=input_, batch=batch, heads=heads,
                                     heads_kv=heads_kv, seq_len=seq_len, head_dim=head_dim, head_dim_v=head_dim_v,
                                     dtype=dtype, causal=causal, seed=seed, device=device, model=model, layer=layer,
                                     control=control, text=text, weights=weights, captures=captures)
        for spec, inputs, bad in _materialized(specs, dev):
            table_rows = []
            for k in kernels:
                with console.status(f"error of {k.name} on {spec.label}"):
                    report, why = (None, bad) if bad else _attempt(_error_of, k, inputs)
                row = _error_row(k.name, spec, report, why)
                table_rows.append(row)
                if why:
                    failed.append(row)
            rows.extend(table_rows)
            console.print(_error_table(spec, table_rows))
            _print_failures(console, table_rows)
        if json_path is not None:
            _write_json(json_path, rows)
    except HarnessError as exc:
        _fail(exc)
    console.print(_ERROR_NOTE, style="dim", highlight=False)
    if json_path is not None:
        console.print(f"rows: {json_path}", highlight=False)
    if failed:
        console.print(f"[bold red]{len(failed)} kernel x input pair(s) failed[/] (see above).", highlight=False)
        raise typer.Exit(2)


def repro(
    kernel: list[str] = _OPT["kernel"],
    input_: list[str] = _OPT["input_"],
    batch: int = _OPT["batch"],
    heads: int = _OPT["heads"],
    heads_kv: int | None = _OPT["heads_kv"],
    seq_len: int | None = _OPT["seq_len"],
    head_dim: int = _OPT["head_dim"],
    head_dim_v: int | None = _OPT["head_dim_v"],
    dtype: str = _OPT["dtype"],
    causal: bool = _OPT["causal"],
    seed: int = _OPT["seed"],
    device: str = _OPT["device"],
    model: str | None = _OPT["model"],
    layer: list[int] = _OPT["layer"],
    control: list[str] = _OPT["control"],
    text: str = _OPT["text"],
    weights: Path | None = _OPT["weights"],
    captures: Path = _OPT["captures"],
    launches: int = typer.Option(200, min=2, help="launches per kernel x input x interferer (the first is the reference)"),
    interfere: list[str] = typer.Option(["none", "gemm"], "--interfere",
                                        help="between launches: none, gemm or attention (repeatable)"),
    fail_on_diff: bool = typer.Option(False, "--fail-on-diff", help="exit 1 if any launch differs bitwise from the first"),
    json_path: Path | None = _JSON,
) -> None:
    """Launch each kernel many times on the same inputs and count outputs bitwise different from the first."""
    from harness.errors import ConfigError, HarnessError
    from harness.kernels import reproducibility
    from harness.kernels._repro import INTERFERERS

    console = _console()
    rows, failed = [], []
    try:
        modes = tuple(dict.fromkeys(interfere))
        unknown = [m for m in modes if m != "none" and m not in INTERFERERS]
        if unknown or not modes:
            known = ", ".join(f"{k} ({v})" for k, v in INTERFERERS.items())
            raise ConfigError(f"Unknown --interfere {', '.join(map(repr, unknown)) or '(none given)'}; "
                              f"use none (back-to-back launches) or {known}. Repeat the option for several.")
        _check_writable(json_path)
        kernels, dev, specs = _suite(console, kernel=kernel, input_=input_, batch=batch, heads=heads,
                                     heads_kv=heads_kv, seq_len=seq_len, head_dim=head_dim, head_dim_v=head_dim_v,
                                     dtype=dtype, causal=causal, seed=seed, device=device, model=model, layer=layer,
                                     control=control, text=text, weights=weights, captures=captures)
        for spec, inputs, bad in _materialized(specs, dev):
            for k in kernels:
                launch, why = (None, bad) if bad else _attempt(k.prepare, inputs)
                for mode in modes:
                    with console.status(f"{launches} launches of {k.name} on {spec.label}, interferer {mode}"):
                        report, err = (None, why) if why else _attempt(
                            reproducibility, k, inputs, launches=launches, interfere=None if mode == "none" else mode,
                            launch=launch)
                    row = _repro_row(k.name, spec, mode, launches, report, err)
                    rows.append(row)
                    if err:
                        failed.append(row)
        console.print(_repro_table(rows))
        _print_failures(console, rows)
        if json_path is not None:
            _write_json(json_path, rows)
    except HarnessError as exc:
        _fail(exc)
    if json_path is not None:
        console.print(f"rows: {json_path}", highlight=False)
    if failed:
        console.print(f"[bold red]{len(failed)} run(s) failed[/] (see above).", highlight=False)
        raise typer.Exit(2)
    differing = [r for r in rows if r["differing"]]
    if differing:
        console.print(f"[yellow]{len(differing)} of {len(rows)} runs not bitwise reproducible.[/]", highlight=False)
        if fail_on_diff:
            raise typer.Exit(1)


# shared by both commands: the same kernels, inputs and device as `bench sustained`


def _suite(console, *, kernel, input_, batch, heads, heads_kv, seq_len, head_dim, head_dim_v, dtype, causal, seed,
           device, model, layer, control, text, weights, captures):
    """Kernels, the opened device and the input specs; refuses unknown kernels and unsupported inputs."""
    from harness.cli import _default_kernels
    from harness.devices import open_device
    from harness.kernels import default_registry

    registry = default_registry()
    kernels = [registry.get(name) for name in (tuple(kernel) or _default_kernels(device))]
    specs = input_specs(console, input_=input_, batch=batch, heads=heads, heads_kv=heads_kv, seq_len=seq_len,
                        head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype, causal=causal, seed=seed, device=device,
                        model=model, layer=layer, control=control, text=text, weights=weights, captures=captures)
    dev = open_device(device)
    for spec in specs:
        for k in kernels:
            k.check_supports(dtype=spec.dtype, head_dim_qk=spec.shape.head_dim_qk, head_dim_v=spec.shape.head_dim_v,
                             causal=spec.shape.causal, device_kind=dev.kind)
    return kernels, dev, specs


def _materialized(specs, dev):
    """(spec, inputs, why) per spec, made as they are reached; `why` says why the inputs are unusable."""
    from harness.errors import InputError
    from harness.inputs import check_finite, make_inputs

    for spec in specs:
        inputs = make_inputs(spec, device=dev.torch_device)
        try:
            check_finite(inputs)
            why = None
        except InputError as exc:
            why = str(exc)
        yield spec, inputs, why


def _error_of(kernel, inputs):
    from harness.kernels import attention_error

    return attention_error(kernel, inputs, launch=kernel.prepare(inputs))


def _attempt(fn, *args, **kwargs):
    """(fn(...), None), or (None, the message) when it raises: one kernel's failure must not stop the others."""
    from harness.errors import HarnessError

    try:
        return fn(*args, **kwargs), None
    except HarnessError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel's own crash (compile error, CUDA error) is reported as its row
        return None, f"{type(exc).__name__}: {exc}"


def _check_writable(path: Path | None) -> None:
    """Fail before any launch when the --json file's folder cannot be made."""
    from harness.errors import ResultsError

    if path is None:
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"Cannot write {path}: {exc}. Give --json a path in a writable folder.") from None


def _write_json(path: Path, rows: list[dict]) -> None:
    """The rows as a JSON list, atomically (temporary file, then rename). Non-finite numbers as NaN/Infinity."""
    import json
    import os
    import uuid

    from harness.errors import ResultsError

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(json.dumps(rows, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ResultsError(f"Cannot write {path}: {exc}. Give --json a path in a writable folder.") from None


def _common(kernel: str, spec) -> dict:
    s = spec.shape
    return {"kernel": kernel, "input": spec.label, "source": spec.source, "shape": s.label(), "dtype": spec.dtype,
            "seed": spec.seed}


def _error_row(kernel: str, spec, report, why: str | None) -> dict:
    row = {**_common(kernel, spec), "reference": None, "p_mode": None, "rel_rms": None, "max_abs": None}
    for key, _ in _STAGES:
        row[f"{key}_rel_rms"] = row[f"{key}_max_abs"] = None
    row["vs_unquantized_rel_rms"] = row["vs_unquantized_max_abs"] = None
    row["error"] = why
    if report is not None:
        row.update(reference=report.reference, p_mode=report.p_mode, rel_rms=report.total.rel_rms,
                   max_abs=report.total.max_abs)
        for key, stage in report.stages.items():
            row[f"{key}_rel_rms"], row[f"{key}_max_abs"] = stage.rel_rms, stage.max_abs
        if report.vs_unquantized is not None:
            row["vs_unquantized_rel_rms"] = report.vs_unquantized.rel_rms
            row["vs_unquantized_max_abs"] = report.vs_unquantized.max_abs
    return row


def _repro_row(kernel: str, spec, mode: str, launches: int, report, why: str | None) -> dict:
    row = {**_common(kernel, spec), "interfere": mode, "launches": launches, "differing": None,
           "first_differing": None, "max_abs_diff": None, "reproducible": None, "error": why}
    if report is not None:
        row.update(launches=report.launches, differing=report.differing, first_differing=report.first_differing,
                   max_abs_diff=report.max_abs_diff, reproducible=report.reproducible)
    return row


def _num(x) -> str:
    return "" if x is None else f"{x:.3g}"


def _error_table(spec, rows):
    from rich.table import Table

    t = Table(title=f"error vs fp64: {spec.label} ({spec.shape.label()}, {spec.dtype})", title_justify="left")
    t.add_column("kernel", overflow="fold")
    for c in ("rel RMS", "max |diff|", *(label for _, label in _STAGES)):
        t.add_column(c, justify="right", min_width=8)
    for r in rows:
        if r["error"]:
            t.add_row(r["kernel"], "failed", *[""] * (len(_STAGES) + 1), style="red")
            continue
        t.add_row(r["kernel"], _num(r["rel_rms"]), _num(r["max_abs"]), *(_num(r[f"{key}_rel_rms"]) for key, _ in _STAGES))
    return t


def _repro_table(rows):
    from rich.table import Table

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


def _print_failures(console, rows) -> None:
    seen = set()
    for r in rows:
        key = (r["kernel"], r["input"], r["error"])
        if r["error"] and key not in seen:
            seen.add(key)
            console.print(f"[red]{r['kernel']} on {r['input']}:[/] {r['error']}", highlight=False)
