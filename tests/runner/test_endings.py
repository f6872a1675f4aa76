"""Every way a run ends leaves a true record (issue 14): signals, a full disk, kernels that raise, hang or
return the wrong thing, nothing timed, bad run names, stray part files, oversize shapes, CPU contention."""

from __future__ import annotations

import errno
import json
import os
import signal
import warnings

import pytest

from harness.config import RunConfig, SustainedProtocol
from harness.errors import ConfigError, ResultsError, ResultsWarning, RunStopped
from harness.inputs import AttentionShape, InputSpec
from harness.results import RunWriter, new_run_id, read_run
from harness.runner import NullObserver, run_sustained
from tests.runner.ending_kernels import registry as broken

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16)
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3, repeats=1,
                                launch_timeout_s=5.0)  # generous: this machine is shared
SPEC = InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1")


def config(tmp_path, kernels=("honest",), **kw) -> RunConfig:
    base = dict(kernels=kernels, inputs=(SPEC,), device="cpu", protocol=PROTO, results_dir=tmp_path, telemetry="none")
    base.update(kw)
    return RunConfig(**base)


def only_run(tmp_path):
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return run_dir, read_run(run_dir)


def stray_temp_files(run_dir):
    return [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]


class SignalAfter(NullObserver):
    """Sends itself `signals` (in order) when the first measurement ends, as `kill` would."""

    def __init__(self, *signals):
        self.signals = signals

    def on_measurement_end(self, row):
        for s in self.signals:
            os.kill(os.getpid(), s)


