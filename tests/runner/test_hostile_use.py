"""Regressions of what the adversarial pass of issue 41 found (docs/experiments/adversarial-round3.md): each fails on
the code before its fix. The cases that need a kernel's own process are in test_isolation.py's hostile run."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_a_burst_of_stop_signals_is_one_signal_and_a_later_third_still_gets_out(monkeypatch):
    """B2: a kernel that sent SIGTERM to the run on each of its calls made the third arrive while the run wrote its
    status: the run's process died by SIGTERM, left `running`."""
    from harness.errors import RunStopped
    from harness.runner import _endings

    now = [100.0]
    killed = []
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    monkeypatch.setattr(_endings.os, "kill", lambda pid, sig: killed.append(sig))
    monkeypatch.setattr(_endings.signal, "signal", lambda sig, handler: None)
    stops = _endings.StopSignals()
    with pytest.raises(RunStopped):
        stops._handler(15, None)
    stops.ending()
    for _ in range(5):  # the burst, within BURST_S
        stops._handler(15, None)
    assert killed == [] and len(stops.pending) == 5
    now[0] += _endings.BURST_S + 0.5
    stops._handler(2, None)
    assert killed == []
    stops._handler(2, None)  # a person's third press, later: the way out
    assert killed == [2]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EBADF, errno.EIO])
def test_stdout_that_cannot_take_more_stops_the_printing_not_the_run(err):
    """I3 / B7: a progress line written to /dev/full, or to a descriptor a kernel closed, ended the run as failed
    with an internal error (exit 3)."""
    from harness.cli.streams import _ReaderSafe

    class Full:
        def write(self, text):
            raise OSError(err, os.strerror(err))

        def flush(self):
            raise OSError(err, os.strerror(err))

        def fileno(self):
            raise ValueError("no descriptor")

    stream = _ReaderSafe(Full())
    assert stream.write("a line\n") == 7 and stream.gone
    stream.flush()


def test_a_command_started_with_stdout_closed_runs():
    """I4: `bench ... >&-` ended with an AttributeError traceback and exit 1 (CI reads 1 as "slower")."""
    script = ("import os, sys\n"
              "from harness.cli.streams import guard_streams\n"
              "guard_streams()\n"
              "print('to nowhere')\n"
              "fd = os.open(os.devnull, os.O_RDONLY)\n"
              "sys.stderr.write(f'next fd {fd}\\n')\n")
    done = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: os.close(1), cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "next fd 1\n" not in done.stderr  # descriptor 1 holds /dev/null: no file opened later lands there


def test_a_seed_torch_cannot_take_is_refused_by_flag():
    """C19: --seed 2**70 was an internal error (Overflow when unpacking long long)."""
    from harness.errors import ConfigError
    from harness.inputs import AttentionShape
    from harness.suite import synthetic_specs

    shape = AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=8, head_dim_qk=8)
    with pytest.raises(ConfigError, match=r"--seed 1180591620717411303424: a seed must lie within \+-2\*\*62"):
        synthetic_specs(["gaussian:1"], shape=shape, seed=2**70)
    assert synthetic_specs(["gaussian:1"], shape=shape, seed=-1)[0].seed == -1


def test_a_part_that_is_no_harness_result_is_left_out_with_a_warning(tmp_path):
    """G3: a stray Parquet file under a part's name made `report` refuse the whole run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.errors import ResultsWarning
    from harness.results import RunWriter, read_run

    w = RunWriter(tmp_path, "r")
    w.write_run({"status": "complete"})
    w.append_measurement(measurement={"measurement_id": "c0-k-r0", "kernel": "k", "status": "ok"}, chunks=[],
                         samples=[], probes=[])
    pq.write_table(pa.table({"x": [1]}), w.path / "measurements" / "part-00009.parquet")
    with pytest.warns(ResultsWarning, match="part-00009.parquet is not a harness result"):
        run = read_run(w.path)
    assert run.measurements.height == 1


def test_a_base_exception_without_a_message_reads_cleanly():
    """B10: "raised GeneratorExit (a BaseException, not an Exception):  (at ...)"."""
    from harness.runner._ready import exit_text

    assert exit_text(GeneratorExit()) == "raised GeneratorExit (a BaseException, not an Exception)"
    assert exit_text(GeneratorExit("why")) == "raised GeneratorExit (a BaseException, not an Exception): why"


@pytest.mark.parametrize("command", ["error", "repro"])
def test_sys_exit_in_a_kernel_under_error_or_repro_is_its_row_and_exit_2(command, monkeypatch):
    """J1, J2: `bench error` and `bench repro` run kernels in their own process; a kernel's sys.exit(3) became the
    command's exit status (3, read as an internal error), with nothing printed."""
    from typer.testing import CliRunner

    from harness.cli import app

    monkeypatch.syspath_prepend(str(ROOT))
    extra = ["--launches", "3", "--interfere", "none"] if command == "repro" else []
    res = CliRunner().invoke(app, [command, "-k", "tests.runner.hostile_kernels:exits_3", "-k", "sdpa-cpu", "--device",
                                   "cpu", "--seq-len", "32", "--heads", "2", "--head-dim", "8", "--dtype", "fp32", "-i",
                                   "gaussian:1", *extra], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert "it called sys.exit(3) (at hostile_kernels.py:" in res.output and "failed (see above)" in res.output


def test_a_stopped_kernel_process_is_told_from_a_hung_one():
    """B12: a kernel that SIGSTOPs its own process was reported as stuck in a C call; it is now named as stopped."""
    import signal

    from harness.workers import process_stopped as _stopped

    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert not _stopped(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        for _ in range(100):
            if _stopped(proc.pid):
                break
            import time

            time.sleep(0.01)
        assert _stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not _stopped(proc.pid)  # gone: nothing to read
