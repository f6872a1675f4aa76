"""`trace_run` with a scripted ncu on the real H200 runs, and `bench trace` end to end on the CPU through a
fake `ncu` executable that runs the real child process and then prints the captured H200 CSV."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.config import RunConfig, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec
from harness.profiling import (
    CountersUnavailable,
    NothingProfiled,
    ProfilerError,
    ProfilerMissing,
    TraceConfig,
    read_trace_table,
    run_targets,
    trace_run,
)
from harness.profiling._child import main as child_main, spec_from_json, spec_to_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = (FIXTURES / "ncu" / "h200_sdpa_cudnn_s16384.csv").read_text()
ISSUE2 = FIXTURES / "h200" / "20261130-043508-issue2-b7147a"
TUNED = FIXTURES / "h200" / "20261130-051815-issue4-tuned-f59496"
CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
FOUND = lambda name: f"/usr/bin/{name}" if name == "ncu" else None


class ScriptedNcu:
    """Stands in for subprocess.run: records each command and answers with a fixed ncu output."""

    def __init__(self, stdout: str = REAL, child: dict | None = None, returncode: int = 0):
        self.calls, self.stdout, self.returncode = [], stdout, returncode
        self.child = child if child is not None else {"warm_launches": 2400, "warm_s": 8.0, "profiled_range": True}

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        return subprocess.CompletedProcess(cmd, self.returncode, f"TRACE-CHILD {json.dumps(self.child)}\n{self.stdout}", "")


@pytest.fixture
def issue2(tmp_path):
    return Path(shutil.copytree(ISSUE2, tmp_path / ISSUE2.name))


def test_targets_are_the_runs_timed_kernels_and_inputs():
    targets = run_targets(ISSUE2)
    assert [(t.kernel, t.spec.label) for t in targets] == [
        ("sdpa-cudnn", "gaussian:0.1"), ("sdpa-flash", "gaussian:0.1"), ("sdpa-cudnn", "gaussian:1"),
        ("sdpa-flash", "gaussian:1")]
    s = targets[0].spec
    assert (s.shape.seq_len, s.shape.heads_q, s.shape.head_dim_qk, s.shape.causal, s.dtype) == (16384, 32, 128, True, "bf16")
    assert spec_from_json(spec_to_json(s)) == s  # what the child receives is what the run timed
    with pytest.raises(ConfigError, match=r"\['triton-bf16'\] were not timed"):
        run_targets(ISSUE2, kernels=("triton-bf16",))


def test_trace_profiles_each_input_and_stores_pipe_cycles_beside_the_run(issue2):
    ncu = ScriptedNcu()
    res = trace_run(TraceConfig(run_dir=issue2, kernels=("sdpa-cudnn",), warm_s=8.0), runner=ncu, which=FOUND,
                    python="/usr/bin/python3")
    assert len(ncu.calls) == 2  # one ncu run per input of the kernel
    cmd = ncu.calls[0]
    assert cmd[:5] == ["/usr/bin/ncu", "--clock-control", "none", "--profile-from-start", "off"]
    child = cmd[cmd.index("/usr/bin/python3"):]
    assert child[:7] == ["/usr/bin/python3", "-m", "harness.profiling._child", "ncu", "--kernel", "sdpa-cudnn", "--spec"]
    assert json.loads(child[7])["shape"]["seq_len"] == 16384 and child[8:] == ["--device", "cuda:0", "--warm-s", "8.0"]
    rows = read_trace_table(issue2, "traces")
    assert [p.name for p in res.paths] == ["part-00000.parquet", "part-00001.parquet"] and len(rows) == 2
    r = rows[0]
    assert (r["kernel"], r["input_label"], r["launch_kernel"], r["tool"]) == ("sdpa-cudnn", "gaussian:0.1", CUDNN, "ncu")
    assert r["tensor_pct"] == 74.82 and r["achieved_cycles"] == 5_790_004 and r["overlap"] == pytest.approx(1.5364, 1e-4)
    assert (r["warm_launches"], r["warm_s"], r["cycles_basis"]) == (2400, 8.0, "elapsed")
    assert json.loads(r["metrics_json"])["sm__cycles_elapsed.max"] == [5790004.0, "cycle"]
    assert json.loads(r["command_json"]) == cmd


def test_a_kernel_regex_matching_nothing_lists_what_was_profiled(issue2):
    with pytest.raises(NothingProfiled) as err:
        trace_run(TraceConfig(run_dir=issue2, kernels=("sdpa-cudnn",), kernel_regex="flash_fwd"), runner=ScriptedNcu(),
                  which=FOUND)
    text = str(err.value)
    assert "--kernel-regex 'flash_fwd' matched none of the 1 launch(es)" in text and CUDNN in text
    assert not (issue2 / "traces").exists()  # nothing half-written
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        TraceConfig(run_dir=issue2, kernel_regex="[")


def test_missing_ncu_fails_before_any_work(issue2):
    ncu = ScriptedNcu()
    with pytest.raises(ProfilerMissing, match="not on PATH"):
        trace_run(TraceConfig(run_dir=issue2), runner=ncu, which=lambda name: None)
    assert ncu.calls == []


@pytest.mark.parametrize("fixture, error, phrase", [
    ("gvisor_library_not_loaded.txt", CountersUnavailable, "LibraryNotLoaded"),
    ("err_nvgpuctrperm.txt", CountersUnavailable, "ERR_NVGPUCTRPERM"),
    ("no_kernels_profiled.txt", NothingProfiled, "profiled no kernel"),
])
def test_ncu_refusals_reach_the_caller(issue2, fixture, error, phrase):
    out = (FIXTURES / "ncu_errors" / fixture).read_text()
    with pytest.raises(error, match=phrase):
        trace_run(TraceConfig(run_dir=issue2, kernels=("sdpa-flash",)), runner=ScriptedNcu(stdout=out), which=FOUND)


def test_child_failure_and_timeout(issue2):
    with pytest.raises(ProfilerError, match="child for sdpa-flash on gaussian:0.1 failed: Kernel 'sdpa-flash' cannot"):
        trace_run(TraceConfig(run_dir=issue2, kernels=("sdpa-flash",)), which=FOUND,
                  runner=ScriptedNcu(child={"error": "Kernel 'sdpa-flash' cannot run here"}))

    def slow(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    with pytest.raises(ProfilerError, match="did not finish within 5 s"):
        trace_run(TraceConfig(run_dir=issue2, timeout_s=5), runner=slow, which=FOUND)


def test_timeline_for_triton_kernels_runs_a_proton_child(tmp_path):
    run = Path(shutil.copytree(TUNED, tmp_path / TUNED.name))
    calls = []

    def runner(cmd, **kw):
        calls.append(cmd)
        if "proton" in cmd:
            out = Path(cmd[cmd.index("--out") + 1])
            info = {"trace": str(out), "png": str(out.with_suffix(".png")), "unit": "ns", "events": 4,
                    "scopes": {"softmax": {"share": 0.6}, "qk": {"share": 0.4}}}
            return subprocess.CompletedProcess(cmd, 0, "TRACE-CHILD " + json.dumps(info) + "\n", "")
        return ScriptedNcu()(cmd)

    res = trace_run(TraceConfig(run_dir=run, kernels=("triton-fp8-lean", "sdpa-cudnn"), timeline=True), runner=runner,
                    which=FOUND)
    proton = [c for c in calls if "proton" in c]
    assert len(proton) == 1 and proton[0][proton[0].index("--kernel") + 1] == "triton-fp8-lean"
    assert res.timelines[0]["png"].endswith("traces/timeline-triton-fp8-lean-gaussian_0.1.png")
    assert "ncu" not in proton[0][0]  # Proton runs without ncu around it


def test_child_runs_on_the_cpu_and_reports_its_warm_in(capsys):
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=16),
                     dtype="float32", source="gaussian:1")
    assert child_main(["ncu", "--kernel", "sdpa-cpu", "--spec", spec_to_json(spec), "--device", "cpu",
                       "--warm-s", "0.05"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("TRACE-CHILD "))
    assert info["warm_launches"] >= 10 and info["profiled_range"] is False
    assert child_main(["ncu", "--kernel", "nope", "--spec", spec_to_json(spec), "--device", "cpu",
                       "--warm-s", "0.05"]) == 2
    assert "No kernel named 'nope'" in capsys.readouterr().out


# --- `bench trace` end to end on the CPU --------------------------------------------------------------

FAKE_NCU = """#!{python}
import subprocess, sys
args = sys.argv[1:]
assert args[:4] == ["--clock-control", "none", "--profile-from-start", "off"], args
child = subprocess.run(args[args.index("-m") - 1:], capture_output=True, text=True)
sys.stdout.write(child.stdout)
sys.stderr.write(child.stderr)
if child.returncode:
    sys.exit(child.returncode)
