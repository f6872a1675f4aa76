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
from dataclasses import dataclass, field

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


_TIME = ("time_median_ns", "time_min_ns", "time_max_ns", "time_spread")
_CLOCK = ("clock_median_mhz", "clock_min_mhz", "clock_max_mhz", "clock_spread")


@dataclass(frozen=True, kw_only=True)
class GpuSpread:
    """One kernel x input across GPUs: each GPU's figures (`gpus`), and across them the median, minimum,
    maximum and spread = (max - min) / median of time and of clock. Those are derived from `gpus` when
    the spread is made, so they cannot disagree with it. Spreads are fractions; they, `slowest` and
    `fastest` (by time) are None with fewer than two GPUs."""

    config_index: int
    input_label: str
    kernel: str
    gpus: tuple[GpuFigure, ...]
    time_median_ns: float = field(init=False)
    time_min_ns: float = field(init=False)
    time_max_ns: float = field(init=False)
    time_spread: float | None = field(init=False)
    clock_median_mhz: float | None = field(init=False)
    clock_min_mhz: float | None = field(init=False)
    clock_max_mhz: float | None = field(init=False)
    clock_spread: float | None = field(init=False)
    slowest: str | None = field(init=False)
    fastest: str | None = field(init=False)

    def __post_init__(self) -> None:
        many = len(self.gpus) > 1
        derived = {
            **dict(zip(_TIME, _spread([f.time_ns for f in self.gpus]))),
            **dict(zip(_CLOCK, _spread([f.sm_clock_mhz for f in self.gpus]))),
            "slowest": max(self.gpus, key=lambda f: f.time_ns).gpu if many else None,
            "fastest": min(self.gpus, key=lambda f: f.time_ns).gpu if many else None,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, here


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
    return [
        GpuSpread(config_index=config_index, input_label=label, kernel=kernel, gpus=tuple(
            GpuFigure(gpu=g, time_ns=median([r["time_ns"] for r in rs]),
                      sm_clock_mhz=median([r.get("sm_clock_mhz") for r in rs]),
                      inband_clock_mhz=median([r.get("inband_clock_mhz") for r in rs]),
                      repeats=len(rs), unsettled=sum(1 for r in rs if r["status"] == "unsettled"))
            for g, rs in sorted(by_gpu.items())
        ))
        for (config_index, label, kernel), by_gpu in groups.items()
    ]


def suite_spread(spreads: Iterable[GpuSpread]) -> float | None:
    """The median time spread over every kernel x input measured on two or more GPUs."""
    return median([s.time_spread for s in spreads if s.time_spread is not None])
