"""Kernel-only (burst) timing: the trace arithmetic on hand-made events, and `run_burst` end to end on the
CPU with sdpa-cpu (profiler CPU op times; CUPTI kernel times need a GPU), alone and next to a sustained run."""

import time

import polars as pl
import pytest
from h200_runs import ISSUE2

from harness.analysis import summarize_run
from harness.config import RunConfig, SustainedProtocol
from harness.errors import KernelError, ResultsError
from harness.inputs import AttentionShape, InputSpec
from harness.report import build_report, render_html
from harness.results import read_run
from harness.runner import BurstConfig, BurstProtocol, ProfEvent, device_time_from_events, run_burst, run_sustained
from harness.telemetry import Sample

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16)
SPEC = InputSpec(shape=SHAPE, dtype="float32", source="gaussian:0.1")
# 400 timed launches of this tiny SDPA last ~10-20 ms on the CPU: several 2 ms samples land inside even when
# the sampler thread is delayed (with 20 launches, ~1 ms, a loaded machine often left none: no clock).
PROTO = BurstProtocol(warmup_launches=5, timed_launches=400, repeats=2, idle_s=0.02, sample_period_s=0.002)


def ev(name, activity, start, dur, on_device=False):
    return ProfEvent(name=name, on_device=on_device, activity=activity, start_ns=start, duration_ns=dur)


def test_cuda_time_is_every_kernel_memcpy_and_memset_per_launch():
    events = [
        ev("harness::burst_timed", "user_annotation", 0, 1000),
        ev("harness::burst_timed", "gpu_user_annotation", 0, 990, on_device=True),  # a range, not work
        ev("cudaLaunchKernel", "cuda_runtime", 10, 5),
        ev("aten::scaled_dot_product_attention", "cpu_op", 5, 50),
        *[ev("fmha_kernel", "kernel", 100 + 200 * i, 150, on_device=True) for i in range(4)],
        *[ev("Memset (Device)", "gpu_memset", 95 + 200 * i, 2, on_device=True) for i in range(4)],
    ]
    t = device_time_from_events(events, launches=4, device_kind="cuda")
    assert t.source == "cupti" and t.total_ns == 4 * 152 and t.per_launch_ns == 152
    assert t.by_name == {"fmha_kernel": (4, 600), "Memset (Device)": (4, 8)}
    assert "1x fmha_kernel (0.00015 ms)" in t.note()


def test_cpu_time_is_the_top_level_ops_inside_the_timed_range():
    events = [
        ev("aten::scaled_dot_product_attention", "cpu_op", -100, 50),  # before the range: warm-up
        ev("harness::burst_timed", "user_annotation", 0, 1000),
        ev("aten::scaled_dot_product_attention", "cpu_op", 10, 300),
        ev("aten::_scaled_dot_product_flash_attention_for_cpu", "cpu_op", 20, 280),  # nested: not counted again
        ev("aten::empty", "cpu_op", 25, 5),
        ev("aten::scaled_dot_product_attention", "cpu_op", 400, 310),
    ]
    t = device_time_from_events(events, launches=2, device_kind="cpu")
    assert t.source == "cpu-ops" and t.total_ns == 610 and t.per_launch_ns == 305


def test_a_trace_without_kernels_is_an_error():
    with pytest.raises(KernelError, match="CUPTI is unavailable"):
        device_time_from_events([ev("x", "cpu_op", 0, 1)], launches=1, device_kind="cuda")


class FakeGpuSampler:
    """Clock and power readings so the burst row's telemetry columns are exercised on the CPU."""

    name = "fake"

    def open(self):
        pass

    def read(self):
        return Sample(t_ns=time.monotonic_ns(), sm_clock_mhz=1980.0, power_w=300.0, source="poll")

    def drain(self):
        return []

    def describe(self):
        return {"fake": "ok"}

    def close(self):
        pass


