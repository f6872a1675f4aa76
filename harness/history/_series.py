"""From a run to the rows one night adds to the history: one per series (kernel x input x shape x dtype).

A night's figure of a series is the geometric mean over its repeats (the estimator of every comparison in
harness.analysis), and each repeat's value is kept beside it, so the interval bands and the variance between
nights are computed from the raw repeats, never from rounded figures. pyarrow only (the run is read with
`read_run_rows`): GPU images append to a history without polars.

What a night ran on is recorded with every row in three texts, each compared between nights:
- `fingerprint`: the machine (GPU model and serial or UUID, host and bus id, driver, VBIOS, power limit, clock
  policy, ECC and MIG modes);
- `software`: what compiles or dispatches the kernels (torch, its CUDA/HIP, cuDNN, triton);
- `protocol`: the sustained protocol's values that move a figure (window, warm-in, idle, chunk, L2).
A change in any of them between two nights is an *event*: the figures before and after are not comparable, and
a step at that night is the machine's or the software's, not the code's.

>>> series_key({"kernel": "sdpa-cudnn", "input_label": "gaussian:0.1", "dtype": "bf16", "batch": 1, "heads_q": 32,
...             "heads_kv": 8, "seq_len": 16384, "seq_len_kv": 16384, "head_dim_qk": 128, "head_dim_v": 128,
...             "causal": True, "window": None, "page_size": None, "varlen": None})
'sdpa-cudnn | gaussian:0.1 | B1 H32/8 S16384 d128 causal | bf16'
"""

from __future__ import annotations

import json
import math

__all__ = ["SHAPE_FIELDS", "FINGERPRINT_FIELDS", "SOFTWARE_FIELDS", "series_key", "shape_label", "night_rows",
           "comparability_key", "fingerprint_of", "fingerprint_text", "software_of", "protocol_of", "geomean"]

SHAPE_FIELDS = ("batch", "heads_q", "heads_kv", "seq_len", "seq_len_kv", "head_dim_qk", "head_dim_v", "causal",
                "window", "page_size", "varlen")
FINGERPRINT_FIELDS = ("device_name", "gpu_serial", "gpu_uuid", "host", "pci_bus_id", "driver", "vbios",
                      "power_limit_w", "clock_policy", "ecc", "mig")
# What compiles or dispatches the kernels; numpy, polars, rich and the like do not move a kernel's time.
SOFTWARE_FIELDS = (("torch", "torch"), ("cuda", "torch_cuda"), ("cudnn", "cudnn"), ("triton", "triton"))
_PROTOCOL = (("window_s", "window {} s"), ("warmin_min_s", "warm-in >= {} s"), ("warmin_cap_s", "cap {} s"),
             ("idle_before_kernel_s", "idle {} s"), ("chunk_s", "chunk {} s"), ("l2", "L2 {}"),
             ("settle_chunk_tol", "settle {}"), ("settle_trend_tol", "trend {}"))
_TIMED = ("ok", "unsettled")


def shape_label(row: dict) -> str:
    """`B1 H32/8 S16384 d128 causal`; decode: `B16 H32/8 Sq1 Skv32768 d128 causal page16`."""
    s_q, s_kv = row.get("seq_len"), row.get("seq_len_kv") or row.get("seq_len")
    seq = f"S{s_q}" if s_q == s_kv else f"Sq{s_q} Skv{s_kv}"
    dv = row.get("head_dim_v")
    d = f"d{row.get('head_dim_qk')}" + (f"/{dv}" if dv not in (None, row.get("head_dim_qk")) else "")
    extra = [f"window{row['window']}" if row.get("window") else "", f"page{row['page_size']}" if row.get("page_size")
             else "", f"varlen {row['varlen']}" if row.get("varlen") else ""]
    return " ".join([f"B{row.get('batch')} H{row.get('heads_q')}/{row.get('heads_kv')} {seq} {d}",
                     "causal" if row.get("causal") else "non-causal", *[e for e in extra if e]])


