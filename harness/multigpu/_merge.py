"""Merging per-GPU runs into one run directory that every reader of a single run can read.

Layout of a merged run `<run>/`:
  runs.parquet, measurements/, chunks/, samples/, probes/   the merged tables (read_run reads them as usual)
  gpus/<gpu>/...                                           each GPU's own run, untouched, with multigpu.json

Every merged row's measurement id carries its GPU (see `_rows`); `config_index` is the suite's index, not
the worker's. The single runs row describes the set: `pci_bus_id` lists the GPUs (comma-separated),
device facts shared by all GPUs are kept and differing ones left empty (each GPU's own runs row under
gpus/ has them), `telemetry_json` and `busy_processes_json` map GPU -> value, and `config_json` holds
`"multigpu"`: the plan and the outcome of every GPU. A GPU whose run stopped early keeps its finished
measurements, and the merged run is then `incomplete`, with the reason in `status_detail`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from harness.errors import ExitCode, ResultsError
from harness.multigpu._plan import SIDECAR
from harness.multigpu._slurm import task_logs
from harness.results import (
    TABLES,
    RunWriter,
    columns,
    gpu_dirname,
    gpu_label,
    gpu_measurement_id,
    read_rows,
    to_json,
    with_gpu,
)

__all__ = ["MERGE_EXIT", "GpuOutcome", "MultiResult", "Piece", "merge_exit_code", "merge_pieces", "merge_runs",
           "piece_labels", "read_piece"]

# `bench merge`'s exit status by the merged run's status: harness.errors.ExitCode, as for every command
# (2 bad input, 3 an internal error, 4 a run that ended failed, 5 one that ended incomplete).
MERGE_EXIT = {"complete": int(ExitCode.OK), "failed": int(ExitCode.RUN_FAILED), "incomplete": int(ExitCode.RUN_INCOMPLETE)}

_CONFIG_PREFIX = re.compile(r"^([cb])(\d+)-")
_SHARED = ("device_kind", "device_name", "driver", "runtime", "compute_capability", "sm_count", "memory_bytes",
           "power_limit_w", "max_sm_clock_mhz", "telemetry_backend", "harness_version", "git_commit", "host", "os",
           "python", "versions_json", "kernel_sources_json", "protocol_json")


@dataclass(frozen=True, kw_only=True)
class Piece:
    """One GPU's run directory and where its configurations sit in the suite."""

    path: Path
    gpu_id: str
    host: str | None = None
    config_indices: tuple[int, ...] | None = None  # suite index of each of the run's config_index; None: as stored
    suite_size: int | None = None
    mode: str | None = None
    task: int | None = None
    tasks: int | None = None


@dataclass(frozen=True, kw_only=True)
class GpuOutcome:
    """What became of one GPU: its run's status, or why it ran nothing (busy, error, idle)."""

    gpu: str
    status: str
    detail: str = ""
    run_dir: Path | None = None
    config_indices: tuple[int, ...] = ()
    measurements: int = 0
    device_name: str | None = None


@dataclass(kw_only=True)
class MultiResult:
    """A merged run. `measurements` are its rows, each with a `gpu` key added."""

    run_id: str
    path: Path
    status: str
    status_detail: str
    gpus: tuple[GpuOutcome, ...]
    measurements: list[dict] = field(default_factory=list)


def merge_exit_code(status: str) -> int:
    """0 for a complete merged run, 4 failed (no measurement timed), 5 incomplete."""
    return MERGE_EXIT.get(status, MERGE_EXIT["incomplete"])


def _log_hint(path: Path) -> str:
    """Where a Slurm task said why it wrote no run: its log(s), with the last line of each."""
    logs = task_logs(path)
    if not logs:
        return ""

    def last(log: Path) -> str:
        lines = [x for x in log.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()]
        return lines[-1].strip() if lines else "(empty)"

    return " The task's log says why: " + "; ".join(f"{log}: {last(log)}" for log in logs[:4]) + (
        f" (and {len(logs) - 4} more in {logs[0].parent})" if len(logs) > 4 else "") + "."


