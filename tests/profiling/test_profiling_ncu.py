"""ncu: the real H200 CSV, the pipe-cycle table, the command builder, and every way ncu can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError, HarnessError
from harness.profiling import (
    NCU_METRICS,
    CountersUnavailable,
    NothingProfiled,
    ProfilerError,
    ProfilerMissing,
    check_ncu_output,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
    pipe_cycles,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = (FIXTURES / "ncu" / "h200_sdpa_cudnn_s16384.csv").read_text()
ERRORS = FIXTURES / "ncu_errors"
CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"


def test_real_h200_csv_parses_to_one_kernel_with_every_metric():
    (k,) = parse_ncu_csv(REAL)
    assert (k.launch_id, k.name, k.block, k.grid, k.device, k.compute_capability) == (
        0, CUDNN, "(384, 1, 1)", "(132, 1, 1)", "0", "9.0")
    assert k.value("gpu__time_duration.sum") == 3_323_616.0  # "3,323,616" ns: thousands separators read
    assert k.value("sm__cycles_elapsed.avg.per_second") == pytest.approx(1_723_367_615.82)
    assert k.value("sm__cycles_elapsed.max") == 5_790_004.0
    assert k.value("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active") == 74.82
    assert k.value("sm__inst_executed_pipe_xu.sum") == 139_596_172.0
    assert k.metrics["sm__pipe_tensor_op_hmma_cycles_active.sum"] == (2_164_260_864.0, "cycle")
    assert len(k.metrics) == 10
    check_ncu_output(stdout=REAL)  # the real output is not an error


def test_pipe_cycle_table_of_the_real_launch():
    p = pipe_cycles(parse_ncu_csv(REAL)[0])
    # sm__cycles_active.avg was not in this capture, so elapsed cycles are the basis (and it says so).
    assert p.basis == "elapsed" and p.active_cycles is None
    assert p.sm_clock_mhz == pytest.approx(1723.37, abs=0.01)
    assert p.achieved_cycles == 5_790_004
    assert p.matrix_cycles == pytest.approx(0.7482 * 5_790_004)
    assert (p.fma_cycles, p.alu_cycles, p.xu_cycles) == pytest.approx(
        (0.2054 * 5_790_004, 0.1967 * 5_790_004, 0.3861 * 5_790_004))
    assert p.vector_cycles == pytest.approx((0.2054 + 0.1967 + 0.3861) * 5_790_004)
    assert p.serialized_cycles == pytest.approx(p.matrix_cycles + p.vector_cycles)
    assert p.overlap == pytest.approx(1.5364, abs=1e-4)  # the tensor and vector work overlap by half
    # time x clock agrees with the elapsed cycles within 1.2 % (same launch, two counters)
    assert p.duration_ns * p.sm_clock_mhz * 1e-3 == pytest.approx(p.achieved_cycles, rel=0.012)


def test_active_cycles_are_the_basis_when_collected_and_units_are_normalised():
    text = ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
            '"3","k","sm__cycles_elapsed.max","Mcycle","2"\n'
            '"3","k","sm__cycles_active.avg","cycle","1,000,000"\n'
            '"3","k","sm__cycles_elapsed.avg.per_second","Ghz","1.5"\n'
            '"3","k","gpu__time_duration.sum","msecond","1.25"\n'
            '"3","k","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","%","50"\n'
            '"3","k","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active","%","n/a"\n')
    p = pipe_cycles(parse_ncu_csv(text)[0])
    assert (p.basis, p.achieved_cycles, p.matrix_cycles) == ("active", 2e6, 5e5)
    assert (p.sm_clock_mhz, p.duration_ns) == (1500.0, 1.25e6)
    assert p.fma_pct is None and p.vector_cycles is None and p.serialized_cycles is None  # never made up


def test_program_output_between_rows_and_before_the_header_is_skipped():
    text = 'hello\n"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\nstray print\n' \
           '"0","a","gpu__time_duration.sum","ns","5"\n"1","b","gpu__time_duration.sum","ns","7"\n'
    assert [(k.name, k.value("gpu__time_duration.sum")) for k in parse_ncu_csv(text)] == [("a", 5.0), ("b", 7.0)]
    assert parse_ncu_csv("==PROF== nothing\n") == []


def test_command_is_an_argument_list_with_clocks_as_found():
    target = ["/usr/bin/python3", "-m", "harness.profiling._child", "ncu", "--kernel", "sdpa cudnn; rm -rf /"]
    cmd = ncu_command(target=target, ncu="/opt/ncu", kernel_regex="flash_fprop", launch_skip=2, launch_count=1)
    assert isinstance(cmd, list) and all(isinstance(a, str) for a in cmd)
    assert cmd[:5] == ["/opt/ncu", "--clock-control", "none", "--profile-from-start", "off"]
    assert cmd[cmd.index("--metrics") + 1] == ",".join(NCU_METRICS)
    assert cmd[cmd.index("-k") + 1] == "regex:flash_fprop"
    assert cmd[cmd.index("-s") + 1] == "2" and cmd[cmd.index("-c") + 1] == "1"
    assert cmd[-len(target):] == target  # the target's arguments pass untouched, one element each
    # one clock setting, and it is "none": the locking default is never asked for
    assert cmd.count("--clock-control") == 1 and cmd[cmd.index("--clock-control") + 1] == "none"


@pytest.mark.parametrize("target, message", [
    ("python -m child", "list of strings"),
    ([], "non-empty"),
    (["python", 3], "list of strings"),
])
def test_command_refuses_shell_strings(target, message):
    with pytest.raises(ConfigError, match=message):
        ncu_command(target=target)


def test_command_refuses_bad_metric_names_and_regexes():
    with pytest.raises(ConfigError, match="single metric name"):
        ncu_command(target=["x"], metrics=["a,b"])
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        ncu_command(target=["x"], kernel_regex="(")


def test_ncu_missing_from_path_says_how_to_fix_it():
    with pytest.raises(ProfilerMissing) as err:
        find_ncu(which=lambda name: None, candidates=())
    text = str(err.value)
    assert "ncu (Nsight Compute) is not on PATH" in text and "--ncu /path/to/ncu" in text
    with pytest.raises(ProfilerMissing, match="--ncu '/nope/ncu' is not an executable"):
        find_ncu("/nope/ncu", which=lambda name: None)
    assert find_ncu(which=lambda name: "/usr/bin/ncu" if name == "ncu" else None) == "/usr/bin/ncu"


def test_ncu_found_in_a_standard_install_when_not_on_path(tmp_path):
    exe = tmp_path / "2025.3.1" / "ncu"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    import shutil

    assert find_ncu(which=lambda n: shutil.which(n) if n.startswith("/") else None,
                    candidates=(str(tmp_path / "*" / "ncu"),)) == str(exe)


@pytest.mark.parametrize("fixture, error, phrases", [
    ("gvisor_library_not_loaded.txt", CountersUnavailable, ("LibraryNotLoaded", "gVisor", "Failed to initialize")),
    ("err_nvgpuctrperm.txt", CountersUnavailable, ("ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0")),
    ("no_kernels_profiled.txt", NothingProfiled, ("profiled no kernel", "cudaProfilerStart")),
    ("unknown_metric.txt", ProfilerError, ("Failed to find metric", "drop it from --metrics")),
])
def test_ncu_failures_are_one_paragraph_harness_errors(fixture, error, phrases):
    with pytest.raises(error) as err:
        check_ncu_output(stdout=(ERRORS / fixture).read_text(), returncode=1 if "unknown" in fixture else 0)
    assert isinstance(err.value, HarnessError) and "\n" not in str(err.value)
    for p in phrases:
        assert p in str(err.value), p


def test_a_failed_program_without_ncu_errors_reports_its_last_lines():
    with pytest.raises(ProfilerError, match=r"exited with status 1; its last lines: .*Traceback.*CUDA out of memory"):
        check_ncu_output(stdout="==PROF== Connected\n", stderr="Traceback (most recent call last):\nCUDA out of memory",
                         returncode=1)
