"""`bench doctor`: what this machine can measure, and what is missing with how to fix it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.devices import open_device
from harness.errors import HarnessError
from harness.kernels import default_registry
from harness.runner import probe_unavailable_reason
from harness.suite import machine_device
from harness.telemetry import CACHE_VAR, amdsmi_versions, create_sampler, import_amdsmi

__all__ = ["Check", "diagnose", "amd_checks", "probe_amdsmi_import", "device_missing", "DEVICE_CHECKS"]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "missing", "warn", "info"
    detail: str


# The checks that say whether the device named can be used at all: PyTorch, the CUDA runtime behind it, and the
# device opened with its identity read. Any of them `missing` and nothing can be measured there: doctor exits 2.
DEVICE_CHECKS = ("torch", "cuda", "identity")


def device_missing(checks: list[Check]) -> str | None:
    """Why the device `diagnose` was asked about cannot be used (its DEVICE_CHECKS that are missing), or None.

    >>> device_missing([Check("torch", "ok", "2.13"), Check("cuda", "missing", "PyTorch sees no CUDA GPU")])
    'cuda: PyTorch sees no CUDA GPU'
    >>> device_missing([Check("torch", "ok", "2.13"), Check("ncu", "missing", "not on PATH")]) is None
    True
    """
    gone = [f"{c.name}: {c.detail}" for c in checks if c.name in DEVICE_CHECKS and c.status == "missing"]
    return "; ".join(gone) or None


def _status(text: str) -> str:
    """A backend's describe() entry is "ok", "ok: <detail>", "unverified: <why>" (works or not, the reading
    cannot tell), or a sentence saying what is missing."""
    if text == "ok" or text.startswith("ok:"):
        return "ok"
    return "warn" if text.startswith("unverified:") else "missing"


# Run in a fresh interpreter: import amdsmi the way the harness does and print one JSON line.
_PROBE = """
import json
from harness.errors import HarnessError
from harness.telemetry import import_amdsmi
try:
    module, _ = import_amdsmi()
except HarnessError as exc:
    print(json.dumps({"ok": False, "detail": str(exc)}))
else:
    print(json.dumps({"ok": True, "detail": str(getattr(module, "__file__", "?"))}))
