"""What every run does before its first launch: resolve kernels, check support, open device and telemetry,
and describe itself in the runs row. Shared by the sustained runner and burst timing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from harness.devices import check_idle, open_device
from harness.errors import ConfigError, KernelError, UnknownKernelError
from harness.kernels import default_registry, kernel_provenance
from harness.results import git_state, host_facts, software_versions, to_json, tree_digest
from harness.runner._isolation import ChildDied, ChildHung, ChildKernel, isolated
from harness.runner._l2 import check_cold
from harness.runner._ready import ReportedFailure
from harness.runner._sizes import estimate_bytes, item_sizes
from harness.telemetry import create_sampler
from harness.workers import tolerate_pids

__all__ = ["RunSetup", "set_up_run", "start_children", "run_info_row", "config_row", "kernel_provenance",
           "check_memory", "CPU_TIMING_NOTE"]

CPU_TIMING_NOTE = ("CPU run: times are the host's, under the OS's own frequency scaling and whatever else the "
                   "machine ran (see contention); they are not sustained-clock GPU figures and say nothing about "
                   "a GPU")


@dataclass(kw_only=True)
class RunSetup:
    kernels: list
    device: object
    ident: object
    busy: list
    telemetry_name: str
    sampler: object
    contention: dict | None = None  # the host's load before the run (CPU runs); None where not checked
    executors: dict = dataclasses.field(default_factory=dict)  # kernel name -> its own process (runner._isolation)

    def close_executors(self) -> None:
        """End every kernel's own process (each is killed if it does not stop within seconds)."""
        for executor in self.executors.values():
            try:
                executor.close()
            except Exception:  # the run's ending must not stop at one child
                pass


def _available(device) -> tuple[int | None, int | None, str]:
    """(free, total, what) bytes of the memory inputs go to: the GPU's, or the host's available RAM."""
    if device.kind in ("cuda", "rocm"):
        try:
            import torch

            free, total = torch.cuda.mem_get_info(device.torch_device)
            return int(free), int(total), f"free on {device.spec}"
        except Exception:
            return None, None, ""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.split()[1:2]}
        return info.get("MemAvailable"), info.get("MemTotal"), "available host RAM"
    except (OSError, ValueError, IndexError):
        return None, None, ""


