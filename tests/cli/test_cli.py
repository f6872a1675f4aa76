"""The `bench` CLI: messages for bad input, and tables rendered at a fixed width."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

FIXTURE = Path(__file__).parent.parent / "fixtures" / "h200" / "20261130-043508-issue2-b7147a"
SMALL = ["--device", "cpu", "--quick", "--seq-len", "32", "--heads", "2", "--head-dim", "8", "--dtype", "fp32"]


def bench(*args, env=None):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, " ".join(result.output.split())  # rich wraps; compare words, not line breaks


def test_unknown_kernel(tmp_path):
    code, out = bench("sustained", *SMALL, "--kernel", "flash9", "--results", str(tmp_path))
    assert code == 2
    assert "No kernel named 'flash9'. Known kernels:" in out and "sdpa-cpu" in out


def test_heads_not_a_multiple(tmp_path):
    small = [a for i, a in enumerate(SMALL) if "--heads" not in SMALL[max(i - 1, 0):i + 1]]  # --heads 2 dropped
    code, out = bench("sustained", *small, "--heads", "6", "--heads-kv", "4", "--results", str(tmp_path))
    assert code == 2 and "Hq=6 is not a multiple of Hkv=4" in out


def test_dtype_the_kernel_does_not_support(tmp_path):
    code, out = bench("sustained", *SMALL[:-2], "--dtype", "fp16", "--results", str(tmp_path))
    assert code == 2 and "Kernel 'sdpa-cpu' does not support dtype 'fp16'" in out


@pytest.mark.skipif("torch" in sys.modules and __import__("torch").cuda.is_available(), reason="a GPU is present")
def test_cuda_device_without_a_gpu(tmp_path):
    code, out = bench("sustained", "--device", "cuda:0", "--kernel", "sdpa-cudnn", "--results", str(tmp_path))
    assert code == 2 and "asks for a CUDA GPU, but PyTorch" in out and "--device cpu" in out


def test_nvml_missing(monkeypatch):
    from harness.errors import TelemetryError
    from harness.telemetry import create_sampler

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    with pytest.raises(TelemetryError, match="nvidia-ml-py"):
        create_sampler("nvml", pci_bus_id="00000000:00:06.0").open()


def test_nvml_asked_for_on_a_cpu(tmp_path):
    code, out = bench("sustained", *SMALL, "--telemetry", "nvml", "--results", str(tmp_path))
    assert code == 2 and "--telemetry nvml needs the GPU's PCI bus id" in out and "--telemetry host" in out


def test_unwritable_results_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, out = bench("sustained", *SMALL, "--results", str(blocker / "sub"))
    assert code == 2 and "Cannot write results under" in out and "--results DIR" in out


def test_cpu_run_end_to_end(tmp_path):
    code, out = bench("sustained", *SMALL, "--input", "gaussian:1", "--idle-s", "0", "--window-s", "0.1",
                      "--warmin-cap-s", "0.3", "--results", str(tmp_path))
    assert code == 0, out
    assert "time and clock" in out and "sdpa-cpu" in out and "(complete)" in out
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "runs.parquet").is_file()


def test_doctor_without_nvml_or_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    code, out = bench("doctor", "--device", "cpu")
    assert code == 0
    assert "host: CPU frequency" in out  # the host backend says what it can and cannot read
    assert re.search(r"kernel sdpa-cpu\s*│\s*ok\s*│\s*available", out)


def test_list_kernels_explains_availability():
    code, out = bench("list", "kernels", "--device", "cpu")
    assert code == 0 and "sdpa-cudnn" in out and "runs on cuda, not cpu" in out


def test_final_tables_at_fixed_width_from_a_real_h200_run():
    from rich.console import Console

    from harness.analysis import aggregate_repeats
    from harness.report import sustained_tables
    from harness.results import read_run

    run = read_run(FIXTURE)
    rows = run.measurements.sort("measurement_id").to_dicts()
    console = Console(width=130, file=io.StringIO(), color_system=None, legacy_windows=False)
    for t in sustained_tables(aggregate_repeats(rows), title="h200"):
        console.print(t)
    text = console.file.getvalue()
    lines = text.splitlines()
    assert lines[0].strip() == "h200: time and clock"
    assert ("│gaussian:0.1 │ sdpa-cudnn │    3.9223 │ 0.37% │     1665 │        1500 │        0.901 │          5.885 │         "
            "4.6 s │ 1.0000│") in lines
    assert ("│gaussian:1   │ sdpa-flash │    6.7290 │ 0.15% │     1875 │        1709 │        0.911 │         11.498 │         "
            "5.9 s │ 1.0000│") in lines
    assert any(l.startswith("│gaussian:0.1 │ sdpa-cudnn │     690 │    2.683 │   560.6 │   0.813 │           99% │              "
                            "0% │ sw_power_cap") for l in lines)


def test_chiplet_columns_appear_only_for_chiplet_gpus():
    from rich.console import Console

    from harness.report import sustained_tables

    base = dict(config_index=0, input_label="gaussian:0.1", kernel="k", repeats=3, unsettled=0, errors=[],
                time_ns=1e6, time_range_frac=0.001, sm_clock_mhz=2350.0)

    def render(aggs):
        console = Console(width=160, file=io.StringIO(), color_system=None)
        console.print(sustained_tables(aggs)[0])
        return console.file.getvalue()

    assert "XCD spread" not in render([base])
    text = render([{**base, "chiplet_spread_mhz": 61.0, "slowest_chiplet": 5}])
    assert "XCD spread" in text and "slowest XCD" in text and "61 MHz" in text
    assert re.search(r"61 MHz\s*│\s*5", text)