def read_piece(path: Path | str) -> Piece:
    """A run directory as a piece: its multigpu.json when a worker wrote one, else its runs row."""
    path = Path(path)
    if not path.exists() and any(c in str(path) for c in "*?["):
        hint = _log_hint(path) or (f" Look at the job's logs/ folder beside {path.parent}." if
                                   path.parent.name == "tasks" else "")
        raise ResultsError(f"{path} does not exist: the shell passed the pattern unexpanded because nothing matched "
                           f"it, so no task wrote a run directory.{hint}")
    if not (path / "runs.parquet").is_file():
        hint = _log_hint(path) or " Pass directories that `bench sustained` or a `bench slurm` task wrote."
        raise ResultsError(f"{path} is not a run directory: it has no runs.parquet (a task that stopped before its "
                           f"first table, e.g. on an import error, leaves only the folder).{hint}")
    sidecar = path / SIDECAR
    if sidecar.is_file():
        s = json.loads(sidecar.read_text(encoding="utf-8"))
        return Piece(path=path, gpu_id=s["gpu_id"], host=s.get("host"), config_indices=tuple(s["config_indices"]),
                     suite_size=s.get("suite_size"), mode=s.get("mode"), task=s.get("task"), tasks=s.get("tasks"))
    info = read_rows(path, "runs")[0]
    gpu = info.get("pci_bus_id") or (info.get("device_kind") or "device")
    return Piece(path=path, gpu_id=gpu, host=info.get("host"))


def _same(values: list):
    distinct = {json.dumps(v, sort_keys=True, default=str) for v in values}
    return values[0] if len(distinct) == 1 else None


def _one(values: list[str | None]) -> str | None:
    present = list(dict.fromkeys(v for v in values if v))
    return " | ".join(present) or None


def _write_piece(writer, piece: Piece, label: str, used: set[str]) -> list[dict]:
    """Append one GPU's measurements (and their chunks, samples, probes) to the merged run."""
    parts: dict[str, dict[str, list[dict]]] = {}
    for t in ("chunks", "samples", "probes"):
        for r in read_rows(piece.path, t):
            parts.setdefault(t, {}).setdefault(r["measurement_id"], []).append(r)
    # If the schema gains a `gpu` column (proposed), the merge fills it; until then the id carries the GPU.
    gpu_column = "gpu" in columns("measurements")
    rows = []
    for m in read_rows(piece.path, "measurements"):
        local = m["measurement_id"]
        config_index = m["config_index"]
        if piece.config_indices is not None:
            if not 0 <= config_index < len(piece.config_indices):
                raise ResultsError(f"{piece.path}: measurement {local} has config_index {config_index}, outside the "
                                   f"{len(piece.config_indices)} configuration(s) of its {SIDECAR}.")
            config_index = piece.config_indices[config_index]
        # The runner's ids start with the worker's configuration index (`c1-...`, `b1-...` for bursts): give
        # them the suite's, so an id reads the same as its row's config_index.
        new = gpu_measurement_id(label, _CONFIG_PREFIX.sub(rf"\g<1>{config_index}-", local, count=1))
        first, n = new, 1
        while new in used:  # the same GPU measured the same configuration twice (two Slurm tasks): keep both
            n += 1
            new = f"{first}~{n}"
        used.add(new)
        tables = {t: [{**r, "measurement_id": new} for r in parts.get(t, {}).get(local, [])]
                  for t in ("chunks", "samples", "probes")}
        row = {**m, "measurement_id": new, "config_index": config_index, **({"gpu": label} if gpu_column else {})}
        writer.append_measurement(measurement=row, **tables)
        rows.append({**row, "run_id": writer.run_id})
    return rows


