"""Roofs from the `peaks` table: one per peak kernel, at the clock it was measured at, and the read roof that a
decode kernel's bytes are set against.

A peak's rate is its median over repeats; its clock the median in-band clock of those repeats (NVML's where no
in-band probe ran: `clock_source` says which). A compute roof (FLOP/s) or an exp2 roof counts per SM cycle, so
placed beside a kernel that ran at another clock it scales with that kernel's clock (`at_clock`); a memory roof
is the DRAM's and stays as measured (the HBM clock does not follow the SM clock; a memory-bound kernel's own
clock is shown beside it instead).

>>> rows = [{"kernel": "peak-read-stream", "unit": "byte", "operands": "random", "rate_per_s": r,
...          "inband_clock_mhz": 1755.0} for r in (4.5e12, 4.6e12, 4.7e12)]
>>> (roof,) = roofs_from_peaks(rows)
>>> roof.kind, roof.value, roof.clock_mhz, roof.clock_source
('memory', 4600000000000.0, 1755.0, 'inband')
>>> read_roof([roof]).label
'read-stream'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Sequence

from harness.errors import ConfigError
from harness.profiling._store import read_trace_table, write_trace_table

__all__ = ["DISAGREE_FRAC", "Roof", "RooflinePoint", "attach_peaks", "check_disagreement", "peaks_read_roof", "read_roof",
           "roofs_from_peaks", "run_read_roof"]

# Two timings of one peak (the sustained protocol's graph replays and the independent second method) that differ
# by more than this are flagged in the peaks table and the report: one of them is not measuring what it says.
DISAGREE_FRAC = 0.03


@dataclass(frozen=True, kw_only=True)
class Roof:
    label: str
    kind: str  # "compute" (FLOP/s), "memory" (byte/s) or "ops" (another unit per s, e.g. exp/s: drawn as FLOP/s)
    value: float
    operands: str = ""
    clock_mhz: float | None = None  # the clock the peak ran at (median over its repeats)
    clock_source: str = ""  # "inband" or "nvml" ("" unknown)
    check_value: float | None = None  # the same peak timed by its independent second method
    check_method: str = ""

    @property
    def disagreement(self) -> float | None:
        """Sustained rate / second method's rate - 1, None without a second timing."""
        return check_disagreement(self.value, self.check_value)

    def at_clock(self, clock_mhz: float | None) -> float:
        """The roof for a kernel that ran at `clock_mhz`: compute and exp roofs scale with the SM clock, memory roofs
        are the DRAM's and do not; unknown clocks leave the roof as measured."""
        if self.kind == "memory" or not clock_mhz or not self.clock_mhz:
            return self.value
        return self.value * clock_mhz / self.clock_mhz


@dataclass(frozen=True, kw_only=True)
class RooflinePoint:
    label: str
    intensity: float  # FLOP per byte of DRAM traffic
    flops_per_s: float
    note: str = ""
    clock_mhz: float | None = None  # the kernel's own clock in its sustained window (in-band where measured)


def check_disagreement(rate: float | None, check: float | None) -> float | None:
    """rate / check - 1 (None where either is missing)."""
    if not rate or not check:
        return None
    return rate / check - 1.0


def _med(rows: Sequence[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return median(vals) if vals else None


def roofs_from_peaks(rows: Sequence[dict]) -> list[Roof]:
    """One roof per peak kernel: the median rate over its repeats (rows of the `peaks` table), at the median clock
    of those repeats, with its second timing where the run made one."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("rate_per_s"):
            by.setdefault(r["kernel"], []).append(r)
    kind = {"FLOP": "compute", "byte": "memory"}
    out = []
    for k, rs in by.items():
        inband, nvml = _med(rs, "inband_clock_mhz"), _med(rs, "sm_clock_mhz")
        out.append(Roof(label=k.removeprefix("peak-"), kind=kind.get(rs[0]["unit"], "ops"), value=_med(rs, "rate_per_s"),
                        operands=rs[0]["operands"], clock_mhz=inband or nvml,
                        clock_source="inband" if inband else ("nvml" if nvml else ""),
                        check_value=_med(rs, "check_rate_per_s"),
                        check_method=next((r["check_method"] for r in rs if r.get("check_method")), "")))
    return out


def read_roof(roofs: Sequence[Roof]) -> Roof | None:
    """The roof a kernel's bytes are set against: the read stream (attention reads its cache and writes little), else
    the highest memory roof the run has (a copy, in runs measured before the read stream existed)."""
    memory = [r for r in roofs if r.kind == "memory"]
    return next((r for r in memory if r.label.startswith("read")), None) or max(memory, key=lambda r: r.value,
                                                                                 default=None)


def run_read_roof(run_dir) -> Roof | None:
    """The read roof of the peaks stored beside a run (`bench peaks --into`, `bench sustained --peaks`), None where it
    has none. A peaks table that cannot be read is an error the caller sees (ResultsError), never a silent None."""
    if run_dir is None or not (Path(run_dir) / "peaks").is_dir():
        return None
    return read_roof(roofs_from_peaks(read_trace_table(Path(run_dir), "peaks")))


def peaks_read_roof(peaks_run) -> Roof:
    """The read roof of a peaks run given as `--peaks` (checked before a run starts): a ConfigError naming the flag
    where the folder holds no peaks or none of memory."""
    path = Path(peaks_run)
    if not (path / "peaks").is_dir():
        raise ConfigError(f"--peaks {path}: no peaks table there (no {path / 'peaks'} folder). Give the run directory "
                          f"that `bench peaks` wrote (it prints `run: ...`), or one it stored its peaks into (--into).")
    roof = run_read_roof(path)
    if roof is None:
        raise ConfigError(f"--peaks {path}: its peaks hold no memory roof; run `bench peaks -k peak-read-stream` (or "
                          f"the default set) and give that run.")
    return roof


def attach_peaks(run_dir, peaks_run) -> Roof | None:
    """Store the peaks of `peaks_run` beside the run `run_dir` (its report then draws the roofline) and return the read
    roof its tables set GB/s against."""
    rows = read_trace_table(Path(peaks_run), "peaks")
    write_trace_table(Path(run_dir), "peaks", [{**r, "run_id": Path(run_dir).name} for r in rows])
    return read_roof(roofs_from_peaks(rows))
