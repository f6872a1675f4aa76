"""Issue 41: kernels that run in the run's own process (`--isolation none`, kernels handed in as objects) cannot end
the command, move its files or blame an innocent kernel; a run left `running` by a process that is gone says so.
Each test here fails on main (941094e)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.config import RunConfig, SustainedProtocol
from harness.inputs import AttentionShape, InputSpec
from harness.kernels import KernelRegistry, adapt_callable
from harness.results import read_run
from harness.runner import NullObserver, run_sustained
from tests.runner import hostile_kernels as hk

ROOT = Path(__file__).resolve().parents[2]
SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8)
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.05, chunk_s=0.02,
                                settle_trend_window_s=0.05, warmin_min_s=0.02, warmin_cap_s=0.1, repeats=2,
                                launch_timeout_s=5.0)


def _run(tmp_path, fns, *, observer=None, isolation="auto"):
    registry = KernelRegistry()
    for fn in fns:
        registry.add(adapt_callable(fn, name=fn.__name__))
    config = RunConfig(kernels=tuple(fn.__name__ for fn in fns), inputs=(InputSpec(shape=SHAPE, dtype="float32",
                                                                                  source="gaussian:1"),),
                       device="cpu", protocol=PROTO, results_dir=tmp_path, telemetry="none", isolation=isolation)
    res = run_sustained(config, registry=registry, observer=observer)
    return res, {r["kernel"]: r for r in read_run(res.path).measurements.iter_rows(named=True)}


def test_sys_exit_from_kernel_code_in_this_process_is_its_row_not_the_exit_status(tmp_path):
    """main: SystemExit(3) left run_sustained, the run ended failed ("SystemExit: 3") and bench exited 3."""
    res, rows = _run(tmp_path, [hk.exits_3, hk.exits_0, hk.honest])
    assert res.status == "complete"
    for name, code in (("exits_3", 3), ("exits_0", 0)):
        r = rows[name]
        assert r["status"] == "error" and f"it called sys.exit({code}) (at hostile_kernels.py:" in r["error"], r["error"]
        assert "which would have ended the run (it runs in the run's own process)" in r["error"]
    assert rows["honest"]["status"] in ("ok", "unsettled")


def test_a_writer_left_running_by_one_kernel_cannot_touch_the_next_kernels_inputs(tmp_path):
    """main: all kernels shared q, k, v; a thread the first kernel left behind kept writing q, and the next, honest
    kernel was refused as "it wrote into its inputs". Each kernel now gets tensors of its own."""
    try:
        res, rows = _run(tmp_path, [hk.leaves_a_writer, hk.honest])
    finally:
        hk.stop_writers()
    assert rows["leaves_a_writer"]["status"] == "error" and "it wrote into its inputs" in rows["leaves_a_writer"]["error"]
    assert rows["honest"]["status"] in ("ok", "unsettled"), rows["honest"]["error"]
    assert res.status == "complete"


def test_isolation_none_says_at_start_what_it_gives_up(tmp_path):
    from harness.runner import ISOLATION_NONE_NOTE

    said = []

    class Heard(NullObserver):
        def on_message(self, text):
            said.append(text)

    res, _ = _run(tmp_path, [hk.honest], observer=Heard(), isolation="none")
    assert said and said[0] == ISOLATION_NONE_NOTE
    assert "os._exit or a crash (SIGSEGV) ends the whole run" in ISOLATION_NONE_NOTE
    assert ISOLATION_NONE_NOTE in read_run(res.path).info["notes"]


def test_an_import_that_calls_sys_exit_is_the_kernels_error_in_this_process_too():
    """main: the module's sys.exit(0) at import ended `bench sustained --isolation none` with exit 0, timing nothing."""
    from harness.errors import UnknownKernelError
    from harness.kernels import KernelRegistry

    with pytest.raises(UnknownKernelError, match=r"Kernel spec 'tests.runner.exits_at_import:attention': importing it "
                                                 r"called sys.exit\(0\)"):
        KernelRegistry().get("tests.runner.exits_at_import:attention")