def series_key(row: dict) -> str:
    """The series a measurement or history row belongs to: kernel | input | shape | dtype."""
    return f"{row['kernel']} | {row['input_label']} | {shape_label(row)} | {row['dtype']}"


def comparability_key(row: dict) -> tuple:
    """What two nights must share to be compared: the machine, the software and the protocol."""
    return row.get("fingerprint"), row.get("software"), row.get("protocol")


def geomean(values) -> float | None:
    vals = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _json(info: dict, column: str) -> dict:
    try:
        return json.loads(info.get(column) or "{}") or {}
    except ValueError:
        return {}


def fingerprint_of(info: dict) -> dict:
    """The machine's fingerprint fields of a run row (None where the run did not record one)."""
    machine = _json(info, "machine_json")
    out = {k: info.get(k) for k in ("device_kind", "device_name", "host", "pci_bus_id", "driver", "power_limit_w")}
    out.update({k: machine.get(k) for k in ("gpu_uuid", "gpu_serial", "vbios", "clock_policy", "ecc", "mig")})
    return out


def fingerprint_text(fp: dict) -> str:
    # The card is named by serial, else UUID, else host + bus id (a slot, not a card): one identity, not all three,
    # so a run that recorded a serial and one that did not still read as the same machine when the rest agrees.
    card = (f"serial {fp['gpu_serial']}" if fp.get("gpu_serial") else f"uuid {fp['gpu_uuid']}" if fp.get("gpu_uuid")
            else f"{fp.get('host')} {fp.get('pci_bus_id') or ''}".strip())
    limit = f"{fp['power_limit_w']:g} W" if isinstance(fp.get("power_limit_w"), (int, float)) else None
    parts = [fp.get("device_name"), card, f"driver {fp['driver']}" if fp.get("driver") else None,
             f"vbios {fp['vbios']}" if fp.get("vbios") else None, f"limit {limit}" if limit else None,
             f"clocks {fp['clock_policy']}" if fp.get("clock_policy") else None,
             f"ECC {fp['ecc']}" if fp.get("ecc") else None, f"MIG {fp['mig']}" if fp.get("mig") else None]
    return "; ".join(p for p in parts if p)


def software_of(info: dict) -> str:
    """`torch 2.11.0; cuda 13.0; cudnn 91900; triton 3.6.0`: the software that compiles or dispatches kernels."""
    versions = _json(info, "versions_json")
    parts = [f"{name} {versions[key]}" for name, key in SOFTWARE_FIELDS if versions.get(key) not in (None, "None")]
    if info.get("runtime") and "hip" in str(info["runtime"]).lower():
        parts.append(str(info["runtime"]))
    return "; ".join(parts)


def protocol_of(info: dict, *, launch: str | None = None) -> str:
    """The protocol values that move a figure, as text (`window 4 s; ...; L2 warm; launch graph`)."""
    proto = _json(info, "protocol_json")
    parts = [fmt.format(f"{proto[k]:g}" if isinstance(proto[k], float) else proto[k]) for k, fmt in _PROTOCOL
             if proto.get(k) is not None]
    if launch:
        parts.append(f"launch {launch}")
    return "; ".join(parts)


def _kernel_code(info: dict, kernel: str) -> tuple[str | None, bool | None]:
    """The commit the kernel's source came from (its own tree's, as recorded), else the run's."""
    src = _json(info, "kernel_sources_json").get(kernel) or {}
    if src.get("git_commit"):
        return src["git_commit"], src.get("git_dirty")
    return info.get("git_commit"), info.get("git_dirty")


