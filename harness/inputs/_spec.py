from __future__ import annotations

import dataclasses
import importlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from harness.errors import InputError
from harness.inputs._shape import AttentionShape, torch_dtype
from harness.inputs._synthetic import parse_synthetic, synthesize
from harness.inputs._workload import INDEX_TENSORS, lay_out

__all__ = ["InputSpec", "AttentionInputs", "make_inputs", "register_source", "check_finite", "check_source"]


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    """What to feed a kernel: a shape, a dtype, a source and a seed.

    `source` is `gaussian:0.1`, `zeros`, `constant:1`, `randbits`, or a source whose data lives elsewhere,
    such as `capture:captures/smollm2-135m/pydoc-S2048/layer03.safetensors`. Such a spec names its own
    `loader` as `module:function` (the capture package writes `harness.capture:source_loader`), so the spec
    stays plain data across processes and this package never imports the packages that produce inputs.
    """

    shape: AttentionShape
    dtype: str = "bfloat16"
    source: str = "gaussian:0.1"
    seed: int = 0
    scale: float | None = None  # softmax scale; None means 1/sqrt(dqk)
    name: str | None = None  # a short label for tables; defaults to the source
    loader: str | None = None  # "module:function" that makes the inputs of a non-synthetic source

    @property
    def label(self) -> str:
        return self.name or self.source

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, every field (the loader and the softmax scale too): what crosses to a
        worker or child process and what a run stores in its config; `from_dict` rebuilds an equal spec."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "InputSpec":
        return cls(**{**d, "shape": AttentionShape(**d["shape"])})


@dataclass(frozen=True, kw_only=True, eq=False)
class AttentionInputs:
    """q, k, v on a device, with what they are. Tensors are [B, H, S, d], contiguous; a paged or varlen
    workload lays them out as `AttentionShape` says and adds its int32 index tensors: `page_table`
    [B, max_pages] and `kv_lens` [B] (paged or varlen), `cu_seqlens_q` and `cu_seqlens_kv` [B + 1] (varlen),
    None where the workload has none."""

    q: Any
    k: Any
    v: Any
    shape: AttentionShape
    dtype: str
    source: str
    scale: float
    seed: int | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    page_table: Any = None
    kv_lens: Any = None
    cu_seqlens_q: Any = None
    cu_seqlens_kv: Any = None

    def index_tensors(self) -> dict[str, Any]:
        """The workload's index tensors that exist, by name (what a kernel is handed besides q, k, v)."""
        return {n: getattr(self, n) for n in INDEX_TENSORS if getattr(self, n) is not None}

    @property
    def device(self):
        return self.q.device

    def copy(self) -> "AttentionInputs":
        """The same values in tensors of its own (q, k, v and the index tensors): what each kernel of a run is
        handed, so nothing one kernel leaves behind (a thread still writing into q) reaches the next one's."""
        index = {n: t.clone() for n, t in self.index_tensors().items()}
        return dataclasses.replace(self, q=self.q.clone(), k=self.k.clone(), v=self.v.clone(), **index)

    def refill(self, seed: int) -> None:
        """Overwrite q, k, v in place with fresh values of the same kind (for the cached-output check)."""
        import torch

        g = torch.Generator().manual_seed(seed)
        for t in (self.q, self.k, self.v):
            if t.is_cuda:  # drawn where it lives: a paged pool of a large decode batch is gigabytes
                gd = torch.Generator(device=t.device).manual_seed(seed)
                noise = torch.randn(t.shape, generator=gd, dtype=torch.float32, device=t.device)
            else:
                noise = torch.randn(t.shape, generator=g, dtype=torch.float32)
            std = float(t.float().std()) if t.numel() > 1 else 1.0
            t.copy_((noise * (std if std > 0 else 0.1)).to(t.dtype))


_SOURCES: dict[str, Callable[[InputSpec, Any], AttentionInputs]] = {}


def register_source(prefix: str, loader: Callable[[InputSpec, Any], AttentionInputs]) -> None:
    """Let `source="<prefix>:..."` specs be loaded by `loader(spec, device)` in this process (the pytest
    plugin's in-memory tensors); specs that travel to other processes name their `loader` instead."""
    _SOURCES[prefix] = loader


def _named_loader(spec: InputSpec) -> Callable[[InputSpec, Any], AttentionInputs]:
    module, _, func = spec.loader.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"Input {spec.label!r}: its loader {spec.loader!r} cannot be imported ({exc}). "
                         f"The spec was written by a harness whose packages are missing here; install them.") from None


def check_source(source: str, *, flag: str = "--input") -> None:
    """Refuse a source that cannot make inputs, before any run directory exists or anything is allocated."""
    prefix = source.partition(":")[0]
    if prefix in _SOURCES:
        return
    if prefix == "capture":
        raise InputError(f"{flag} {source!r}: captured activations are selected with --model NAME (or a capture "
                         f"file with `bench nightly --capture FILE`), not as an input source.")
    parse_synthetic(source, flag=flag)


def make_inputs(spec: InputSpec, *, device) -> AttentionInputs:
    """Materialise the inputs a spec describes on `device`."""
    import torch

    if spec.loader:
        return _named_loader(spec)(spec, device)
    prefix = spec.source.partition(":")[0]
    if prefix in _SOURCES:
        return _SOURCES[prefix](spec, device)
    if prefix == "capture":
        raise InputError(f"Input {spec.label!r} comes from a capture file but names no loader; build it with "
                         f"harness.capture.capture_spec(PATH).")
    dtype = torch_dtype(spec.dtype)
    g = torch.Generator().manual_seed(spec.seed)
    s = spec.shape
    scale = spec.scale if spec.scale is not None else s.head_dim_qk**-0.5
    if s.paged or s.packed:
        t = lay_out(s, source=spec.source, dtype=dtype, device=device, generator=g)
        return AttentionInputs(shape=s, dtype=spec.dtype, source=spec.source, scale=scale, seed=spec.seed, **t)
    q = synthesize(spec.source, s.q_shape(), dtype=dtype, device=device, generator=g, group=s.heads_q // s.heads_kv)
    k = synthesize(spec.source, s.k_shape(), dtype=dtype, device=device, generator=g, role="k")
    v = k[..., :s.head_dim_v] if s.latent_kv else synthesize(spec.source, s.v_shape(), dtype=dtype, device=device,
                                                              generator=g, role="v")
    return AttentionInputs(q=q, k=k, v=v, shape=s, dtype=spec.dtype, source=spec.source, scale=scale, seed=spec.seed)


def check_finite(inputs: AttentionInputs) -> None:
    """Refuse inputs with NaN or Inf: a kernel timed on them is not timed on attention."""
    import torch

    for name in ("q", "k", "v"):
        t = getattr(inputs, name)
        bad = int((~torch.isfinite(t.float())).sum())
        if bad:
            raise InputError(
                f"Input {name} from {inputs.source!r} holds {bad} NaN or Inf values out of {t.numel()}. "
                f"Timing attention on non-finite inputs measures nothing useful; recapture or regenerate "
                f"the inputs (a corrupt capture file or an overflow in a synthetic constant are the usual causes)."
            )
