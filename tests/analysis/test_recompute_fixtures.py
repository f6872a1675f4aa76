"""Every figure stored for an H200 measurement is recomputed from the chunks, samples and probes stored
beside it, through `summarize_window`, and must match the stored row (the README's claim).

A change to the window analysis that moves any stored number on real data fails here, with the run, the
measurement and the column named. Burst rows (one chunk, their own analysis in runner/_burst.py) have no
window chunks and are left to the burst tests.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.analysis import summarize_window
from harness.runner import Chunk, ProbeReading
from harness.telemetry import SAMPLE_FIELDS, Sample

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
RUNS = sorted(p for p in H200.iterdir() if (p / "runs.parquet").exists())
PROBE_FIELDS = ("t_ns", "clock_mhz", "clock_min_mhz", "clock_max_mhz", "blocks", "span_ns")


def _rows(run: Path, table: str) -> list[dict]:
    return pq.read_table(run / table).to_pylist() if (run / table).exists() else []


def _by_measurement(rows):
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r["measurement_id"], []).append(r)
    return out


def _sample(row: dict) -> Sample:
    kw = {k: row[k] for k in SAMPLE_FIELDS}
    if kw["chiplet_clocks_mhz"] is not None:
        kw["chiplet_clocks_mhz"] = tuple(kw["chiplet_clocks_mhz"])
    return Sample(**kw)


@lru_cache(maxsize=None)
def recompute(run: Path) -> list[tuple[dict, dict]]:
    """(stored row, recomputed figures) for every measurement of `run` that has window chunks."""
    sm_count = _rows(run, "runs.parquet")[0]["sm_count"]
    chunks = _by_measurement(c for c in _rows(run, "chunks") if c["phase"] == "window")
    samples = _by_measurement(_rows(run, "samples"))
    probes = _by_measurement(_rows(run, "probes"))
    out = []
    for m in _rows(run, "measurements"):
        mid = m["measurement_id"]
        window = sorted(chunks.get(mid, []), key=lambda c: c["chunk_index"])
        if not window:
            continue
        figures = summarize_window(
            window_chunks=[Chunk(index=c["chunk_index"], phase=c["phase"], t_start_ns=c["t_start_ns"],
                                 t_end_ns=c["t_end_ns"], device_ns=c["device_ns"], launches=c["launches"])
                           for c in window],
            samples=[_sample(s) for s in samples.get(mid, [])],
            probes=[ProbeReading(**{k: p[k] for k in PROBE_FIELDS}) for p in probes.get(mid, [])],
            flops_per_launch=m["flops_per_launch"], sm_count=sm_count)
        out.append((m, figures))
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_stored_figures_recompute_from_chunks_samples_and_probes(run):
    pairs = recompute(run)
    diffs = [f"{m['measurement_id']} {k}: stored {m[k]!r}, recomputed {v!r}"
             for m, fig in pairs for k, v in fig.items() if k in m and not _same(v, m[k])]
    assert not diffs, "\n".join(diffs[:20])
    timed = [m for m in _rows(run, "measurements") if m["status"] in ("ok", "unsettled")]
    assert len(pairs) == len(timed)  # every timed measurement was recomputed, none skipped


def test_every_window_measurement_of_every_fixture_is_covered():
    # 126 in the runs of 2026-11-30; the runs of 2026-12-01 add theirs. Every timed sustained row (ok or
    # unsettled) has window chunks, and every one of them is recomputed.
    timed = sum(1 for run in RUNS for m in _rows(run, "measurements") if m["status"] in ("ok", "unsettled"))
    covered = sum(len(recompute(run)) for run in RUNS)
    assert covered == timed and covered > 126


def test_the_smollm2_gate_energy_is_the_window_rescaled_counter():
    # cuDNN on layer 3: the counter's three readings span half the 0.42 s window and moved 128.6 J;
    # rescaled to the window that is 257.4 J (the stored figure), not 128.6 J.
    run = next(p for p in RUNS if "smollm2-gate" in p.name)
    m, fig = recompute(run)[0]
    assert (m["kernel"], m["input_label"]) == ("sdpa-cudnn", "L03:captured")
    assert fig["energy_j"] == pytest.approx(257.356, abs=0.01)
    assert fig["energy_per_launch_j"] == pytest.approx(257.356 / m["window_launches"], rel=1e-4)
