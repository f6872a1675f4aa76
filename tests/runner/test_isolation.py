"""A user's kernel cannot end, fool or corrupt the run (issue 31): each runs in a process of its own, whose
end by any cause (sys.exit, a BaseException, os._exit, a signal, a hang in C) becomes that kernel's row.

One `bench sustained` run (`hostile`) holds every hostile kernel beside the bundled sdpa-cpu, so the suite
pays one torch import per kernel once; each test reads its own kernel's row. On the code before issue 31
the run ended at the first of them, so every test here fails there.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import read_run

H = "tests.runner.hostile_kernels"
HOSTILE = ("exits_0", "exits_3", "raises_base_exception", "os_exits", "segfaults", "hangs_in_c", "prints",
           "writes_inputs", "changes_directory", "returns_float64", "binary_stderr", "forges_protocol")
BASE = ["sustained", "--device", "cpu", "--quick", "--telemetry", "none", "--heads", "2", "--seq-len", "64",
        "--head-dim", "16", "-i", "gaussian:1", "--dtype", "float32", "--repeats", "1", "--idle-s", "0",
        "--window-s", "0.2", "--warmin-cap-s", "0.3"]  # the tests read rows and texts, not figures


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(CLI result, the run, rows by kernel) of one run of every hostile kernel and sdpa-cpu, figures on stdout."""
    results = tmp_path_factory.mktemp("hostile")
    kernels = [a for name in HOSTILE for a in ("-k", f"{H}:{name}")] + ["-k", "sdpa-cpu"]
    # hangs_in_c costs the launch timeout and its grace (2 s here): 2.5 s is far above a launch of these shapes (< 10 ms)
    res = CliRunner().invoke(app, [*BASE, *kernels, "--launch-timeout-s", "2.5", "--results", str(results),
                                   "--json", "-"], env={"COLUMNS": "200"})
    (run_dir,) = results.iterdir()
    run = read_run(run_dir)
    rows = {r["kernel"].rpartition(":")[2]: r for r in run.measurements.iter_rows(named=True)}
    return res, run, rows


def _row(hostile, name):
    return hostile[2][name]


def test_the_run_completes_times_the_good_kernel_and_exits_0(hostile):
    res, run, rows = hostile
    assert res.exit_code == 0, res.output
    assert run.info["status"] == "complete" and run.info["finished_at"]
    assert rows["sdpa-cpu"]["status"] in ("ok", "unsettled") and rows["sdpa-cpu"]["time_ns"] > 0
    assert not [p for p in run.path.iterdir() if p.name == ".space-reserve"]


def test_sys_exit_0_in_a_kernel_is_its_error_row_not_the_end_of_the_run(hostile):
    r = _row(hostile, "exits_0")
    assert r["status"] == "error" and "it called sys.exit(0) (at hostile_kernels.py:" in r["error"], r["error"]
    assert "its own process ended instead" in r["error"] and r["time_ns"] is None


def test_sys_exit_3_in_a_kernel_is_its_error_row_not_the_exit_status(hostile):
    r = _row(hostile, "exits_3")
    assert r["status"] == "error" and "it called sys.exit(3)" in r["error"], r["error"]
    assert hostile[0].exit_code == 0


def test_a_kernels_own_base_exception_is_its_error_row_not_exit_1(hostile):
    r = _row(hostile, "raises_base_exception")
    assert r["status"] == "error", r["error"]
    assert "it raised Escape (a BaseException, not an Exception): the kernel's own BaseException" in r["error"]
    assert "Traceback" not in hostile[0].stdout


def test_os_exit_in_a_kernel_is_its_error_row_not_a_run_left_running(hostile):
    r = _row(hostile, "os_exits")
    assert r["status"] == "error", r["error"]
    assert "its own process ended with exit status 0 without reporting why (os._exit(0)" in r["error"]
    assert hostile[1].info["status"] == "complete"


def test_a_crash_in_native_code_is_named_by_its_signal(hostile):
    r = _row(hostile, "segfaults")
    assert r["status"] == "error" and "was killed by SIGSEGV: a crash in native code" in r["error"], r["error"]


