"""`bench doctor`: what this machine can measure, and what is missing with how to fix it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

__all__ = ["Check", "diagnose"]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "missing", "warn", "info"
    detail: str


def diagnose(*, device: str | None = None, nvml=None) -> list[Check]:
    """Every check is independent: one failure never hides the others."""
    checks: list[Check] = []
    try:
        import torch

        cuda = torch.cuda.is_available()
        checks.append(Check("torch", "ok", f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})"))
    except ImportError:
        return [Check("torch", "missing", "PyTorch is not installed: pip install torch (CPU machines: torch==2.13.0)")]
    spec = device or ("cuda:0" if cuda else "cpu")
    checks.append(Check("device", "info", f"checking {spec}"))
    if spec.startswith("cuda") and not cuda:
        checks.append(Check("cuda", "missing", "PyTorch sees no CUDA GPU: this machine can only run --device cpu"))
        spec = "cpu"
    from harness.devices import open_device
    from harness.errors import HarnessError
    from harness.telemetry import create_sampler

    try:
        dev = open_device(spec, nvml=nvml)
        ident = dev.identity()
        checks.append(Check("identity", "ok", ", ".join(f"{k}={v}" for k, v in ident.as_dict().items() if v is not None)))
    except HarnessError as exc:
        checks.append(Check("identity", "missing", str(exc)))
        return checks
    backend = dev.default_telemetry()
    try:
        sampler = create_sampler(backend, pci_bus_id=ident.pci_bus_id, **({"nvml": nvml} if backend == "nvml" and nvml else {}))
        sampler.open()
        try:
            sample = sampler.read()
            for cap, text in sampler.describe().items():
                checks.append(Check(f"{backend}: {cap}", "ok" if text == "ok" else "missing", text))
            checks.append(Check(f"{backend}: reading", "ok", f"clock {sample.sm_clock_mhz} MHz, power {sample.power_w} W, "
                                                         f"reasons {sample.reason_names}"))
        finally:
            sampler.close()
    except HarnessError as exc:
        checks.append(Check(f"telemetry {backend}", "missing", str(exc)))
    if dev.kind == "cuda":
        try:
            others = dev.other_processes()
            checks.append(Check("idle", "ok" if not others else "warn",
                                "no other compute process" if not others else f"other processes: {[p.pid for p in others]}"))
        except HarnessError as exc:
            checks.append(Check("idle", "missing", str(exc)))
        from harness.runner import probe_unavailable_reason

        reason = probe_unavailable_reason(dev)
        checks.append(Check("in-band clock probe", "ok" if reason is None else "missing", reason or "triton available"))
        ncu = shutil.which("ncu")
        checks.append(Check("ncu", "ok" if ncu else "missing", ncu or "Nsight Compute (ncu) not on PATH: pipe counters unavailable"))
    from harness.kernels import default_registry

    reg = default_registry()
    for k in reg:
        reason = k.unavailable_reason(dev.kind)
        checks.append(Check(f"kernel {k.name}", "ok" if reason is None else "info", reason or "available"))
    for spec_, err in reg.plugin_errors.items():
        checks.append(Check(f"plugin {spec_}", "missing", err))
    return checks
