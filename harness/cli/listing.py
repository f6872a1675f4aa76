"""`bench doctor` and `bench list kernels|models|inputs|telemetry|runs`: what this machine can measure.

Each takes `--json PATH` (`-` for stdout, the table then on stderr): the same rows as data
(`harness/report/machine.schema.json`), so a CI job can check a machine before it spends GPU time on it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.capture import MODELS
from harness.cli.common_args import console, fail
from harness.cli.paths import check_writable
from harness.doctor import device_missing, diagnose
from harness.errors import ExitCode, HarnessError, ResultsError
from harness.inputs import SYNTHETIC_SOURCES
from harness.kernels import default_registry, kernel_rows
from harness.report import ReportTable, machine_document, write_figures
from harness.results import read_rows, run_process_state
from harness.suite import RESULTS_ROOT, device_kind, machine_device

__all__ = ["doctor", "list_models", "list_kernels", "list_inputs", "list_runs", "list_telemetry", "TELEMETRY_BACKENDS"]

def _json_option():
    return typer.Option(None, "--json", metavar="PATH", help="also write the rows as JSON (schema harness/report/"
                                                             "machine.schema.json); - for stdout (the table goes to "
                                                             "stderr)")


def _emit(json_out: str | None, command: str, items: list[dict], **fields):
    """Write the JSON document where --json says (checked first), and return the console the table goes to."""
    if json_out and json_out != "-":
        check_writable("--json", Path(json_out))
    doc = machine_document(command, items, **fields)
    out = console(stderr=json_out == "-")
    if json_out:
        for path in write_figures(doc, json_path=json_out):
            out.print(f"json: {path}", highlight=False)
    return out


TELEMETRY_BACKENDS = (
    ("nvml", "NVIDIA GPUs through pynvml (nvidia-ml-py): SM clock, power, energy, temperature, limiters, GPM"),
    ("amdsmi", "AMD Instinct GPUs through amdsmi: per-XCD clocks, socket power, energy, residency limiters "
               "(not yet run on AMD hardware)"),
    ("host", "the CPU through Linux sysfs: frequency, RAPL energy, temperature where exposed"),
    ("replay", "plays back a recorded samples file; for tests and offline analysis only"),
    ("none", "no telemetry: times only"),
)


def list_models(json_out: Optional[str] = _json_option()) -> None:
    """Models whose attention inputs can be captured."""
    items = [{"name": m.name, "source": m.hf_id or m.wheel or "", "layers": m.num_layers, "heads_q": m.heads_q,
              "heads_kv": m.heads_kv, "head_dim_qk": m.head_dim_qk, "head_dim_v": m.head_dim_v,
              "max_positions": m.max_positions, "attention_kind": m.attention_kind, "qk_norm": bool(m.qk_norm)}
             for m in MODELS.values()]
    out = _emit(json_out, "list models", items)
    t = Table(title="models", title_justify="left")
    for c in ("name", "source", "layers", "Hq/Hkv", "dqk/dv", "max S", "kind"):
        t.add_column(c)
    for m in items:
        t.add_row(m["name"], m["source"], str(m["layers"]), f"{m['heads_q']}/{m['heads_kv']}",
                  f"{m['head_dim_qk']}/{m['head_dim_v']}", str(m["max_positions"]),
                  m["attention_kind"] + (" +qk-norm" if m["qk_norm"] else ""))
    out.print(t)


def doctor(device: Optional[str] = typer.Option(None, help="device to check (default: this machine's own, cuda:0 where PyTorch sees a CUDA "
                                                           "GPU, rocm:0 on its ROCm build, else cpu); "
                                                           "exit 2 when it cannot be used here"),
           json_out: Optional[str] = _json_option()) -> None:
    """What this machine can measure, and what is missing; exit 2 when the device named is missing (a CI preflight)."""
    checks = diagnose(device=device)
    missing = device_missing(checks)
    code = ExitCode.USAGE if missing else ExitCode.OK
    checked = next((c.detail.removeprefix("checking ") for c in checks if c.name == "device"), device)
    try:
        out = _emit(json_out, "doctor", [{"name": c.name, "status": c.status, "detail": c.detail} for c in checks],
                    device=checked, device_missing=missing, exit_code=code)
    except HarnessError as exc:
        fail(exc)
    t = Table(title="bench doctor", title_justify="left")
    for c in ("check", "status", "detail"):
        t.add_column(c, overflow="fold")
    colors = {"ok": "green", "missing": "red", "warn": "yellow", "info": "cyan"}
    for c in checks:
        t.add_row(c.name, f"[{colors[c.status]}]{c.status}[/]", c.detail)
    out.print(t)
    if missing:
        text = (f"--device {checked} cannot be used on this machine ({missing}). Nothing can be measured there: run on "
                f"a machine that has it, or name another --device.")
        console(stderr=True).print(f"[bold red]error:[/] {escape(text)}", highlight=False)
        raise typer.Exit(code)


def list_kernels(device: Optional[str] = typer.Option(None, help="device to check availability on: cpu, cuda, rocm "
                                                                    "(default: this machine's own, cuda:0 where PyTorch "
                                                                    "sees a CUDA GPU, rocm:0 on its ROCm build, else "
                                                                    "cpu)"),
                 json_out: Optional[str] = _json_option()) -> None:
    """Every registered kernel: what it computes (dense, decode, paged, varlen, window, mla), and whether it runs here."""
    try:
        kind = device_kind(device or machine_device())
        reg = default_registry()
        rows = kernel_rows(reg, kind)
        out = _emit(json_out, "list kernels", rows, device=kind)
    except HarnessError as exc:
        fail(exc)
    t = Table(title="kernels", title_justify="left",
              caption="computes: dense = self-attention (S_q = S_kv); decode = S_q < S_kv (a KV cache); paged = a page "
                      "table; varlen = sequences of different lengths; window = a sliding window; mla = MLA's absorbed "
                      "form (--mla). A run that asks for more is refused before it starts.", caption_justify="left")
    for c in ("name", "computes", "dtypes", "head dims", "devices", f"available ({kind})", "description"):
        t.add_column(c, overflow="fold")
    for r in rows:
        dims = "any" if r["head_dims"] is None else ", ".join(f"{a}/{b}" if a != b else str(a) for a, b in r["head_dims"])
        t.add_row(r["name"], ", ".join(r["computes"]), ", ".join(r["dtypes"]), dims, ", ".join(r["devices"]),
                  "[green]yes[/]" if r["available"] else f"[red]no[/]: {r['unavailable_reason']}", r["description"])
    out.print(t)
    for spec, err in reg.plugin_errors.items():
        out.print(f"[red]plugin {spec} failed to load:[/] {err}")


def list_inputs(json_out: Optional[str] = _json_option()) -> None:
    """Synthetic input sources (captured activations: see `bench capture`)."""
    _lines(json_out, "list inputs", [{"name": k, "description": v} for k, v in SYNTHETIC_SOURCES.items()], width=16)


def list_telemetry(json_out: Optional[str] = _json_option()) -> None:
    """Telemetry backends."""
    _lines(json_out, "list telemetry", [{"name": n, "description": t} for n, t in TELEMETRY_BACKENDS], width=8)


def _lines(json_out, command: str, items: list[dict], *, width: int) -> None:
    try:
        out = _emit(json_out, command, items)
    except HarnessError as exc:
        fail(exc)
    for item in items:
        out.print(f"{item['name']:{width}} {item['description']}", highlight=False, markup=False, soft_wrap=True)


def list_runs(results: Path = typer.Option(RESULTS_ROOT, help="results root directory"),
              json_out: Optional[str] = _json_option()) -> None:
    """The runs under --results with how each ended; a run left `running` by a process that is gone says so."""
    try:
        if not results.is_dir():
            raise ResultsError(f"--results {results}: no such folder, so no runs. Name the folder runs were written to.")
        rows = []
        for run in sorted(d for d in results.iterdir() if (d / "runs.parquet").is_file()):
            try:
                info = read_rows(run, "runs")[0]
            except (HarnessError, IndexError) as exc:
                rows.append((run.name, "unreadable", "-", str(exc)))
                continue
            status, detail = info.get("status") or "?", info.get("status_detail") or ""
            if status == "running":
                state, words = run_process_state(run)
                status = {"gone": "running, process gone", "alive": "running"}.get(state, "running?")
                detail = "; ".join(x for x in (detail, words) if x)
            rows.append((run.name, status, (info.get("started_at") or "-")[:19], detail or "-"))
        out = _emit(json_out, "list runs", [{"run": r[0], "status": r[1], "started_utc": r[2], "detail": r[3]}
                                            for r in rows])
    except HarnessError as exc:
        fail(exc)
    out.print(ReportTable(title=f"runs under {results}", columns=("run", "status", "started (UTC)", "detail"),
                          rows=tuple(rows), left=4, prose_columns=("detail",)).to_rich())