def test_a_hang_the_alarm_cannot_reach_is_killed_and_recorded_as_timeout(hostile):
    r = _row(hostile, "hangs_in_c")
    assert r["status"] == "timeout", r["error"]
    assert "did not return within the 2.5 s launch timeout, nor did its own process answer within 2 s more" in r["error"]
    assert "its process was killed (SIGKILL)" in r["error"]


def test_a_kernels_prints_go_to_stderr_and_json_on_stdout_stays_json(hostile):
    res = hostile[0]
    doc = json.loads(res.stdout)  # the whole of stdout is the figures document
    assert doc["runs"][0]["status"] == "complete"
    assert "a kernel's own chatter on stdout" in res.stderr
    assert _row(hostile, "prints")["status"] in ("ok", "unsettled")


def test_a_kernel_in_its_own_process_that_writes_its_inputs_is_refused(hostile):
    r = _row(hostile, "writes_inputs")
    assert r["status"] == "error" and "it wrote into its inputs: q, k changed during its gate calls" in r["error"]


def test_a_kernel_that_changes_directory_moves_nothing(hostile):
    _, run, rows = hostile
    assert rows["changes_directory"]["status"] in ("ok", "unsettled"), rows["changes_directory"]["error"]
    assert run.measurements.height == len(HOSTILE) + 1


def test_a_float64_output_is_refused_naming_the_dtype(hostile):
    r = _row(hostile, "returns_float64")
    assert r["status"] == "error", r["error"]
    assert "its launch returned float64 values; the attention output of these inputs is float32" in r["error"]


def test_bytes_that_are_not_utf8_on_a_kernels_stderr_do_not_stop_its_relay(hostile):
    """Adversarial round 3 (B13): the thread that drains a child's stderr died on them, the pipe filled, and the
    honest kernel, blocked on its next write, was killed as hung (`timeout`)."""
    r = _row(hostile, "binary_stderr")
    assert r["status"] in ("ok", "unsettled"), r["error"]


def test_a_kernel_that_forges_the_harness_protocol_is_its_error_row_named_so(hostile):
    """Adversarial round 3 (B14): a forged `timed` message was taken for a timing: KeyError 'chunks' (at _run.py)."""
    r = _row(hostile, "forges_protocol")
    assert r["status"] == "error" and "sent a timing the harness did not write" in r["error"], r["error"]
    assert "KeyError" not in r["error"]


def test_each_kernels_process_is_recorded_in_its_provenance(hostile):
    sources = json.loads(hostile[1].info["kernel_sources_json"])
    assert sources["sdpa-cpu"]["process"] == "in-process"
    assert sources[f"{H}:prints"]["process"] == "own process" and sources[f"{H}:prints"]["file_sha256"]


def test_sys_exit_when_the_kernel_module_is_imported_refuses_the_run_naming_it(tmp_path):
    res = CliRunner().invoke(app, [*BASE, "-k", "tests.runner.exits_at_import:attention", "-k", "sdpa-cpu",
                                   "--results", str(tmp_path / "r")], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "Kernel spec 'tests.runner.exits_at_import:attention': importing it called sys.exit(0)" in res.output
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())  # refused before any run


def test_a_kernel_that_writes_its_inputs_in_process_is_refused_and_the_next_runs_on_fresh_ones(tmp_path):
    """In the run's own process (kernels handed in as objects), where all kernels share q, k, v: the writer is
    refused by the checksum after its gate calls, the late writer after its timed launches, and the kernel
    after them is gated and timed on the spec's values (it raises if handed q = inf or k = 0)."""
    from harness.config import RunConfig, SustainedProtocol
    from harness.inputs import AttentionShape, InputSpec
    from harness.kernels import KernelRegistry, adapt_callable
    from harness.runner import run_sustained
    from tests.runner import hostile_kernels as hk

    registry = KernelRegistry()
    for fn in (hk.writes_inputs, hk.writes_inputs_later, hk.watches_inputs):
        registry.add(adapt_callable(fn, name=fn.__name__))
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16), dtype="float32",
                     source="gaussian:1")
    proto = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                    settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3, repeats=1,
                                    launch_timeout_s=5.0)
    config = RunConfig(kernels=("writes_inputs", "writes_inputs_later", "watches_inputs"), inputs=(spec,),
                       device="cpu", protocol=proto, results_dir=tmp_path, telemetry="none")
    res = run_sustained(config, registry=registry)
    rows = {r["kernel"]: r for r in read_run(res.path).measurements.iter_rows(named=True)}
    assert rows["watches_inputs"]["status"] in ("ok", "unsettled"), rows["watches_inputs"]["error"]
    first, later = rows["writes_inputs"], rows["writes_inputs_later"]
    assert first["status"] == "error" and "it wrote into its inputs: q, k changed during its gate calls" in first["error"]
    assert "q, k, v were made afresh for the others" in first["error"]
    assert later["status"] == "error" and "stage measure (repeat 0): it wrote into its inputs: k changed during its " \
                                          "timed launches (repeat 0)" in later["error"], later["error"]
    assert later["time_ns"] is None and res.status == "complete"