@pytest.fixture(autouse=True)
def _sigint_as_python_starts_it():
    # A run takes over only signals at their default disposition and leaves an ignored one ignored (nohup, or a
    # shell's `cmd &`, starts Python with SIGINT ignored). These tests send SIGINT as a terminal's Ctrl-C does, so
    # they start from Python's own handler however pytest itself was started.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_marks_the_run_incomplete_naming_it(tmp_path, sig):
    with pytest.raises(RunStopped) as info:
        run_sustained(config(tmp_path, kernels=("honest", "raises")), observer=SignalAfter(sig), registry=broken)
    assert info.value.signum == sig and isinstance(info.value, KeyboardInterrupt)
    run_dir, run = only_run(tmp_path)
    assert run.info["status"] == "incomplete" and run.info["finished_at"]
    assert f"interrupted by {signal.Signals(sig).name} after 1 timed measurements" in run.info["status_detail"]
    # What finished is readable: the error row of the kernel that raised, and the one timed measurement.
    assert sorted(run.measurements["status"].to_list())[0] == "error" and run.measurements.height == 2
    assert run.chunks.height > 0
    assert stray_temp_files(run_dir) == []
    # The handlers are the process's own again after the run.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_sigint_during_the_status_write_is_deferred(tmp_path, monkeypatch):
    """Two Ctrl-C ~1 ms apart: the second lands while the final status is written; it must not leave
    `running` or a stray runs.parquet temp file."""
    real = RunWriter.finish

    def finish_with_a_second_sigint(self, *a, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # arrives mid-write
        return real(self, *a, **kw)

    monkeypatch.setattr(RunWriter, "finish", finish_with_a_second_sigint)
    with pytest.raises(RunStopped, match="SIGINT"):
        run_sustained(config(tmp_path), observer=SignalAfter(signal.SIGINT), registry=broken)
    run_dir, run = only_run(tmp_path)
    assert run.info["status"] == "incomplete" and "SIGINT" in run.info["status_detail"]
    assert stray_temp_files(run_dir) == []


def test_a_signal_during_a_deferred_block_is_raised_after_it():
    from harness.runner import stop_signals

    with stop_signals() as stops:
        with pytest.raises(RunStopped, match="SIGTERM"):
            with stops.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                reached = True  # the block was not cut short
        assert reached and stops.stopping


def test_a_handler_installed_by_someone_else_is_left_alone(tmp_path):
    """The multi-GPU worker has its own SIGTERM handler; the run loop must not replace it."""
    seen = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        res = run_sustained(config(tmp_path), observer=SignalAfter(signal.SIGTERM), registry=broken)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert res.status == "complete" and [r["status"] for r in res.measurements] in (["ok"], ["unsettled"]), \
        [r.get("error") for r in res.measurements]
    assert seen == [signal.SIGTERM]


def test_disk_full_marks_the_run_failed_and_keeps_what_was_written(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    real, parts = pq.write_table, []

    def write_table(table, where, *a, **kw):
        if "measurements" in str(where) or "samples" in str(where):
            parts.append(where)
            if len(parts) > 2:  # the 2nd measurement's samples part finds the disk full
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(table, where, *a, **kw)

    monkeypatch.setattr(pq, "write_table", write_table)
    with pytest.raises(ResultsError, match="No space left") as info:
        run_sustained(config(tmp_path, kernels=("honest", "raises-later")), registry=broken)
    assert "The 1 measurements written before it stay readable" in str(info.value)
    run_dir, run = only_run(tmp_path)
    assert run.info["status"] == "failed" and "No space left on the device" in run.info["status_detail"]
    assert run.measurements.height == 1 and stray_temp_files(run_dir) == []
    assert not (run_dir / ".space-reserve").exists()


def test_each_broken_kernel_is_recorded_with_its_input_and_stage_and_the_others_run(tmp_path):
    kernels = ("honest", "raises", "raises-in-prepare", "returns-none", "wrong-shape", "raises-later", "hangs",
               "hangs-later", "nan-output")
    res = run_sustained(config(tmp_path, kernels=kernels, protocol=PROTO.replace(launch_timeout_s=1.0)),
                        registry=broken)
    assert res.status == "complete" and not res.nothing_timed
    _, run = only_run(tmp_path)
    assert run.info["status"] == "complete"
    rows = {r["kernel"]: r for r in run.measurements.iter_rows(named=True)}
    assert rows["honest"]["status"] in ("ok", "unsettled") and rows["honest"]["time_ns"] > 0
    where = "on gaussian:1 (B1 H2/1 S64 d16 causal, float32)"
    expect = {
        "raises": ("error", "raised in stage gate (first call): RuntimeError: boom"),
        "raises-in-prepare": ("error", "raised in stage prepare: ValueError: cannot build the kernel"),
        "returns-none": ("error", "stage gate (first call): its launch returned NoneType, not a tensor"),
        "wrong-shape": ("error", "its launch returned a tensor of shape [1, 64, 2, 16]; the attention output is"),
        "raises-later": ("error", "raised in stage measure (repeat 0): RuntimeError: illegal memory access"),
        "hangs": ("timeout", "its first call (the gate) did not return within the 1 s launch timeout in stage "
                             "gate (first call)"),
        "hangs-later": ("timeout", "a chunk did not return within the 1 s launch timeout in stage measure"),
    }
    for name, (status, text) in expect.items():
        assert rows[name]["status"] == status, (name, rows[name]["error"])
        assert f"Kernel {name!r} {where}" in rows[name]["error"] and text in rows[name]["error"], rows[name]["error"]
        assert rows[name]["time_ns"] is None
    # A NaN output fails the gate, and its SNR is not printed as "inf".
    assert rows["nan-output"]["status"] == "gate_failed"
    assert "SNR -inf dB" in rows["nan-output"]["error"] and "SNR inf" not in rows["nan-output"]["error"]
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_run_that_timed_nothing_says_so(tmp_path):
    res = run_sustained(config(tmp_path, kernels=("raises", "nan-output")), registry=broken)
    # Every kernel x input was attempted, but a run with no figures is `failed`, never `complete` as if fine
    # (docs/output.md: How a run ends), in the row on disk and in what the command exports.
    assert res.status == "failed" and res.nothing_timed
    info = read_run(res.path).info
    assert info["status"] == "failed" and info["finished_at"]
    assert info["status_detail"].startswith("nothing timed (1 error, 1 gate_failed): every kernel x input failed")
    assert res.info["status"] == "failed" and res.info["finished_at"] == info["finished_at"]
    assert res.untimed_summary() == "1 error, 1 gate_failed"


def test_cli_exit_codes_for_nothing_timed_and_an_oversize_shape(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    base = ["sustained", "--device", "cpu", "--quick", "--telemetry", "none", "--heads", "2", "--seq-len", "64",
            "--head-dim", "16", "-i", "gaussian:1", "--results", str(tmp_path / "r"), "--dtype", "float32"]
    res = CliRunner().invoke(app, [*base, "-k", "tests.runner.ending_kernels:raises"], env={"COLUMNS": "200"})
    assert res.exit_code == 4, res.output  # ExitCode.RUN_FAILED: not 1, which CI reads as "slower"
    assert "nothing was timed (1 error)" in res.output
    assert "ended failed after" in res.output and "nothing timed (1 error)" in res.output
    (run_dir,) = (tmp_path / "r").iterdir()
    assert read_run(run_dir).info["status"] == "failed"
    big = ["sustained", "--device", "cpu", "--quick", "-k", "sdpa-cpu", "--batch", "100000", "--results",
           str(tmp_path / "r")]  # at the default shape: H=32, S=16384, d=128, bf16
    res = CliRunner().invoke(app, big, env={"COLUMNS": "400"})
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "needs about" in res.output and "available host RAM" in res.output and "Nothing was allocated" in res.output
    assert len(list((tmp_path / "r").iterdir())) == 1  # no run directory for the refused shape


def test_oversize_shape_is_refused_before_allocating_naming_the_sizes(tmp_path):
    big = InputSpec(shape=AttentionShape(batch=100000, heads_q=32, heads_kv=32, seq_len=16384, head_dim_qk=128),
                    dtype="bfloat16", source="gaussian:0.1")
    with pytest.raises(ConfigError) as info:
        run_sustained(config(tmp_path, kernels=("sdpa-cpu",), inputs=(big,)))
    msg = str(info.value)
    assert "B=100000 Hq=32 Hkv=32 S=16384 dqk=128 dv=128 bfloat16 needs about" in msg
    assert "q 12.2 TiB, k 12.2 TiB, v 12.2 TiB, output 12.2 TiB" in msg and "available host RAM" in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, text", [
    ("../../../../tmp/x", "may hold only letters, digits, '.', '_' and '-'"),
    ("a/b", "it holds '/'"),
    ("two\nlines", "it holds '\\n'"),
    ("x" * 300, "at most 64 characters long; this one has 300"),
])
def test_bad_run_names_are_refused_before_anything_is_written(tmp_path, name, text):
    with pytest.raises(ConfigError, match="--name") as info:
        run_sustained(config(tmp_path / "r", run_name=name), registry=broken)
    assert text in str(info.value)
    assert not (tmp_path / "r").exists() and not (tmp_path.parent / "x").exists()


def test_run_ids_stay_inside_the_results_directory(tmp_path):
    assert "-bf16-h200_1.x-" in new_run_id("bf16-h200_1.x")
    for bad in ("..", "a/b", "../x"):
        with pytest.raises(ResultsError, match="not a single directory name"):
            RunWriter(tmp_path, bad)


def test_a_copied_part_file_is_ignored_with_a_warning(tmp_path):
    import shutil

    res = run_sustained(config(tmp_path), registry=broken)
    folder = res.path / "measurements"
    assert sorted(f.name for f in folder.iterdir()) == ["merged.parquet"]  # the run's parts, merged when it ended
    shutil.copy(folder / "merged.parquet", folder / "merged (copy).parquet")
    (folder / ".part-00001.parquet.abcd1234.tmp").write_bytes(b"half")  # an interrupted write: skipped silently
    with pytest.warns(ResultsWarning, match=r"ignored 1 file\(s\) the harness did not write \('merged \(copy\)"):
        run = read_run(res.path)
    assert run.measurements.height == 1 and run.info["status"] == "complete"


def test_cpu_runs_record_contention_before_and_after_and_say_what_the_times_are(tmp_path):
    from harness.report._markdown import _provenance

    res = run_sustained(config(tmp_path), registry=broken)
    run = read_run(res.path)
    c = json.loads(run.info["contention_json"])
    for when in ("before", "after"):
        assert c[when]["checked"] is True and len(c[when]["load_avg"]) == 3 and c[when]["cpu_count"] >= 1
        assert isinstance(c[when]["busy_processes"], list)
    assert "not sustained-clock GPU figures" in run.info["timing_note"] and run.info["status"] == "complete"
    rows = dict(_provenance(run.info).rows)
    assert rows["other processes"].startswith("host load before: load average [")
    assert "checked before the run" not in rows["other processes"]
    assert "not sustained-clock" in rows["timings"]


def test_a_host_whose_busy_processes_were_found_says_so():
    from harness.devices._cpu import CpuDevice

    # This test process's children are excluded; another busy process is whatever the host runs.
    c = CpuDevice().contention(interval_s=0.05, min_cpu_pct=0.0)
    assert c["checked"] and all(p["pid"] != os.getpid() for p in c["busy_processes"])


def test_the_contention_interval_overlaps_the_work_done_meanwhile():
    """A run starts the measurement before its set-up (or teardown) and reads it after: only what is left of the
    0.1 s is slept, and the interval recorded is the one measured, however long the work took."""
    from harness.devices._cpu import CpuDevice

    now, slept = [100.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    finish = CpuDevice().start_contention(interval_s=0.1, min_cpu_pct=0.0, clock=lambda: now[0], sleep=sleep)
    now[0] += 0.07  # the run's own work
    c = finish()
    assert slept == [pytest.approx(0.03)] and c["interval_s"] == 0.1 and isinstance(c["busy_processes"], list)
    finish = CpuDevice().start_contention(interval_s=0.1, min_cpu_pct=0.0, clock=lambda: now[0], sleep=sleep)
    now[0] += 0.5
    assert finish()["interval_s"] == 0.5 and len(slept) == 1  # longer than the interval: nothing slept


def test_watchdog_stops_python_level_work_and_restores_the_alarm():
    import time

    from harness.errors import KernelTimeout
    from harness.runner import Watchdog

    wd = Watchdog(0.1)
    assert wd.available
    t0 = time.monotonic()
    with pytest.raises(KernelTimeout, match="a sleep did not return within the 0.1 s launch timeout"):
        with wd.limit(what="a sleep"):
            time.sleep(5)
    assert time.monotonic() - t0 < 2
    with wd.limit(what="quick"):
        pass
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_no_warning_for_a_clean_run(tmp_path):
    res = run_sustained(config(tmp_path), registry=broken)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_run(res.path)