"""


def probe_amdsmi_import(*, python: str | None = None, timeout_s: float = 60.0) -> Check:
    """Import amdsmi in a child process with this process's import path, and say what happened.

    PyTorch's ROCm build imports amdsmi while `import torch` runs, and lets any error but ImportError
    through, so a package that does not match its libamd_smi.so breaks `import torch` before the harness's
    own explanation can run; a crash or hang in the library would take doctor down with it. In a child,
    neither can: its error, exit status or silence becomes this check.
    """
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *[p for p in sys.path if p]]))
    cmd = [python or sys.executable, "-c", _PROBE]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return Check("amdsmi import", "missing", f"`import amdsmi` did not finish within {timeout_s:g} s in a fresh "
                     "process: the library hangs while loading. Check `amd-smi version` and the amdgpu driver "
                     "(`dmesg | grep amdgpu`); use --telemetry none meanwhile.")
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        tail = " ".join((done.stderr or done.stdout).split())[-400:] or "no output"
        return Check("amdsmi import", "missing", f"`import amdsmi` killed a fresh Python (exit status {done.returncode}: "
                     f"{tail}). PyTorch's ROCm build imports amdsmi too, so `import torch` fails the same way. Reinstall "
                     "the amdsmi that ships with your ROCm: `pip uninstall amdsmi` then `python3 -m pip install "
                     "/opt/rocm/share/amd_smi`.")
    if result.get("ok"):
        return Check("amdsmi import", "ok", f"imports in a fresh process ({result.get('detail')})")
    return Check("amdsmi import", "missing", f"{result.get('detail')} PyTorch's ROCm build imports amdsmi as well, so "
                 "the same error can break `import torch`.")


def amd_checks(*, amdsmi=None) -> list[Check]:
    """The AMD section: that this path is untried, HIP, and whether amdsmi, its library and ROCm agree.

    Runs before the device is opened, so a broken amdsmi install is explained even when no GPU opens.
    """
    checks = [Check("AMD path", "warn", "the AMD path (ROCm device, amdsmi telemetry) has not run on AMD hardware here: "
                    "it was built against amdsmi 7.0.2's documented interface and tested on CPU with fakes. Treat "
                    "its numbers as unverified until they agree with `amd-smi metric` on a real GPU")]
    import torch

    hip = getattr(torch.version, "hip", None)
    checks.append(Check("HIP", "ok" if hip else "missing", f"PyTorch built for ROCm, HIP {hip}" if hip else
                        "this PyTorch is not a ROCm build: install PyTorch for ROCm to use --device rocm"))
    if amdsmi is None and "amdsmi" not in sys.modules:  # loaded already (PyTorch's ROCm build): it imported fine
        probe = probe_amdsmi_import()
        checks.append(probe)
        if probe.status != "ok":
            return checks  # importing it here could fail worse (a crash) and would say no more
    try:
        module, cache_note = import_amdsmi(amdsmi)
    except HarnessError as exc:
        return checks + [Check("amdsmi", "missing", str(exc))]
    v = amdsmi_versions(module)
    checks.append(Check("amdsmi package", "ok" if v["package"] else "warn", v["package"] or "version unknown"))
    checks.append(Check("libamd_smi", "ok" if v["library"] else "missing", v["library"] or v.get("library_error") or "?"))
    checks.append(Check("ROCm", "ok" if v["rocm"] else "warn", v["rocm"] or v.get("rocm_error") or "?"))
    if v["package"] and v["rocm"]:
        # The PyPI package is numbered like ROCm; a different major.minor is the mismatch that breaks imports.
        same = v["package"].split(".")[:2] == v["rocm"].split(".")[:2]
        checks.append(Check("amdsmi version match", "ok" if same else "warn",
                            f"package {v['package']} matches ROCm {v['rocm']}" if same else
                            f"package {v['package']} vs ROCm {v['rocm']}: install the copy that ships with ROCm "
                            "(`python3 -m pip install /opt/rocm/share/amd_smi`)"))
    checks.append(Check("metrics cache", "ok" if _status(cache_note) == "ok" else "warn",
                        f"{CACHE_VAR}=0" if cache_note == "ok" else cache_note))
    prof = shutil.which("rocprofv3")
    checks.append(Check("rocprofv3", "ok" if prof else "info", prof or
                        "not on PATH. ROCm's kernel tracer, for checking kernel times by hand with "
                        "`rocprofv3 --kernel-trace -f csv`; the harness does not call it yet"))
    return checks


def _amdsmi_after_torch_failed() -> list[Check]:
    try:
        present = importlib.util.find_spec("amdsmi") is not None  # finds the package without running it
    except (ImportError, ValueError):
        present = False
    return [probe_amdsmi_import()] if present else []


def _reading_check(backend: str, sample) -> Check:
    """One sample's figures; "ok" only when it has a clock and a power (a run needs both for its figures)."""
    def show(value, unit):
        return "not read" if value is None else f"{value:.0f} {unit}"

    unread = [name for name, value in (("clock", sample.sm_clock_mhz), ("power", sample.power_w)) if value is None]
    detail = (f"clock {show(sample.sm_clock_mhz, 'MHz')}, power {show(sample.power_w, 'W')}, "
              f"reasons {sample.reason_names or 'none'}")
    if sample.error:
        return Check(f"{backend}: reading", "missing", f"{detail}; error: {sample.error}")
    if unread:
        return Check(f"{backend}: reading", "warn", f"{detail}: this machine does not expose the {' and '.join(unread)} "
                                                    f"to {backend}, so runs here have no {' or '.join(unread)} figures")
    return Check(f"{backend}: reading", "ok", detail)


