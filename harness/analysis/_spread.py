"""The spread between GPUs: the same kernel on the same input, timed on each GPU (a pure function of rows).

For each kernel x input, each GPU's figure is the median over its timed repeats; across GPUs the median,
minimum, maximum and spread = (max - min) / median are given, for time per launch and for the SM clock
(NVML's, in the window). GPUs of one model differ: the paper behind this harness found a median 4 % between
the GPUs of one node, which is why a comparison between kernels must not mix GPUs.

>>> from harness.analysis import gpu_spread
>>> rows = [{"gpu": g, "config_index": 0, "input_label": "x", "kernel": "k", "status": "ok", "time_ns": t,
...          "sm_clock_mhz": c} for g, t, c in (("a", 100.0, 1800.0), ("b", 104.0, 1750.0))]
>>> s = gpu_spread(rows)[0]
>>> round(s.time_spread, 4), s.slowest
(0.0392, 'b')
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.analysis._stats import median
from harness.results import gpu_of

__all__ = ["GpuFigure", "GpuSpread", "gpu_spread", "suite_spread"]

_TIMED = ("ok", "unsettled")


@dataclass(frozen=True, kw_only=True)
class GpuFigure:
    """One GPU's medians over its timed repeats of one kernel x input."""

    gpu: str
    time_ns: float
    sm_clock_mhz: float | None
    inband_clock_mhz: float | None
    repeats: int
    unsettled: int


@dataclass(frozen=True, kw_only=True)
class GpuSpread:
    """One kernel x input across GPUs. Spreads are fractions, None with fewer than two GPUs."""

    config_index: int
    input_label: str
    kernel: str
    gpus: tuple[GpuFigure, ...]
    time_median_ns: float
    time_min_ns: float
    time_max_ns: float
    time_spread: float | None
    clock_median_mhz: float | None
    clock_min_mhz: float | None
    clock_max_mhz: float | None
    clock_spread: float | None
    slowest: str | None
    fastest: str | None


def _spread(values: list[float]) -> tuple[float | None, float | None, float | None, float | None]:
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None, None, None
    med = median(xs)
    spread = (max(xs) - min(xs)) / med if len(xs) > 1 and med else None
    return med, min(xs), max(xs), spread


def gpu_spread(rows: Iterable[dict], *, info: dict | None = None) -> list[GpuSpread]:
    """Per kernel x input (first-seen order), each GPU's median time and clock and their spread across GPUs.

    `rows` are measurement rows of a merged run (a `gpu` key, or ids that carry the GPU; `info` is the run
    row for runs of one GPU). Rows that were not timed (gate failures, errors) are left out.
    """
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        if r.get("status") not in _TIMED or not r.get("time_ns"):
            continue
        key = (r["config_index"], r["input_label"], r["kernel"])
        groups.setdefault(key, {}).setdefault(gpu_of(r, info) or "?", []).append(r)
    out = []
    for (ci, label, kernel), by_gpu in groups.items():
        figures = tuple(
            GpuFigure(gpu=g, time_ns=median([r["time_ns"] for r in rs]),
                      sm_clock_mhz=median([r.get("sm_clock_mhz") for r in rs]),
                      inband_clock_mhz=median([r.get("inband_clock_mhz") for r in rs]),
                      repeats=len(rs), unsettled=sum(1 for r in rs if r["status"] == "unsettled"))
            for g, rs in sorted(by_gpu.items())
        )
        t_med, t_min, t_max, t_spread = _spread([f.time_ns for f in figures])
        c_med, c_min, c_max, c_spread = _spread([f.sm_clock_mhz for f in figures])
        many = len(figures) > 1
        out.append(GpuSpread(
            config_index=ci, input_label=label, kernel=kernel, gpus=figures, time_median_ns=t_med,
            time_min_ns=t_min, time_max_ns=t_max, time_spread=t_spread, clock_median_mhz=c_med,
            clock_min_mhz=c_min, clock_max_mhz=c_max, clock_spread=c_spread,
            slowest=max(figures, key=lambda f: f.time_ns).gpu if many else None,
            fastest=min(figures, key=lambda f: f.time_ns).gpu if many else None,
        ))
    return out


def suite_spread(spreads: Iterable[GpuSpread]) -> float | None:
    """The median time spread over every kernel x input measured on two or more GPUs."""
    return median([s.time_spread for s in spreads if s.time_spread is not None])