def merge_pieces(writer, pieces: Sequence[Piece], *, header: Mapping | None = None,
                 not_run: Sequence[GpuOutcome] = (), stopped: Mapping[Path, str] | None = None,
                 suite_size: int | None = None, mode: str | None = None) -> MultiResult:
    """Write `pieces` into the run `writer` opened, with one runs row describing the set, and return it.

    `not_run` are GPUs that ran nothing (busy, failed to start); `stopped` maps a piece's path to why its
    worker ended early (from the orchestrator). `suite_size` is the number of configurations the suite had;
    any of them with no row makes the merged run incomplete.
    """
    stopped = dict(stopped or {})
    infos = [read_rows(p.path, "runs")[0] for p in pieces]
    protocols = {i.get("protocol_json") for i in infos}
    if len(protocols) > 1:
        raise ResultsError("The runs to merge used different protocols (runs.protocol_json differs); a merged run "
                           f"would mix them. Merge runs of one job: {', '.join(str(p.path) for p in pieces)}.")
    sizes = {p.suite_size for p in pieces if p.suite_size is not None}
    if len(sizes) > 1:
        raise ResultsError(f"The runs to merge come from suites of different sizes {sorted(sizes)}: not one job.")
    suite_size = suite_size if suite_size is not None else (sizes.pop() if sizes else None)
    labels = piece_labels(pieces)
    used: set[str] = set()
    rows: list[dict] = []
    outcomes: list[GpuOutcome] = []
    problems: list[str] = []
    for piece, run_info, label in zip(pieces, infos, labels):
        written = _write_piece(writer, piece, label, used)
        rows += written
        status, detail = run_info.get("status") or "?", run_info.get("status_detail") or ""
        if status == "running":
            status, detail = "incomplete", stopped.get(piece.path) or (
                "its run is still marked running: the worker died, or the task has not finished")
        elif piece.path in stopped and stopped[piece.path] not in detail:
            detail = "; ".join(x for x in (detail, stopped[piece.path]) if x)
        indices = piece.config_indices if piece.config_indices is not None else tuple(
            sorted({r["config_index"] for r in written}))
        outcomes.append(GpuOutcome(gpu=label, status=status, detail=detail, run_dir=piece.path,
                                   config_indices=indices, measurements=len(written),
                                   device_name=run_info.get("device_name")))
        if status != "complete":
            problems.append(f"GPU {label}: {status} after {len(written)} measurement(s)" + (f" ({detail})" if detail else ""))
    for o in not_run:
        outcomes.append(o)
        problems.append(f"GPU {o.gpu} {o.status}: {o.detail}" if o.status != "idle" else f"GPU {o.gpu}: nothing to run")
    covered = {r["config_index"] for r in rows}
    missing = sorted(set(range(suite_size)) - covered) if suite_size is not None else []
    if missing:
        problems.append(f"configurations {missing} of {suite_size} have no measurement")
    task_counts = {p.tasks for p in pieces if p.tasks is not None}
    absent = sorted(set(range(task_counts.pop())) - {p.task for p in pieces}) if len(task_counts) == 1 else []
    if absent:
        problems.append(f"tasks {absent} produced no run")
    pieces_complete = all(o.status == "complete" for o in outcomes if o.run_dir is not None)
    # A GPU skipped because it was busy loses nothing when its configurations went to the others: the run is
    # complete then, and the skip is still said in status_detail.
    if not any(r.get("status") in ("ok", "unsettled") for r in rows):
        status = "failed"
    elif pieces_complete and not missing and not absent:
        status = "complete"
    else:
        status = "incomplete"
    detail = "; ".join(problems)
    info = _merged_info(infos, labels, outcomes, header=dict(header or {}), mode=mode, suite_size=suite_size,
                        to_json=to_json, root=Path(writer.path))
    info.update(status=status, status_detail=detail, finished_at=datetime.now(timezone.utc).isoformat())
    writer.write_run(info)
    writer.compact()  # the merged run's parts, one file per table, as every run that ends
    return MultiResult(run_id=writer.run_id, path=Path(writer.path), status=status, status_detail=detail,
                       gpus=tuple(outcomes), measurements=with_gpu(rows))


def piece_labels(pieces: Sequence[Piece]) -> list[str]:
    """The device label of each piece in a merged run: its GPU (with the host when pieces span hosts).

    Pieces on one device that measured the same configurations (two CPU tasks with --replicate, or one GPU
    twice) are kept apart as `<gpu>~task<N>` (or `~<k>`): pooling them would hide the spread between them.
    """
    with_host = len({p.host for p in pieces}) > 1
    base = [gpu_label(gpu_id=p.gpu_id, host=p.host, with_host=with_host) for p in pieces]
    labels = list(base)
    for label in dict.fromkeys(base):
        group = [i for i, b in enumerate(base) if b == label]
        sets = [pieces[i].config_indices for i in group]
        if len(group) < 2 or (None not in sets and len(set().union(*sets)) == sum(len(s) for s in sets)):
            continue  # one piece, or shards of one device that never measured the same configuration
        tasks = [pieces[i].task for i in group]
        by_task = None not in tasks and len(set(tasks)) == len(tasks)
        for k, i in enumerate(group):
            labels[i] = f"{label}~task{tasks[k]}" if by_task else f"{label}~{k + 1}"
    return labels