def diagnose(*, device: str | None = None, nvml=None, amdsmi=None) -> list[Check]:
    """Every check is independent: one failure never hides the others."""
    checks: list[Check] = []
    try:
        import torch

        cuda = torch.cuda.is_available()
        hip = getattr(torch.version, "hip", None)
        build = f"HIP {hip}" if hip else f"CUDA {torch.version.cuda or 'none'}"
        checks.append(Check("torch", "ok", f"{torch.__version__} ({build})"))
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            return [Check("torch", "missing", f"import torch failed: {exc}"), *_amdsmi_after_torch_failed()]
        return [Check("torch", "missing", "PyTorch is not installed: pip install torch (CPU machines: torch==2.13.0)")]
    except Exception as exc:  # noqa: BLE001 - PyTorch's ROCm build lets amdsmi's KeyError/AttributeError through
        return [Check("torch", "missing", f"import torch failed ({type(exc).__name__}: {' '.join(str(exc).split())}). "
                      "PyTorch's ROCm build imports amdsmi while it loads, so a broken or mismatched amdsmi shows up "
                      "here; see the amdsmi import check"), *_amdsmi_after_torch_failed()]
    spec = device or machine_device()  # this machine's own: cuda:0, rocm:0 on PyTorch's ROCm build, else cpu
    checks.append(Check("device", "info", f"checking {spec}"))
    if spec.split(":")[0] == "rocm" or (hip and spec.startswith("cuda")):
        checks.extend(amd_checks(amdsmi=amdsmi))
    if spec.startswith("cuda") and not cuda and not hip:
        checks.append(Check("cuda", "missing", "PyTorch sees no CUDA GPU: this machine can only run --device cpu"))
        spec = "cpu"
    try:
        dev = open_device(spec, nvml=nvml, amdsmi=amdsmi)
        ident = dev.identity()
        checks.append(Check("identity", "ok", ", ".join(f"{k}={v}" for k, v in ident.as_dict().items() if v is not None)))
    except HarnessError as exc:
        checks.append(Check("identity", "missing", str(exc)))
        return checks
    backend = dev.default_telemetry()
    try:
        injected = {"nvml": nvml, "amdsmi": amdsmi}.get(backend)
        sampler = create_sampler(backend, pci_bus_id=ident.pci_bus_id, **({backend: injected} if injected else {}))
        sampler.open()
        try:
            sample = sampler.read()
            for cap, text in sampler.describe().items():
                if cap == "metrics cache":
                    continue  # the AMD section reported it as found, before this process set the variable
                checks.append(Check(f"{backend}: {cap}", _status(text), text))
            checks.append(_reading_check(backend, sample))
        finally:
            sampler.close()
    except HarnessError as exc:
        checks.append(Check(f"telemetry {backend}", "missing", str(exc)))
    if dev.kind in ("cuda", "rocm"):
        try:
            others = dev.other_processes()
            checks.append(Check("idle", "ok" if not others else "warn",
                                "no other compute process" if not others else f"other processes: {[p.pid for p in others]}"))
        except HarnessError as exc:
            checks.append(Check("idle", "missing", str(exc)))
    if dev.kind == "rocm":
        checks.append(Check("in-band clock probe", "missing", "not built for AMD (an s_memtime / s_memrealtime probe "
                            "would be the AMD form): cycles use the amdsmi clock of the slowest XCD"))
    if dev.kind == "cuda":
        reason = probe_unavailable_reason(dev)
        checks.append(Check("in-band clock probe", "ok" if reason is None else "missing", reason or "triton available"))
        ncu = shutil.which("ncu")
        checks.append(Check("ncu", "ok" if ncu else "missing", ncu or "Nsight Compute (ncu) not on PATH: pipe counters unavailable"))
    reg = default_registry()
    for k in reg:
        reason = k.unavailable_reason(dev.kind)
        checks.append(Check(f"kernel {k.name}", "ok" if reason is None else "info", reason or "available"))
    for spec_, err in reg.plugin_errors.items():
        checks.append(Check(f"plugin {spec_}", "missing", err))
    return checks