def test_a_kernel_that_changes_directory_in_process_cannot_move_a_relative_results_dir(tmp_path, monkeypatch):
    """Issue 31: with a relative --results, a kernel's os.chdir left the run `running`, lost the next kernel's row
    and a .space-reserve file. Paths are absolute from the start, here where the kernel shares the process."""
    from harness.config import RunConfig, SustainedProtocol
    from harness.inputs import AttentionShape, InputSpec
    from harness.kernels import KernelRegistry, adapt_callable
    from harness.runner import run_sustained
    from tests.runner import hostile_kernels as hk

    registry = KernelRegistry()
    registry.add(adapt_callable(hk.changes_directory, name="changes_directory"))
    registry.add(adapt_callable(hk.prints, name="after_it"))
    monkeypatch.chdir(tmp_path)
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16), dtype="float32",
                     source="gaussian:1")
    proto = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                    settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3, repeats=1,
                                    launch_timeout_s=5.0)
    config = RunConfig(kernels=("changes_directory", "after_it"), inputs=(spec,), device="cpu", protocol=proto,
                       results_dir="r", telemetry="none")
    res = run_sustained(config, registry=registry)
    (run_dir,) = (tmp_path / "r").iterdir()
    run = read_run(run_dir)
    assert run.info["status"] == "complete" and run.measurements.height == 2
    assert sorted(run.measurements["status"].to_list()) in (["ok", "ok"], ["ok", "unsettled"], ["unsettled", "unsettled"])
    assert not (run_dir / ".space-reserve").exists() and res.path == run_dir


def test_a_stop_signal_while_a_child_measures_ends_the_run_and_the_child(tmp_path):
    """SIGTERM arrives while a kernel's own process is in its warm-in: the run is `incomplete` with the signal
    named, and the child is gone (killed mid-measurement, not left behind holding the device)."""
    import os
    import signal

    from harness.config import RunConfig, SustainedProtocol
    from harness.errors import RunStopped
    from harness.inputs import AttentionShape, InputSpec
    from harness.runner import NullObserver, run_sustained

    class TermInWarmin(NullObserver):
        def on_phase(self, phase):  # relayed from the child, heard here while it measures
            if phase == "warmin":
                os.kill(os.getpid(), signal.SIGTERM)

    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16), dtype="float32",
                     source="gaussian:1")
    proto = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, repeats=1, launch_timeout_s=5.0)
    config = RunConfig(kernels=(f"{H}:honest",), inputs=(spec,), device="cpu", protocol=proto, results_dir=tmp_path,
                       telemetry="none")
    seen = {}
    import harness.runner._isolation as iso

    real = iso.ChildKernel._spawn

    def spawn(self):
        real(self)
        seen["pid"] = self._worker.pid

    iso.ChildKernel._spawn = spawn
    try:
        with pytest.raises(RunStopped, match="SIGTERM"):
            run_sustained(config, observer=TermInWarmin())
    finally:
        iso.ChildKernel._spawn = real
    (run_dir,) = tmp_path.iterdir()
    info = read_run(run_dir).info
    assert info["status"] == "incomplete" and "interrupted by SIGTERM" in info["status_detail"]
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)  # reaped: no such process


