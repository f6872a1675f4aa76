"""The nightly baseline rule across GPUs of one model: identity recorded, change named, gate widened."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.analysis import VerdictRule
from harness.commits import (
    GPU_SPREAD_ALLOWANCE,
    gpu_change,
    gpu_identity,
    judge_nightly,
    store_baseline,
)
from harness.results import expand_run, read_run, write_table_atomic

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
TONIGHT = H200 / "20261130-063951-commits-1-3e5cbb24-4bc550"
REPLICATE = H200 / "20261130-064214-replicate-036e2c"


def _baseline(tmp: Path, *, info: dict | None = None, scale_time: float = 1.0) -> Path:
    """tonight's run copied as the baseline, its info edited and its times scaled (tonight = 1 / scale slower)."""
    base = tmp / "baseline"
    run_dir = tmp / "src"
    shutil.copytree(TONIGHT, run_dir)
    expand_run(run_dir)  # the run's parts again (merged when it ended), each edited below
    run = read_run(run_dir)
    write_table_atomic(run_dir / "runs.parquet", "runs", [{**run.info, **(info or {})}])
    for part in sorted((run_dir / "measurements").glob("part-*.parquet")):
        rows = pq.read_table(part).to_pylist()
        for r in rows:
            r["time_ns"] = r["time_ns"] * scale_time if r["time_ns"] else r["time_ns"]
        write_table_atomic(part, "measurements", rows)
    store_baseline(run_dir, base, reason="test")
    return base


def test_identity_reads_model_host_and_bus_ids():
    info = read_run(REPLICATE).info
    g = gpu_identity(info)
    assert g == {"model": "NVIDIA H200", "host": info["host"], "pci_bus_id": "00000000:00:06.0,00000000:00:07.0",
                 "uuid": None, "serial": None}


def test_gpu_change_rules():
    a = {"device_name": "NVIDIA H200", "host": "h", "pci_bus_id": "00000000:00:06.0"}
    assert gpu_change(a, dict(a)) is None
    moved = gpu_change(a, {**a, "pci_bus_id": "00000000:00:07.0"})
    assert moved.startswith("Tonight's GPU is not the baseline's") and "00000000:00:07.0" in moved
    assert gpu_change(a, {**a, "host": "other"}) is not None  # the same slot on another host is another card
    assert gpu_change(a, {**a, "device_name": "NVIDIA A100"}) is None  # another model: machine_warning's case
    # UUID decides where both sides have one: same card in another slot is the same GPU, and vice versa.
    assert gpu_change({**a, "gpu_uuid": "GPU-1"}, {**a, "pci_bus_id": "x", "gpu_uuid": "GPU-1"}) is None
    assert gpu_change({**a, "gpu_uuid": "GPU-1"}, {**a, "gpu_uuid": "GPU-2"}) is not None


# The baseline here is tonight's own run with its times scaled: no between-run noise exists between them, so these
# tests of the GPU identity rule judge without it (the between-run variance is test_nightly.py's).
def _rule(threshold: float = 0.02):
    return VerdictRule(between_runs_cv=0.0, between_runs_source="baseline copied from tonight").with_threshold(
        threshold, source=f"gate {threshold:.2%}")


def test_same_gpu_3pct_slower_fails_at_2pct(tmp_path):
    base = _baseline(tmp_path, scale_time=0.97)
    res = judge_nightly(TONIGHT, out_dir=tmp_path / "out", baseline_dir=base, threshold=0.02, figures=False,
                        rule=_rule())
    assert res.verdict == "fail" and res.warnings == ()
    meta = json.loads((base / "BASELINE.json").read_text())
    assert meta["gpu"]["pci_bus_id"] == "00000000:00:06.0"


def test_other_gpu_of_the_model_widens_the_gate(tmp_path):
    base = _baseline(tmp_path, info={"pci_bus_id": "00000000:00:07.0"}, scale_time=0.97)
    res = judge_nightly(TONIGHT, out_dir=tmp_path / "out", baseline_dir=base, threshold=0.02, figures=False,
                        rule=_rule())
    assert res.verdict == "pass"  # 3 % is within the GPU-to-GPU spread
    (w,) = res.warnings
    assert "Tonight's GPU is not the baseline's" in w and "00000000:00:07.0" in w
    v = json.loads(res.verdict_json.read_text())
    assert v["gate"] == pytest.approx(0.02 + GPU_SPREAD_ALLOWANCE)
    assert v["gpu"]["pci_bus_id"] == "00000000:00:06.0" and v["baseline_gpu"]["pci_bus_id"] == "00000000:00:07.0"
    text = res.summary_md.read_text()
    assert "> **Warning:** Tonight's GPU is not the baseline's" in text
    assert "- WARNING: same model, different GPU: PCI 00000000:00:07.0 vs 00000000:00:06.0" in text
    # The sentence judges at the gate the verdict applied: a real 3.1 % change, below the widened 5.5 %.
    assert "- triton-bf16 on gaussian:0.1: B is 3.1 % slower, within the 5.5 % threshold (a real change, shown to " \
           "be smaller than it)" in text
    assert "threshold 5.5 % (gate 2.00% + 3.5% for another GPU of the model)" in text


def test_other_gpu_still_catches_a_large_regression(tmp_path):
    base = _baseline(tmp_path, info={"pci_bus_id": "00000000:00:07.0"}, scale_time=0.8)
    res = judge_nightly(TONIGHT, out_dir=tmp_path / "out", baseline_dir=base, threshold=0.02, figures=False,
                        rule=_rule())
    assert res.verdict == "fail" and res.exit_code == 1
