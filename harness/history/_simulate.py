"""Simulated nightly histories built from recorded repeats: how the change points and the verdict are calibrated.

A recorded run holds a few repeats of one kernel x input; what varies between them is the noise a night's
figure carries. `noise_pool` keeps, for every repeat of the runs given, its deviation from its own run's
geometric mean in cycles, clock and power (jointly: a repeat that caught a low clock keeps its cycles), and each
run's mean clock as a session level (the clock the card settled at that day: on the H200 1500, 1515 or 1530 MHz
for the same cuDNN call, fixture runs of 2026-11-30 to 12-03). `simulate_history` draws a night as one session
level plus `repeats` recorded repeats, so

    cycles = C0 x exp(d_cycles) x code(night),  clock = K0 x exp(session + d_clock) x machine(night),
    time = cycles / clock,  power = P0 x exp(d_power),  J/launch = power x time,

and injects events: a code change multiplies the cycles from its night on, a machine event (a driver, a power
limit) the clock, with the fingerprint changing that night. The control (a pinned reference kernel, drawn from
its own recorded repeats) shares the night's session level and machine events, never the code's: that the two
clocks move together between sessions is an assumption (the recorded runs cannot show it), stated here.

>>> pool = NoisePool(name="k", deviations=((0.0, 0.0, 0.0),), sessions=(0.0,), cycles=1e6, clock_mhz=1500.0,
...                  power_w=700.0)
>>> rows = simulate_history(pool, nights=3, repeats=2, seed=1)
>>> [r["night"] for r in rows], round(rows[0]["time_ns"])
(['n001', 'n002', 'n003'], 666667)
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Sequence

from harness.errors import ResultsError
from harness.history._analyze import analyze_history
from harness.history._series import fingerprint_text, series_key
from harness.history._store import History
from harness.results import read_rows

__all__ = ["NoisePool", "SimEvent", "detection_delay", "noise_pool", "read_noise_pools", "simulate_history"]

_POOL_FIELDS = ("name", "cycles", "clock_mhz", "power_w", "shape")

_BASE_FP = {"device_kind": "cuda", "device_name": "NVIDIA H200", "gpu_serial": "1654000000001", "gpu_uuid": None,
            "host": "gpu-runner-1", "pci_bus_id": "00000000:00:06.0", "driver": "580.159.04", "vbios": "96.00.AF.00.01",
            "power_limit_w": 700.0, "clock_policy": "default", "ecc": "on", "mig": "off"}
_SOFTWARE = "torch 2.11.0; cuda 13.0; cudnn 91900; triton 3.6.0"
_PROTOCOL = ("window 4 s; warm-in >= 1 s; cap 30 s; idle 2 s; chunk 0.5 s; L2 warm; settle 0.003; trend 0.003; "
             "launch graph")


@dataclass(frozen=True, kw_only=True)
class NoisePool:
    """Recorded repeats as deviations (log cycles, log clock, log power) from their run's geometric mean, the
    runs' clock levels as log offsets from their mean (`sessions`), and the kernel's levels."""

    name: str
    deviations: tuple[tuple[float, float, float], ...]
    sessions: tuple[float, ...]
    cycles: float
    clock_mhz: float
    power_w: float
    shape: dict | None = None  # the series' shape fields (batch, heads, ...), for its rows

    def describe(self) -> str:
        sd = lambda xs: (sum((x - sum(xs) / len(xs)) ** 2 for x in xs) / max(len(xs) - 1, 1)) ** 0.5
        return (f"{self.name}: {len(self.deviations)} repeats of {len(self.sessions)} runs; sd per repeat: cycles "
                f"{sd([d[0] for d in self.deviations]):.3%}, clock {sd([d[1] for d in self.deviations]):.3%}; "
                f"session clock levels sd {sd(list(self.sessions)):.3%}")

    def to_dict(self) -> dict:
        """JSON-ready: the levels, the shape, the deviations and the sessions (lists)."""
        return {**{k: getattr(self, k) for k in _POOL_FIELDS}, "deviations": [list(d) for d in self.deviations],
                "sessions": list(self.sessions)}

    @classmethod
    def from_dict(cls, d: dict) -> "NoisePool":
        return cls(**{k: d.get(k) for k in _POOL_FIELDS}, deviations=tuple(tuple(x) for x in d["deviations"]),
                   sessions=tuple(d["sessions"]))


def read_noise_pools(path: Path) -> dict[str, NoisePool]:
    """The pools of a JSON file that holds `{"pools": {role: NoisePool.to_dict(), ...}}`, by role (the H200's:
    tests/fixtures/h200/history_pools.json, roles `kernel` and `control`)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return {role: NoisePool.from_dict(d) for role, d in doc["pools"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{path}: not a file of noise pools ({type(exc).__name__}: {exc}). It holds "
                           f"{{\"pools\": {{role: pool}}}} as NoisePool.to_dict writes them.") from exc


@dataclass(frozen=True, kw_only=True)
class SimEvent:
    """From `night` on (1-based), cycles x `cycles` (a code change) and clock x `clock` (a machine event); a
    non-None `driver` changes the fingerprint that night."""

    night: int
    cycles: float = 1.0
    clock: float = 1.0
    driver: str | None = None


def noise_pool(run_dirs: Sequence[Path], *, name: str, match: Callable[[dict], bool]) -> NoisePool:
    """The repeats of every run in `run_dirs` whose measurement rows `match` (timed, with in-band cycles), grouped
    by run x kernel x input x shape. A group with one repeat has no deviation to give and is skipped."""
    devs, sessions, levels = [], [], []
    shape = None
    for run in run_dirs:
        groups: dict[str, list[dict]] = {}
        for m in read_rows(Path(run), "measurements"):
            if m.get("status") in ("ok", "unsettled") and m.get("cycles_per_launch_inband") and match(m):
                groups.setdefault(series_key(m), []).append(m)
        for ms in groups.values():
            if len(ms) < 2:
                continue
            logs = [(math.log(m["cycles_per_launch_inband"]), math.log(m["inband_clock_mhz"]),
                     math.log(m["power_w"] or 1.0)) for m in ms]
            mean = [sum(x[i] for x in logs) / len(logs) for i in range(3)]
            devs += [tuple(x[i] - mean[i] for i in range(3)) for x in logs]
            sessions.append(mean[1])
            levels.append(mean)
            shape = shape or {k: ms[0].get(k) for k in ("kernel", "input_label", "input_source", "dtype", "batch",
                                                         "heads_q", "heads_kv", "seq_len", "seq_len_kv", "head_dim_qk",
                                                         "head_dim_v", "causal", "window", "page_size", "varlen")}
    if not devs:
        raise ValueError(f"noise_pool {name!r}: no run in {len(run_dirs)} holds two or more matching repeats")
    centre = sum(sessions) / len(sessions)
    return NoisePool(name=name, deviations=tuple(devs), sessions=tuple(s - centre for s in sessions),
                     cycles=math.exp(sum(lv[0] for lv in levels) / len(levels)), clock_mhz=math.exp(centre),
                     power_w=math.exp(sum(lv[2] for lv in levels) / len(levels)), shape=shape)


def _commit(night: int) -> str:
    """The simulated repository's commit of a night: one a night, shared by every series (one suite, one checkout)."""
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


def simulate_history(pool: NoisePool, *, nights: int, repeats: int = 5, events: Sequence[SimEvent] = (),
                     control: NoisePool | None = None, seed: int = 0,
                     start: datetime = datetime(2027, 1, 1, 2, 23, tzinfo=timezone.utc)) -> list[dict]:
    """History rows (the `history` table's columns) of `nights` nights of the pool's series, and of the control
    series when one is given, with `events` injected; one new commit per night."""
    rng = random.Random(f"{seed}:{pool.name}:{control.name if control else ''}:{nights}:{repeats}")
    rows = []
    for n in range(1, nights + 1):
        code = math.prod(e.cycles for e in events if n >= e.night)
        machine = math.prod(e.clock for e in events if n >= e.night)
        driver = next((e.driver for e in sorted(events, key=lambda e: -e.night) if n >= e.night and e.driver),
                      _BASE_FP["driver"])
        session = rng.choice(pool.sessions)
        when = start + timedelta(days=n - 1)
        fp = {**_BASE_FP, "driver": driver}
        fp_text = fingerprint_text(fp)
        for p, role, code_factor in ((pool, "kernel", code), (control, "control", 1.0)):
            if p is None:
                continue
            draws = [rng.choice(p.deviations) for _ in range(repeats)]
            cyc = [p.cycles * math.exp(d[0]) * code_factor for d in draws]
            clk = [p.clock_mhz * math.exp(session + d[1]) * machine for d in draws]
            pw = [p.power_w * math.exp(d[2]) for d in draws]
            t = [c / k * 1e3 for c, k in zip(cyc, clk)]  # cycles / MHz = us; ns
            e = [w * x * 1e-9 for w, x in zip(pw, t)]
            g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
            shape = p.shape or {"kernel": p.name, "input_label": "gaussian:0.1", "dtype": "bf16", "batch": 1,
                                "heads_q": 32, "heads_kv": 32, "seq_len": 16384, "seq_len_kv": 16384,
                                "head_dim_qk": 128, "head_dim_v": 128, "causal": True}
            rows.append({
                "night": f"n{n:03d}", "night_started_at": when.isoformat(), "run_id": f"sim-{n:03d}",
                "run_status": "complete", "role": role, **shape, "kernel_source": "simulated",
                "series": series_key(shape), "status": "timed", "repeats": repeats, "unsettled": 0,
                "time_ns": g(t), "time_ns_repeats": t, "cycles_per_launch": g(cyc), "cycles_repeats": cyc,
                "cycles_clock": "inband", "clock_mhz": g(clk), "clock_mhz_repeats": clk, "sm_clock_mhz": g(clk) * 1.09,
                "power_w": g(pw), "power_w_repeats": pw, "energy_per_launch_j": g(e), "energy_per_launch_j_repeats": e,
                **fp, "fingerprint": fp_text, "software": _SOFTWARE, "protocol": _PROTOCOL,
                "git_commit": _commit(n), "git_dirty": False, "kernel_commit": _commit(n),
                "kernel_dirty": False,
            })
    return rows


def _first_nights(history: History, nights: int) -> History:
    """The history as it stood after its first `nights` nights (labels n001, n002, ...: simulated ones)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    labels = pa.array([f"n{i:03d}" for i in range(1, nights + 1)])
    return History(path=history.path, table=history.table.filter(pc.is_in(history.table["night"], value_set=labels)),
                   files=history.files)


def detection_delay(history: History, *, night: int, ratio: float, threshold: float, most: int = 10,
                    tolerance: int = 1) -> int | None:
    """Nights (counting `night` itself) until a change point of the kernel series found in cycles, moving them the
    way `ratio` does, places the change at `night` (its location interval, widened by `tolerance`, holds it) when a
    simulated history ends that night; None within `most`. A step seen after a few nights is found before its night
    is pinned down: the interval says where it may be, and the commit range spans it."""
    for k in range(night, night + most):
        a = analyze_history(_first_nights(history, k), threshold=threshold)
        kernel = next(s for s in a.series if s.role == "kernel")
        if any(c.lo + 1 - tolerance <= night <= c.hi + 1 + tolerance and "cycles" in c.found_in
               and ((c.ratios["cycles"] or 1.0) - 1) * (ratio - 1) > 0 for c in kernel.change_points):
            return k - night + 1
    return None