def test_every_device_wait_while_a_kernel_gets_ready_is_inside_a_bounded_stretch():
    """A GPU kernel that never ends makes the next synchronize hang. That must be inside a stretch the watchdog
    announces (a kernel's own process is killed for it), never in harness code after it (the gate's first
    reduction): prepare() returns at once after queuing work, so its stretch ends with the device's wait."""
    from harness.config import BurstProtocol
    from harness.devices._cpu import CpuDevice
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import adapt_callable
    from harness.runner import Watchdog
    from harness.runner._ready import InputsGuard, KernelSide, ready_kernel
    from tests.runner import hostile_kernels as hk

    open_stretch, waits = [], []

    class AsyncDevice(CpuDevice):  # the CPU, as a device whose launches return before the work is done
        kind = "cuda"

        def synchronize(self):
            waits.append(open_stretch[-1] if open_stretch else None)

    watchdog = Watchdog(5.0, on_limit=lambda what, s: open_stretch.append(what) if what else open_stretch.pop())
    side = KernelSide(device=AsyncDevice("cpu"), protocol=BurstProtocol(), gate=True, launch="loop", watchdog=watchdog,
                      clock=lambda: 0, sleep=lambda s: None, on_phase=lambda p: None, on_chunk=lambda c, k: None)

    class Arm:
        def arm(self, side, kernel, launch):
            return None

    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8), dtype="float32")
    inputs = make_inputs(spec, device="cpu")
    ready_kernel(side, Arm(), adapt_callable(hk.honest, name="honest"), inputs, InputsGuard(spec, inputs))
    assert waits and None not in waits, waits
    assert waits[0] == "prepare()" and "its first call (the gate)" in waits and waits[-1] == "its set-up for timing"


def _tiny_config(tmp_path, kernels, sources=("gaussian:1",), **proto):
    from harness.config import RunConfig, SustainedProtocol
    from harness.inputs import AttentionShape, InputSpec

    shape = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8)
    specs = tuple(InputSpec(shape=shape, dtype="float32", source=s) for s in sources)
    protocol = SustainedProtocol.quick(**{**dict(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.05,
                                                 chunk_s=0.02, settle_trend_window_s=0.05, warmin_min_s=0.02,
                                                 warmin_cap_s=0.1, repeats=1, launch_timeout_s=5.0), **proto})
    return RunConfig(kernels=tuple(kernels), inputs=specs, device="cpu", protocol=protocol, results_dir=tmp_path,
                     telemetry="none")


def _run_within(seconds, fn):
    """fn() in a thread: the test fails (instead of hanging the suite) when it does not return in time."""
    import threading

    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the run did not end within {seconds} s (it waits on a dead kernel process)"
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_a_child_that_dies_on_the_second_of_two_inputs_becomes_both_rows_and_the_run_goes_on(tmp_path):
    """Issue 41: both inputs are one comparison group, prepared in one child; it dies (SIGSEGV) in the second's
    gate. On main the run then sent `measure` for the first input to the dead child and waited forever. Now the
    first input's row names the death too, sdpa-cpu is timed on both, and the run completes."""
    from harness.runner import run_sustained

    config = _tiny_config(tmp_path, [f"{H}:dies_on_quiet_inputs", "sdpa-cpu"], sources=("gaussian:1", "gaussian:0.1"))
    res = _run_within(90, lambda: run_sustained(config))
    rows = {(r["kernel"].rpartition(":")[2], r["input_label"]): r for r in read_run(res.path).measurements.iter_rows(named=True)}
    assert res.status == "complete"
    died, held = rows[("dies_on_quiet_inputs", "gaussian:0.1")], rows[("dies_on_quiet_inputs", "gaussian:1")]
    assert died["status"] == "error" and "was killed by SIGSEGV" in died["error"], died["error"]
    assert held["status"] == "error" and "was killed by SIGSEGV" in held["error"], held["error"]
    assert "this input was prepared in that process and went with it" in held["error"]
    assert held["time_ns"] is None
    assert all(rows[("sdpa-cpu", i)]["status"] in ("ok", "unsettled") for i in ("gaussian:1", "gaussian:0.1"))
