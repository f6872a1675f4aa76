"""The defaults that depend on the device: its kind, the kernels a run times when none is named (by device and
workload), and S when none is given."""

from __future__ import annotations

import importlib.util
import os
from typing import Sequence

from harness.errors import ConfigError
from harness.inputs import AttentionShape
from harness.kernels import apply_options

__all__ = ["DEFAULT_DEVICE", "DEVICE_HELP", "run_device", "device_kind", "machine_device", "default_kernels", "workload_kernels", "kernel_specs", "default_seq_len"]


# The bundled SDPA back-ends of each device kind; ROCm's PyTorch has no cuDNN.
_KERNELS = {"cpu": ("sdpa-cpu",), "rocm": ("sdpa-flash", "sdpa-efficient"), "cuda": ("sdpa-cudnn", "sdpa-flash")}
# S: long enough on a GPU for one launch to take milliseconds (the sustained clock needs seconds of load,
# not microseconds); on the CPU short enough that the fp64 gate reference stays in seconds.
_SEQ_LEN = {("gpu", False): 16384, ("gpu", True): 8192, ("cpu", False): 1024, ("cpu", True): 1024}


# The device a command runs kernels on when --device is not given: the first CUDA GPU, as a sustained-clock run means.
# A CPU run is asked for (--device cpu), never a fallback; `machine_device` (the pytest plugin, `bench doctor`,
# `bench list kernels`) is what this machine has.
DEFAULT_DEVICE = "cuda:0"
DEVICE_HELP = f"cpu, cuda:N, rocm:N, or cuda:/rocm:<PCI bus id> (default {DEFAULT_DEVICE})"


def run_device(device: str | None, *, flag: str = "--device") -> str:
    """--device as given, its kind checked (a ConfigError naming `flag`), or DEFAULT_DEVICE when it was not."""
    device = DEFAULT_DEVICE if device is None else device
    device_kind(device, flag=flag)
    return device


def device_kind(device: str, *, flag: str = "--device") -> str:
    """`cpu`, `cuda` or `rocm` for a device string (`cuda:0`, `rocm:0000:1b:00.0`, `cpu`); `flag` names it."""
    kind = str(device).partition(":")[0]
    if kind not in _KERNELS:
        raise ConfigError(f"{flag} {device!r}: use cpu, cuda:N, rocm:N, or cuda:/rocm:<PCI bus id>.")
    return kind


def machine_device() -> str:
    """This machine's own device: cuda:0 where PyTorch sees a CUDA GPU, rocm:0 on its ROCm build, else cpu."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    return "rocm:0" if getattr(torch.version, "hip", None) else "cuda:0"


def default_kernels(device: str, shapes: Sequence[AttentionShape] = ()) -> tuple[str, ...]:
    """The kernels a run times when none is named: the device's own SDPA back-ends for dense self-attention, and for a
    serving workload (decode, paged, windowed, varlen: `AttentionShape.features`) the bundled kernels that compute it
    (`workload_kernels`)."""
    return workload_kernels(device, shapes)[0]


# The bundled kernels that compute every serving workload, by device kind; the Triton ones only where they run.
_WORKLOAD_KERNELS = {"cpu": ("sdpa-kvcache",), "rocm": ("sdpa-kvcache",), "cuda": ("sdpa-kvcache",)}
_SPLITKV_MAX_QUERIES = 16  # kernels_under_test.decode.SPLITKV_MAX_QUERIES, read without importing the kernels


def _triton_runs_on(kind: str) -> bool:
    """Triton is installed and runs on this kind of device (on the CPU only in its interpreter)."""
    if importlib.util.find_spec("triton") is None:
        return False
    return kind == "cuda" or (kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")


def _pow2(n: int) -> bool:
    return n >= 16 and n & (n - 1) == 0


def workload_kernels(device: str, shapes: Sequence[AttentionShape] = ()) -> tuple[tuple[str, ...], str]:
    """(the default kernels, why those): a run of dense self-attention gets the device's SDPA back-ends; one whose
    shapes ask for more (S_q < S_kv, a page table, a window, lengths) the bundled kernels that compute all of them:
    sdpa-kvcache, triton-splitkv where it runs (Triton there; at most 16 queries a sequence; power-of-two head dims),
    triton-mla for MLA's latent cache (`--mla`).

    >>> from harness.inputs import AttentionShape
    >>> workload_kernels("rocm:0", [AttentionShape(batch=2, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=64,
    ...                                            head_dim_qk=64, page_size=16)])
    (('sdpa-kvcache',), 'the bundled kernels that compute a decode, paged workload on rocm')
    """
    kind = device_kind(device)
    features = sorted(set().union(*(s.features() for s in shapes))) if shapes else []
    if not features:
        return _KERNELS[kind], f"the SDPA back-ends of {kind}"
    picked = list(_WORKLOAD_KERNELS[kind])
    if _triton_runs_on(kind) and all(s.seq_len <= _SPLITKV_MAX_QUERIES for s in shapes):
        if all(s.latent_kv and _pow2(s.head_dim_v) and _pow2(s.head_dim_qk - s.head_dim_v) and s.heads_kv == 1
               for s in shapes):
            picked.insert(0, "triton-mla")
        elif not any(s.latent_kv for s in shapes) and all(_pow2(s.head_dim_qk) and _pow2(s.head_dim_v) for s in shapes):
            picked.append("triton-splitkv")
    return tuple(picked), f"the bundled kernels that compute a {', '.join(features)} workload on {kind}"


def kernel_specs(names: Sequence[str], *, device: str, layout: str | None = None, gqa: str | None = None,
                 shapes: Sequence[AttentionShape] = ()) -> tuple[str, ...]:
    """The kernels a run names (or the defaults for the device and the workload of `shapes`), with `--layout` /
    `--gqa` applied to the plain callables among them (`module:function`, `file.py:function`)."""
    return apply_options(tuple(names) or default_kernels(device, shapes), layout=layout, gqa=gqa)


def default_seq_len(device: str, *, model: bool) -> int:
    """S when none is given: 16384 on a GPU (8192 for captured models), 1024 on the CPU."""
    return _SEQ_LEN[("cpu" if device_kind(device) == "cpu" else "gpu", bool(model))]