def _merged_info(infos, labels, outcomes, *, header: dict, mode, suite_size, to_json, root: Path) -> dict:
    info: dict = {k: _same([i.get(k) for i in infos]) for k in _SHARED} if infos else {}
    if infos:
        info["device_name"] = info.get("device_name") or _one([i.get("device_name") for i in infos])
        info["started_at"] = min((i.get("started_at") or "" for i in infos), default=None) or None
        info["git_dirty"] = any(bool(i.get("git_dirty")) for i in infos)
        info["allow_busy"] = any(bool(i.get("allow_busy")) for i in infos)
        info["command"] = infos[0].get("command")
        info["config_json"] = infos[0].get("config_json")
    info["device_index"] = infos[0].get("device_index") if len(infos) == 1 else None
    info["pci_bus_id"] = ",".join(dict.fromkeys(labels)) or None
    info["telemetry_json"] = to_json({lab: json.loads(i.get("telemetry_json") or "null") for lab, i in zip(labels, infos)})
    info["busy_processes_json"] = to_json({lab: json.loads(i.get("busy_processes_json") or "[]")
                                           for lab, i in zip(labels, infos)})

    def rel(p: Path | None) -> str | None:
        if p is None:
            return None
        try:
            return str(Path(p).resolve().relative_to(root.resolve()))
        except ValueError:
            return str(p)

    manifest = {"mode": mode, "suite_size": suite_size, "gpus": [
        {"gpu": o.gpu, "status": o.status, "detail": o.detail, "run_dir": rel(o.run_dir),
         "config_indices": list(o.config_indices), "measurements": o.measurements, "device_name": o.device_name}
        for o in outcomes]}
    config = json.loads(header.pop("config_json", None) or info.get("config_json") or "{}")
    info["config_json"] = to_json({**config, "multigpu": manifest})
    devices = len({label.split("~")[0] for label in labels})
    tasks = header.pop("tasks", None)
    note = (f"merged run of {len(labels)} run(s)" + (f" of {tasks} Slurm task(s)" if tasks else "")
            + f" on {devices} device(s) ({mode or 'merge'}); each run is under gpus/")
    info["notes"] = header.pop("notes", None) or note
    info.update({k: v for k, v in header.items() if v is not None})
    return info


def merge_runs(run_dirs: Sequence[Path | str], *, out: Path | str, command: str = "") -> MultiResult:
    """Join run directories (Slurm tasks, or runs of one suite on several GPUs) into one run at `out`.

    Each run is copied to `out/gpus/`, so the merged run stands alone. A task that stopped early keeps its
    finished measurements and makes the merged run incomplete, as does a task or configuration that is absent.

    >>> merge_runs([], out="/tmp/nowhere")
    Traceback (most recent call last):
    ...
    harness.errors.ResultsError: Nothing to merge: name the run directories to join.
    """
    if not run_dirs:
        raise ResultsError("Nothing to merge: name the run directories to join.")
    pieces = [read_piece(d) for d in run_dirs]
    seen = set()
    for p in pieces:
        key = Path(p.path).resolve()
        if key in seen:
            raise ResultsError(f"{p.path} is named twice; each run is merged once.")
        seen.add(key)
    out = Path(out).absolute()
    if out.exists():
        raise ResultsError(f"{out} exists; `bench merge` writes a new run directory. Choose another --out.")
    for key in seen:  # a copy into its own source would copy itself again, level after level (an --out
        # around an input exists already, refused above)
        if key in out.resolve().parents:
            raise ResultsError(f"--out {out} is inside the run directory {key} it would merge: the merged run copies "
                               f"each input, so outputs never go inside inputs. Choose an --out outside every run "
                               f"directory named.")
    for p in pieces:  # every input read through first: a damaged file is named where the user put it, and
        for table in TABLES:  # refused before --out is made (it was found in the copy, with --out half-written)
            read_rows(p.path, table)
    writer = RunWriter(out.parent, out.name)
    try:
        gpus = out / "gpus"
        gpus.mkdir()
        with_host = len({p.host for p in pieces}) > 1
        copied = []
        for p in pieces:
            name = gpu_dirname(gpu_label(gpu_id=p.gpu_id, host=p.host, with_host=with_host))
            name += f"-task{p.task:04d}" if p.task is not None else ""
            dest, n = gpus / name, 1
            while dest.exists():
                n += 1
                dest = gpus / f"{name}-{n}"
            shutil.copytree(p.path, dest)
            copied.append(replace(p, path=dest))
        modes = {p.mode for p in pieces if p.mode}
        tasks = {p.task for p in copied if p.task is not None}
        return merge_pieces(writer, copied, header={"command": command or None, "tasks": len(tasks) or None},
                            mode=modes.pop() if len(modes) == 1 else "merge")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # no half-written merged run is left to be read as one
        raise