def night_rows(run, *, night: str, role: str = "kernel", roles: dict | None = None) -> list[dict]:
    """The history rows of one run (a `harness.results.Run` read with `read_run_rows`: measurements as dicts):
    one per series, its figures the geometric means over the repeats timed, every repeat kept. A series whose
    every measurement failed (gate, error, timeout) gets a row too, with its status saying why and no figures:
    a kernel that stopped running is a fact of that night, not a gap. `roles` maps kernel names to a role
    ("control") other than `role`."""
    info = run.info
    fp = fingerprint_of(info)
    fp_text, software = fingerprint_text(fp), software_of(info)
    groups: dict[str, list[dict]] = {}
    for m in run.measurements:
        if m.get("status") == "burst":
            continue  # a burst row is another measurement (kernel-only timing), never a night's figure
        groups.setdefault(series_key(m), []).append(m)
    rows = []
    for key, ms in groups.items():
        first = ms[0]
        timed = sorted((m for m in ms if m.get("status") in _TIMED and m.get("time_ns")), key=lambda m: m["repeat"])
        commit, dirty = _kernel_code(info, first["kernel"])
        launch = next((m.get("launch_strategy") for m in timed if m.get("launch_strategy")), None)
        row = {
            "night": night, "night_started_at": info.get("started_at"), "run_id": info.get("run_id"),
            "run_status": info.get("status"), "role": (roles or {}).get(first["kernel"], role), "series": key,
            **{k: first.get(k) for k in ("kernel", "kernel_source", "input_label", "input_source", "dtype",
                                         *SHAPE_FIELDS)},
            "status": "timed" if timed else _why_not(ms), "repeats": len(timed),
            "unsettled": sum(1 for m in timed if m.get("status") == "unsettled"),
            **fp, "fingerprint": fp_text, "software": software, "protocol": protocol_of(info, launch=launch),
            "git_commit": info.get("git_commit"), "git_dirty": info.get("git_dirty"), "kernel_commit": commit,
            "kernel_dirty": dirty,
        }
        inband = bool(timed) and all(m.get("cycles_per_launch_inband") for m in timed)
        cycles_col, clock_col = (("cycles_per_launch_inband", "inband_clock_mhz") if inband
                                 else ("cycles_per_launch_nvml", "sm_clock_mhz"))
        have_cycles = bool(timed) and all(m.get(cycles_col) for m in timed)
        series = {
            "time_ns": [m["time_ns"] for m in timed],
            "cycles": [m[cycles_col] for m in timed] if have_cycles else [],
            "clock_mhz": [m[clock_col] for m in timed] if have_cycles else [],
            "power_w": [m["power_w"] for m in timed if m.get("power_w")],
            "energy_per_launch_j": [m["energy_per_launch_j"] for m in timed if m.get("energy_per_launch_j")],
        }
        row.update({
            "time_ns": geomean(series["time_ns"]), "time_ns_repeats": series["time_ns"] or None,
            "cycles_per_launch": geomean(series["cycles"]), "cycles_repeats": series["cycles"] or None,
            "cycles_clock": ("inband" if inband else "nvml") if have_cycles else None,
            "clock_mhz": geomean(series["clock_mhz"]), "clock_mhz_repeats": series["clock_mhz"] or None,
            "sm_clock_mhz": geomean([m.get("sm_clock_mhz") for m in timed]),
            "power_w": geomean(series["power_w"]), "power_w_repeats": series["power_w"] or None,
            "energy_per_launch_j": geomean(series["energy_per_launch_j"]),
            "energy_per_launch_j_repeats": series["energy_per_launch_j"] or None,
            "temp_max_c": max((m["temp_max_c"] for m in timed if m.get("temp_max_c") is not None), default=None),
            "power_limited_frac": _mean([m.get("power_limited_frac") for m in timed]),
        })
        rows.append(row)
    return rows


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _why_not(ms: list[dict]) -> str:
    reasons = list(dict.fromkeys(f"{m.get('status')}: {m.get('error')}" if m.get("error") else str(m.get("status"))
                                 for m in ms))
    return "not timed (" + "; ".join(reasons)[:300] + ")"