def _fmt_bytes(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def check_memory(config, device) -> None:
    """Refuse an input configuration that cannot fit, before anything is allocated."""
    free, total, what = _available(device)
    if free is None:
        return
    for spec in config.inputs:
        sizes = estimate_bytes(spec, gate=config.gate)
        need = sum(sizes.values())
        if need > free:
            s = spec.shape
            parts = ", ".join(f"{k} {_fmt_bytes(b)}" for k, b in sizes.items())
            raise ConfigError(
                f"Input {spec.label} at B={s.batch} Hq={s.heads_q} Hkv={s.heads_kv} S={s.seq_len} dqk={s.head_dim_qk} "
                f"dv={s.head_dim_v}{' (' + s.label() + ')' if s.features() else ''} {spec.dtype} needs about {_fmt_bytes(need)} ({parts}), more than the "
                f"{_fmt_bytes(free)} {what} (of {_fmt_bytes(total or 0)} total). Nothing was allocated. Lower "
                f"--batch, --seq-len (--seq-len-kv) or --heads."
            )


def set_up_run(config, *, registry=None, device=None, sampler=None, measurer=None, protocol=None) -> RunSetup:
    """Everything that can refuse the run does so here, before any GPU time is spent.

    Order matters: unknown kernels and unsupported inputs are found before the device is opened, and a
    busy GPU before telemetry starts. A kernel that runs in its own process (`runner._isolation`) is
    imported and described there; its child then waits for the run's first configuration.
    """
    kind = device.kind if device is not None else str(config.device).partition(":")[0]
    if measurer is not None:
        kernels, executors = start_children(config, registry=registry, measurer=measurer,
                                        protocol=protocol or config.protocol, device_kind=kind)
    else:
        kernels, executors = [(registry or default_registry()).get(name) for name in config.kernels], {}
    setup = RunSetup(kernels=kernels, device=None, ident=None, busy=[], telemetry_name="", sampler=None,
                     executors=executors)
    try:
        device = device or open_device(config.device)
        # Read at the end of the set-up: its work (torch's import in a fresh process) overlaps the interval.
        contention_before = start_contention(device)
        apply_threads(protocol or config.protocol)
        for spec in config.inputs:
            for k in kernels:
                k.check_supports(dtype=spec.dtype, head_dim_qk=spec.shape.head_dim_qk,
                                 head_dim_v=spec.shape.head_dim_v, causal=spec.shape.causal, device_kind=device.kind,
                                 shape=spec.shape)
        check_memory(config, device)
        if (protocol or config.protocol).l2 == "cold":
            check_cold(config.inputs, device)
        # This run's own kernel processes hold a context at most and run nothing while the run checks.
        checked = tolerate_pids(device, {e.pid for e in executors.values()}) if executors else device
        busy = check_idle(checked, allow_busy=config.allow_busy)
        ident = device.identity()
        telemetry_name = config.telemetry if config.telemetry != "auto" else device.default_telemetry()
        if sampler is None:
            sampler = create_sampler(telemetry_name, pci_bus_id=ident.pci_bus_id)
        contention = contention_before()
    except BaseException:
        setup.close_executors()
        raise
    setup.device, setup.ident, setup.busy, setup.telemetry_name = device, ident, busy, telemetry_name
    setup.sampler, setup.contention = sampler, contention
    return setup


def apply_threads(protocol) -> None:
    """torch's CPU threads as the protocol says (`threads`, `--threads`; None: left as they are). Each kernel's own
    process does the same (runner._child), so every process that runs a kernel runs it on as many threads."""
    if protocol.threads is not None:
        import torch

        torch.set_num_threads(protocol.threads)


def start_contention(device) -> Callable[[], dict | None]:
    """The host's load where the device can say (the CPU device), started now and read by the returned function
    (None where it is not checked): the work done in between overlaps the measurement's interval."""
    start = getattr(device, "start_contention", None)
    if start is None:
        return lambda: None

    def failed(exc: Exception) -> dict:  # recorded as not checked, with the reason; never a silent "none"
        return {"checked": False, "error": f"{type(exc).__name__}: {exc}"}

    try:
        finish = start()
    except Exception as exc:
        error = failed(exc)
        return lambda: error

    def read() -> dict | None:
        try:
            return finish()
        except Exception as exc:
            return failed(exc)

    return read


def run_info_row(config, setup: RunSetup, *, command: str, protocol) -> dict:
    """The runs row: what ran, where, with which code, software and protocol values."""
    package = Path(__file__).resolve().parent.parent
    commit, dirty = git_state(package)
    ident = setup.ident
    versions = {**software_versions(), "harness_tree_sha256": tree_digest(package)}
    return {
        "status": "running", "status_detail": "", "started_at": datetime.now(timezone.utc).isoformat(),
        "command": command, "harness_version": versions.get("harness"), "git_commit": commit, "git_dirty": dirty,
        "kernel_sources_json": to_json(kernel_provenance(setup.kernels)), **host_facts(),
        "versions_json": to_json(versions), "device_kind": ident.kind, "device_name": ident.name,
        "device_index": ident.index, "pci_bus_id": ident.pci_bus_id, "driver": ident.driver, "runtime": ident.runtime,
        "compute_capability": ident.compute_capability, "sm_count": ident.sm_count, "memory_bytes": ident.memory_bytes,
        "power_limit_w": ident.power_limit_w, "max_sm_clock_mhz": ident.max_sm_clock_mhz,
        "telemetry_backend": setup.telemetry_name, "protocol_json": to_json(protocol.as_dict()),
        "config_json": to_json({**config.to_dict(), "protocol": None}), "allow_busy": config.allow_busy,
        "busy_processes_json": to_json([dataclasses.asdict(p) for p in setup.busy]),
        "notes": config.notes,
        "contention_json": to_json({"before": setup.contention}) if setup.contention is not None else None,
        "timing_note": _cpu_note(protocol) if ident.kind == "cpu" else None,
        "machine_json": to_json(ident.machine()),
    }


def _cpu_note(protocol) -> str:
    threads = protocol.threads
    return CPU_TIMING_NOTE + (f"; torch ran on {threads} CPU thread{'s' if threads != 1 else ''} (--threads)"
                              if threads is not None else "; torch's own number of CPU threads")


def config_row(config_index: int, spec, inputs) -> dict:
    """The columns every measurement row of one input configuration shares."""
    s = spec.shape
    item, out_item = item_sizes(inputs.dtype)
    return {
        "config_index": config_index, "input_label": spec.label, "input_source": inputs.source, "input_seed": spec.seed,
        "dtype": inputs.dtype, "batch": s.batch, "heads_q": s.heads_q, "heads_kv": s.heads_kv, "seq_len": s.seq_len,
        "head_dim_qk": s.head_dim_qk, "head_dim_v": s.head_dim_v, "causal": s.causal, "flops_per_launch": float(s.flops),
        "seq_len_kv": s.seq_len_kv, "window": s.window, "page_size": s.page_size, "varlen": s.varlen,
        "kv_lens": list(s.kv_lens) if s.kv_lens is not None else None,
        "bytes_per_launch": float(s.bytes_moved(item=item, out_item=out_item)),
    }


def start_children(config, *, registry, measurer, protocol, device_kind: str) -> tuple[list, dict]:
    """The run's kernels (a Kernel each, in order) and the children of those that run in their own process
    (name -> ChildKernel). Children are started together, then described one by one; a kernel that cannot
    be imported or described refuses the run (as an unknown kernel does), naming why."""
    by_default = registry is None
    registry = registry or default_registry()
    kernels: list = []
    children: list[tuple[int, ChildKernel]] = []
    try:
        for i, name in enumerate(config.kernels):
            if by_default and isolated(name, registry, config.isolation):
                children.append((i, ChildKernel(name, device=config.device, device_kind=device_kind,
                                                measurer=measurer.kind, protocol=protocol, gate=config.gate,
                                                launch=config.launch)))
                kernels.append(None)
            else:
                kernels.append(registry.get(name))
        for i, child in children:
            try:
                kernels[i] = child.describe()
            except ReportedFailure as exc:  # the import's own paragraph, written by the child
                raise UnknownKernelError(str(exc)) from None
            except ChildDied as exc:
                raise UnknownKernelError(f"Kernel spec {child.ref!r}: while it was imported, {exc.cause}. Check that "
                                         f"it imports on its own.") from None
            except ChildHung as exc:
                raise UnknownKernelError(f"Kernel spec {child.ref!r}: {exc}.") from None
    except BaseException:
        for _, child in children:
            child.close()
        raise
    names = [k.name for k in kernels]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        for _, child in children:
            child.close()
        raise KernelError(f"Two of the kernels named are the same kernel {', '.join(map(repr, twice))}; name each once.")
    return kernels, {child.kernel.name: child for _, child in children}