sys.stdout.write(open({reply!r}).read())
"""


def _sdpa_cpu_run(results_dir: Path, inputs) -> Path:
    """One short sdpa-cpu run of `inputs` (a run directory for `bench trace` to read)."""
    from harness.runner import run_sustained

    proto = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05,
                                    settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.3, repeats=1)
    return run_sustained(RunConfig(kernels=("sdpa-cpu",), inputs=tuple(inputs), device="cpu", telemetry="none",
                                   protocol=proto, results_dir=results_dir)).path


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=16),
                     dtype="float32", source="gaussian:1")
    return _sdpa_cpu_run(tmp_path_factory.mktemp("results"), [spec])


@pytest.fixture(scope="module")
def captured_run(tmp_path_factory, tiny_capture_writer):
    """A CPU run of a captured input (a loader and a softmax scale that is not 1/sqrt(d)) and its control."""
    from harness.capture import capture_spec

    captured = capture_spec(tiny_capture_writer(tmp_path_factory.mktemp("captures"), scale=0.2), dtype="float32")
    captured = dataclasses.replace(captured, name="L03:captured")
    control = dataclasses.replace(captured, source="gaussian:0.1", loader=None, name="L03:gaussian:0.1")
    return _sdpa_cpu_run(tmp_path_factory.mktemp("results"), [captured, control]), (captured, control)


def test_targets_of_a_captured_input_keep_its_loader_and_scale(captured_run):
    """The measurement rows hold no loader and no scale: a target rebuilt from them could not load the capture
    (the H200's `bench trace` of a `--model` run failed so) and would time another softmax scale."""
    run, specs = captured_run
    targets = run_targets(run)
    assert [t.spec for t in targets] == list(specs)
    assert [spec_from_json(spec_to_json(t.spec)) for t in targets] == list(specs)


def test_bench_trace_of_a_captured_input_through_a_real_child(captured_run, tmp_path):
    run, _ = captured_run
    r = invoke(run, "--ncu", fake_ncu(tmp_path, FIXTURES / "ncu" / "h200_sdpa_cudnn_s16384.csv"), "--warm-s", "0.05")
    assert r.exit_code == 0, r.output
    assert "ncu: sdpa-cpu on L03:captured" in r.output and "ncu: sdpa-cpu on L03:gaussian:0.1" in r.output
    assert [row["input_label"] for row in read_trace_table(run, "traces")] == ["L03:captured", "L03:gaussian:0.1"]


def fake_ncu(tmp_path: Path, reply: Path) -> Path:
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(FAKE_NCU.format(python=sys.executable, reply=str(reply)))
    exe.chmod(0o755)
    return exe


def invoke(*args):
    from harness.cli.profiling import trace

    app = typer.Typer()
    app.command()(trace)
    app.command("noop")(lambda: None)
    return CliRunner().invoke(app, ["trace", *map(str, args)], env={"COLUMNS": "240"})


def test_bench_trace_end_to_end_through_a_real_child(cpu_run, tmp_path):
    r = invoke(cpu_run, "--ncu", fake_ncu(tmp_path, FIXTURES / "ncu" / "h200_sdpa_cudnn_s16384.csv"), "--warm-s", "0.05")
    assert r.exit_code == 0, r.output
    assert "ncu: sdpa-cpu on gaussian:1" in r.output and "Pipe cycles per launch" in r.output
    assert "74.8" in r.output and "1.54" in r.output and "traces:" in r.output
    assert f" {CUDNN} " in r.output  # the CUDA kernel's whole name (102 characters), on one line, never cut
    (row,) = read_trace_table(cpu_run, "traces")
    assert row["warm_launches"] >= 10 and row["kernel"] == "sdpa-cpu"  # the child really ran, on the CPU


@pytest.mark.parametrize("reply, args, message", [
    ("ncu_errors/gvisor_library_not_loaded.txt", (), "ncu could not start its profiler (LibraryNotLoaded)"),
    ("ncu/h200_sdpa_cudnn_s16384.csv", ("--kernel-regex", "^flash"), "matched none of the 1 launch(es)"),
    ("ncu/h200_sdpa_cudnn_s16384.csv", ("--kernel", "sdpa-cudnn"), "were not timed in"),
])
def test_bench_trace_bad_input_exits_2_with_one_paragraph(cpu_run, tmp_path, reply, args, message):
    r = invoke(cpu_run, "--ncu", fake_ncu(tmp_path, FIXTURES / reply), "--warm-s", "0", *args)
    assert r.exit_code == 2 and message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_bench_trace_without_ncu(cpu_run, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("harness.profiling._ncu.glob.glob", lambda pattern: [])
    r = invoke(cpu_run)
    assert r.exit_code == 2 and "ncu (Nsight Compute) is not on PATH" in " ".join(r.output.split())
    r = invoke(cpu_run, "--ncu", tmp_path / "nope")
    assert r.exit_code == 2 and "is not an executable file" in " ".join(r.output.split())


def test_a_later_failure_keeps_the_kernels_already_profiled(issue2):
    refused = (FIXTURES / "ncu_errors" / "err_nvgpuctrperm.txt").read_text()
    answers = iter([REAL, refused])

    def runner(cmd, **kw):
        return ScriptedNcu(stdout=next(answers))(cmd)

    with pytest.raises(CountersUnavailable):
        trace_run(TraceConfig(run_dir=issue2, kernels=("sdpa-cudnn",)), runner=runner, which=FOUND)
    assert [r["input_label"] for r in read_trace_table(issue2, "traces")] == ["gaussian:0.1"]


def test_importing_the_package_loads_nothing_heavy():
    # numpy too: the verdict procedure's functions import it where they use it, so the analysis package that
    # every report imports loads none of it.
    code = ("import sys, harness.profiling, harness.cli.profiling, harness.report; "
            "print([m for m in ('torch', 'triton', 'pyarrow', 'polars', 'matplotlib', 'numpy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_failed_timeline_keeps_the_pipe_counters_and_says_why(tmp_path):
    run = Path(shutil.copytree(TUNED, tmp_path / TUNED.name))
    messages = []

    def runner(cmd, **kw):
        if "proton" in cmd:
            return subprocess.CompletedProcess(cmd, 1, "TRACE-CHILD " + json.dumps({"error": "no libproton"}) + "\n", "")
        return ScriptedNcu()(cmd)

    res = trace_run(TraceConfig(run_dir=run, kernels=("triton-fp8-lean", "sdpa-cudnn"), timeline=True), runner=runner,
                    which=FOUND, on_message=messages.append)
    assert {r["kernel"] for r in res.rows} == {"triton-fp8-lean", "sdpa-cudnn"}  # both kernels still profiled
    assert res.timelines == [{"kernel": "triton-fp8-lean", "input_label": "gaussian:0.1",
                              "error": res.timelines[0]["error"]}]
    assert "no libproton" in res.timelines[0]["error"] and any("no libproton" in m for m in messages)