def test_burst_on_cpu_writes_burst_rows(tmp_path):
    cfg = BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", protocol=PROTO, results_dir=tmp_path)
    res = run_burst(cfg, sampler=FakeGpuSampler(), command="bench burst --device cpu")
    run = read_run(res.path)
    m = run.measurements
    assert run.complete and m.height == 2
    assert m["status"].to_list() == ["burst", "burst"] and set(m["launch_strategy"]) == {"burst-profiler"}
    assert m["window_launches"].to_list() == [400, 400] and (m["time_ns"] > 0).all()
    assert m["sm_clock_mhz"].to_list() == [1980.0, 1980.0] and m["power_w"].to_list() == [300.0, 300.0]
    assert "profiler CPU time of the top-level ops" in m["launch_note"][0]
    assert "aten::scaled_dot_product_attention" in m["launch_note"][0]
    assert m["settled"].is_null().all()  # no settling in a burst
    assert set(run.chunks["phase"]) == {"burst"}
    assert "idle" in set(run.samples["phase"]) <= {"idle", "warmup", "timed", "between"}
    assert '"kind": "burst"' in run.info["protocol_json"]
    # A burst-only run reports its burst table and no sustained one.
    summary = summarize_run(run)
    assert summary.burst and not [a for a in summary.sustained if a.get("repeats")]
    assert summary.burst_vs_sustained is None


def test_burst_into_a_sustained_run_puts_them_side_by_side(tmp_path):
    # A 0.3 s window sampled every 2 ms: a loaded CI machine can starve the sampler thread for 0.1 s, and a
    # window with no clock sample has no NVML clock to split burst vs sustained by.
    proto = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.3, chunk_s=0.05,
                                    settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.5,
                                    sample_period_s=0.002)
    sustained = run_sustained(RunConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", telemetry="none",
                                        protocol=proto, results_dir=tmp_path), sampler=FakeGpuSampler())
    run_burst(BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", protocol=PROTO, into=sustained.path),
              sampler=FakeGpuSampler(), command="bench burst --into X")
    run = read_run(sustained.path)
    assert run.complete and "burst appended" in run.info["notes"]
    assert run.measurements.filter(pl.col("status") == "burst").height == 2
    bvs = summarize_run(run).burst_vs_sustained
    (row,) = bvs.rows
    assert (row.kernel, row.input_a, row.clock_source) == ("sdpa-cpu", "gaussian:0.1", "nvml")
    assert row.time.value == pytest.approx(row.cycles.value * row.clock.value, rel=1e-12)
    html = render_html("t", "h", build_report(run, figures=False).sections)
    assert "Burst vs sustained" in html and "Burst: kernel-only time" in html


def test_into_a_run_from_another_device_is_refused(copy_run, tmp_path):
    run = copy_run(ISSUE2)
    cfg = BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", protocol=PROTO, into=run)
    with pytest.raises(ResultsError, match="was measured on NVIDIA H200 .* this burst runs on"):
        run_burst(cfg, sampler=FakeGpuSampler())


@pytest.mark.gpu
def test_burst_on_cuda_reads_cupti_kernel_times(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    shape = AttentionShape(batch=1, heads_q=8, heads_kv=8, seq_len=2048, head_dim_qk=128)
    spec = InputSpec(shape=shape, dtype="bf16", source="gaussian:0.1")
    proto = BurstProtocol(warmup_launches=20, timed_launches=20, repeats=1, idle_s=0.1)
    res = run_burst(BurstConfig(kernels=("sdpa-flash",), inputs=(spec,), device="cuda:0", protocol=proto,
                                results_dir=tmp_path, allow_busy=True), command="test")
    (row,) = res.measurements
    assert row["status"] == "burst" and "CUPTI device time" in row["launch_note"]
    # CUDA events around the same launches: the kernel-only time can only be shorter (no launch gaps).
    from harness.devices import open_device
    from harness.inputs import make_inputs
    from harness.kernels import default_registry

    launch = default_registry().get("sdpa-flash").prepare(make_inputs(spec, device="cuda:0"))
    dev = open_device("cuda:0")
    for _ in range(20):
        launch()
    start = dev.mark()
    for _ in range(20):
        launch()
    end = dev.mark()
    dev.wait(end)
    assert 0.5 * dev.elapsed_ns(start, end) / 20 < row["time_ns"] <= 1.05 * dev.elapsed_ns(start, end) / 20
