"""`bench nightly --history`: tonight (a recorded H200 nightly run) judged against the nights before it, appended as a
night; a clock drop is the machine's, a cycles rise the code's; and nightly takes sustained's shape options."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from harness.commits import HistoryRequest, judge_nightly
from harness.history import append_runs, night_files
from harness.results import expand_run, write_table_atomic

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
TONIGHT = H200 / "20261201-225444-nightly-c88974"  # sdpa-cudnn x gaussian:0.1 / gaussian:1, S=8192, in-band clock


def _night(src: Path, dest: Path, *, time=1.0, cycles=1.0, run_id: str) -> Path:
    """A copy of the run with its times and in-band cycles scaled (clock = cycles / time follows) and its own id."""
    shutil.copytree(src, dest)
    expand_run(dest)  # the run's parts again (merged when it ended), each edited below
    info = pq.read_table(dest / "runs.parquet").to_pylist()[0]
    write_table_atomic(dest / "runs.parquet", "runs", [{**info, "run_id": run_id}])
    for part in sorted((dest / "measurements").glob("part-*.parquet")):
        rows = pq.read_table(part).to_pylist()
        for r in rows:
            if r["time_ns"]:
                r["time_ns"] *= time
                r["cycles_per_launch_inband"] *= cycles
                r["inband_clock_mhz"] *= cycles / time
        write_table_atomic(part, "measurements", rows)
    return dest


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Five nights of the recorded run, each a little different (0.1 % steps in both directions)."""
    tmp = tmp_path_factory.mktemp("nights")
    for i, f in enumerate((1.0, 1.001, 0.999, 1.0005, 0.9995)):
        run = _night(TONIGHT, tmp / f"run{i}", time=f, cycles=f, run_id=f"n{i}")
        append_runs(tmp / "history", [(run, "kernel")], night=f"n{i}")
    return tmp


def _judge(history, tmp_path, run, **kw):
    hist = tmp_path / "history"
    shutil.copytree(history / "history", hist)
    request = HistoryRequest(path=hist, night="tonight", nights=10, **kw)
    return judge_nightly(run, out_dir=tmp_path / "out", baseline_dir=None, threshold=0.02, figures=False,
                         history=request), hist


def test_tonight_as_before_passes_and_is_appended_with_its_dashboard(history, tmp_path):
    result, hist = _judge(history, tmp_path, TONIGHT)
    assert result.verdict == "pass" and result.exit_code == 0 and len(night_files(hist)) == 6
    summary = result.summary_md.read_text()
    assert summary.startswith("# Nightly sustained benchmark: PASS") and "## Against the history (the verdict)" in summary
    verdict = json.loads(result.verdict_json.read_text())
    assert verdict["history"]["verdict"] == "pass" and verdict["history"]["nights_in_history"] == 6
    assert {s["verdict"] for s in verdict["history"]["series"]} == {"same"}
    assert (tmp_path / "out" / "history" / "index.html").is_file() and result.history.appended is not None


def test_a_clock_drop_is_the_machine_and_a_cycles_rise_fails(history, tmp_path):
    clock, _ = _judge(history, tmp_path / "a", _night(TONIGHT, tmp_path / "slowclock", time=1.05, run_id="c"))
    assert clock.verdict == "pass" and clock.exit_code == 0
    assert {s.verdict for s in clock.history.analysis.verdict.series} == {"machine"}
    code, _ = _judge(history, tmp_path / "b", _night(TONIGHT, tmp_path / "slowcode", time=1.05, cycles=1.05, run_id="k"))
    assert code.verdict == "fail" and code.exit_code == 1
    assert "slower in cycles (the code)" in code.summary_md.read_text()


def test_no_append_judges_without_writing(history, tmp_path):
    result, hist = _judge(history, tmp_path, _night(TONIGHT, tmp_path / "pr", run_id="pr"), append=False)
    assert result.verdict == "pass" and len(night_files(hist)) == 5 and result.history.appended is None


def test_nightly_takes_the_decode_options_and_builds_its_history_request(monkeypatch, tmp_path):
    import harness.cli.commits as commits  # where `bench nightly` looks run_nightly up

    seen = {}

    def fake_run_nightly(config, **kw):
        seen.update(config=config, **kw)
        raise SystemExit(0)

    monkeypatch.setattr(commits, "run_nightly", fake_run_nightly)
    from harness.cli import app

    args = ["nightly", "--device", "cpu", "--quick", "-k", "sdpa-kvcache", "-i", "gaussian:0.1", "--batch", "16",
            "--seq-len-q", "1", "--seq-len-kv", "512", "--page-size", "16", "--heads", "8", "--heads-kv", "2",
            "--head-dim", "64", "--window-s", "0.3", "--history", str(tmp_path / "h"), "--night", "n1",
            "--history-nights", "5", "--results", str(tmp_path / "out")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    (spec,) = seen["config"].inputs
    s = spec.shape
    assert (s.batch, s.seq_len, s.seq_len_kv, s.page_size, s.heads_q, s.heads_kv, s.head_dim_qk) == (16, 1, 512, 16, 8, 2, 64)
    assert seen["config"].protocol.window_s == 0.3 and seen["baseline_dir"] is None
    h = seen["history"]
    assert (h.path, h.night, h.nights, h.control, h.append) == (tmp_path / "h", "n1", 5, "peak-gemm-bf16-random", True)
    assert h.control_gemm_size == 256  # the CPU's control: a GEMM of milliseconds
    res = CliRunner().invoke(app, ["nightly", "--device", "cpu", "--night", "n1"])
    assert res.exit_code == 2 and "--night belong(s) to --history" in res.output


def test_the_control_is_the_gemm_peak_with_the_suites_protocol(monkeypatch, tmp_path):
    import harness.commits._nightly_history as nightly_history  # where time_control looks run_peaks up
    from harness.commits._nightly_history import time_control

    seen = {}

    class Result:
        class run:
            path = tmp_path / "control-run"

    def fake_run_peaks(**kw):
        seen.update(kw)
        return Result()

    monkeypatch.setattr(nightly_history, "run_peaks", fake_run_peaks)
    config = type("C", (), {"device": "cpu", "telemetry": "auto", "protocol": "P", "results_dir": tmp_path,
                            "allow_busy": False})()
    run, warning = time_control(config, HistoryRequest(path=tmp_path, control="peak-gemm-bf16-random",
                                                       control_gemm_size=256))
    assert run == tmp_path / "control-run" and warning is None
    assert seen["kernels"] == ("peak-gemm-bf16-random",) and seen["protocol"] == "P" and seen["device"] == "cpu"
    assert seen["registry"].get("peak-gemm-bf16-random").extra["work_per_launch"] == 2 * 256**3
    assert time_control(config, HistoryRequest(path=tmp_path)) == (None, None)  # no control asked for