def test_relative_json_and_csv_stay_where_the_command_started_when_a_kernel_changes_directory(tmp_path, monkeypatch):
    """main: under --isolation none a kernel's os.chdir moved relative --json / --csv files into its new folder."""
    from typer.testing import CliRunner

    from harness.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    res = CliRunner().invoke(app, ["sustained", "-k", "tests.runner.hostile_kernels:changes_directory", "--device",
                                   "cpu", "--quick", "--telemetry", "none", "--heads", "2", "--seq-len", "32",
                                   "--head-dim", "8", "-i", "gaussian:1", "--dtype", "float32", "--repeats", "1",
                                   "--idle-s", "0", "--window-s", "0.05", "--isolation", "none", "--results", "r",
                                   "--json", "out.json", "--csv", "out.csv"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "out.json").read_text())["runs"][0]["status"] == "complete"
    assert (tmp_path / "out.csv").is_file() and (tmp_path / "r").is_dir()
    assert f"figures: {tmp_path / 'out.json'}" in res.output


def test_absolute_paths_makes_every_path_option_absolute(tmp_path, monkeypatch):
    from harness.cli.paths import absolute_paths

    monkeypatch.chdir(tmp_path)
    seen = {}

    def command(*, results: Path, json_out: str | None, csv_out: str | None, name: str, more: list):
        seen.update(results=results, json_out=json_out, csv_out=csv_out, name=name, more=more)

    absolute_paths(command)(results=Path("r"), json_out="a.json", csv_out="-", name="x.json", more=[Path("m")])
    assert seen == {"results": tmp_path / "r", "json_out": str(tmp_path / "a.json"), "csv_out": "-",
                    "name": "x.json", "more": [tmp_path / "m"]}


def test_what_a_kernel_writes_to_fd_1_never_reaches_json_on_stdout():
    """main: os.write(1, ...) or sys.__stdout__ from kernel code under --isolation none landed inside `--json -`."""
    script = textwrap.dedent("""
        import os, sys
        from harness.cli.common_args import export, export_console
        group = {"json_out": "-", "csv_out": None, "table_format": "table"}
        out = export_console(group)
        os.write(1, b"FD1 CHATTER\\n")
        sys.__stdout__.write("DUNDER CHATTER\\n"); sys.__stdout__.flush()
        print("PRINT CHATTER")
        export(out, group, {"schema": "x", "tables": {}})
        print("after the figures: stdout again")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    figures, _, after = done.stdout.partition("after the figures")
    assert json.loads(figures) == {"schema": "x", "tables": {}}
    assert "FD1 CHATTER" in done.stderr and "DUNDER CHATTER" in done.stderr and "PRINT CHATTER" in done.stderr
    assert after.strip() == ": stdout again"


def test_a_run_left_running_by_a_process_that_is_gone_is_reported_as_such(tmp_path):
    """main recorded no writer: a run whose process died by os._exit or SIGKILL read as `running` forever."""
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.results import OWNER_FILE, RunWriter, run_process_state

    writer = RunWriter(tmp_path, "20261204-120000-gone-abcdef")
    writer.write_run({"status": "running", "status_detail": "", "started_at": "2026-12-04T12:00:00"})
    owner = json.loads((writer.path / OWNER_FILE).read_text())
    assert owner["pid"] == os.getpid() and owner["host"]
    assert run_process_state(writer.path)[0] == "alive"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (writer.path / OWNER_FILE).write_text(json.dumps({**owner, "pid": dead.pid}))
    state, words = run_process_state(writer.path)
    assert state == "gone" and f"its process ({dead.pid} on {owner['host']}) is gone" in words
    assert words in read_run(writer.path).info["status_detail"]
    listed = CliRunner().invoke(app, ["list", "runs", "--results", str(tmp_path)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "running, process gone" in listed.output, listed.output
    (writer.path / OWNER_FILE).write_text(json.dumps({**owner, "host": "elsewhere-host"}))
    assert run_process_state(writer.path) == ("unknown", f"it is written by process {owner['pid']} on elsewhere-host, "
                                                         f"which cannot be checked from this host")
    (writer.path / OWNER_FILE).write_text(json.dumps({**owner, "start_ticks": -1}))  # the pid, reused by another
    assert run_process_state(writer.path)[0] == "gone"
