"""run_sustained end to end on the CPU: real launches, injected telemetry, results on disk."""

from __future__ import annotations

import polars as pl
import pytest

from harness.config import RunConfig, SustainedProtocol
from harness.errors import DeviceBusyError, UnknownKernelError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec
from harness.kernels import KernelRegistry
from harness.results import read_run
from harness.runner import NullObserver, run_sustained
from harness.telemetry import Sample

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16)
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.15, chunk_s=0.05,
                                settle_trend_window_s=0.1, warmin_min_s=0.05, warmin_cap_s=0.5)


def registry(calls: list | None = None) -> KernelRegistry:
    reg = KernelRegistry()
    for name in ("a", "b", "c"):
        @reg.kernel(name, dtypes={"float32"}, devices={"cpu"})
        def prepare(inputs, _name=name):
            import torch.nn.functional as F

            def launch():
                if calls is not None:
                    calls.append(_name)
                return F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, is_causal=True, scale=inputs.scale,
                                                      enable_gqa=True)

            return launch
    return reg


class FlakySampler:
    """Readings where every `fail_every`-th read fails: the gaps must show, not vanish."""

    name = "flaky"

    def __init__(self, fail_every: int = 0):
        self.n = 0
        self.fail_every = fail_every

    def open(self):
        pass

    def read(self):
        import time

        self.n += 1
        if self.fail_every and self.n % self.fail_every == 0:
            raise RuntimeError("NVML SM clock read failed: NVML_ERROR_GPU_IS_LOST")
        return Sample(t_ns=time.monotonic_ns(), sm_clock_mhz=1500.0 + self.n % 3, power_w=690.0,
                      reasons=0x4, reason_names="sw_power_cap")

    def drain(self):
        return []

    def describe(self):
        return {"flaky": "fails reads on purpose"}

    def close(self):
        pass


def config(tmp_path, **kw) -> RunConfig:
    base = dict(kernels=("a", "b", "c"), inputs=(InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1"),),
                device="cpu", protocol=PROTO, results_dir=tmp_path)
    base.update(kw)
    return RunConfig(**base)


class Order(NullObserver):
    def __init__(self):
        self.started = []

    def on_measurement_start(self, *, kernel, input_label, repeat):
        self.started.append((repeat, kernel))


def test_rotation_alignment_and_gaps(tmp_path):
    obs = Order()
    res = run_sustained(config(tmp_path, protocol=PROTO.replace(repeats=3)), observer=obs, registry=registry(),
                        sampler=FlakySampler(fail_every=10))
    # Kernel order is rotated between repeats so no kernel always runs first (warmest or coolest).
    assert obs.started == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b")]
    run = read_run(res.path)
    assert run.info["status"] == "complete" and run.info["telemetry_backend"] == "host"
    # The code is identified even without git: a digest of the harness package and of each kernel's file.
    import json

    from harness.results import tree_digest

    assert json.loads(run.info["versions_json"])["harness_tree_sha256"] == tree_digest(
        __import__("pathlib").Path(__import__("harness").__file__).parent)
    assert len(json.loads(run.info["kernel_sources_json"])["a"]["file_sha256"]) == 64
    m = run.measurements.sort("measurement_id")
    assert m.height == 9 and set(m["status"]) <= {"ok", "unsettled"}
    # Every window sample lies inside its measurement's window, and the window is where the figures come from.
    joined = run.samples.filter(pl.col("phase") == "window").join(
        m.select("measurement_id", "window_start_ns", "window_end_ns"), on="measurement_id")
    assert joined.height > 0
    assert joined.filter((pl.col("t_ns") < pl.col("window_start_ns")) | (pl.col("t_ns") > pl.col("window_end_ns"))).height == 0
    # The failed reads are kept as error rows with no values, and sampling resumed after them.
    errors = run.samples.filter(pl.col("error").is_not_null())
    good = run.samples.filter(pl.col("error").is_null())
    assert errors.height > 0 and errors["sm_clock_mhz"].null_count() == errors.height
    assert "GPU_IS_LOST" in errors["error"][0]
    assert good.height > 5 * errors.height  # sampling resumed after each failure
    assert m["sample_errors_in_window"].sum() == errors.filter(pl.col("phase") == "window").height
    # Figures are recomputable from stored rows: cycles = time x clock.
    for r in m.filter(pl.col("sm_clock_mhz").is_not_null()).iter_rows(named=True):
        assert r["cycles_per_launch"] == pytest.approx(r["time_ns"] * r["sm_clock_mhz"] * 1e-3)
        assert r["cycles_clock"] == "nvml"
        chunks = run.chunks.filter((pl.col("measurement_id") == r["measurement_id"]) & (pl.col("phase") == "window"))
        assert r["time_ns"] == pytest.approx(chunks["device_ns"].sum() / chunks["launches"].sum())
        assert r["window_start_ns"] == chunks["t_start_ns"].min() and r["window_end_ns"] == chunks["t_end_ns"].max()


def test_ctrl_c_keeps_finished_measurements_and_marks_incomplete(tmp_path):
    class Interrupt(NullObserver):
        def on_measurement_end(self, row):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sustained(config(tmp_path), observer=Interrupt(), registry=registry(), sampler=FlakySampler())
    (run_dir,) = tmp_path.iterdir()
    run = read_run(run_dir)
    assert run.info["status"] == "incomplete" and "interrupted" in run.info["status_detail"]
    assert run.measurements.height == 1
    assert run.chunks.height > 0 and run.samples.height > 0


def test_unknown_kernel_lists_known_ones(tmp_path):
    with pytest.raises(UnknownKernelError, match="Known kernels: a, b, c"):
        run_sustained(config(tmp_path, kernels=("nope",)), registry=registry())


def test_unsupported_dtype_is_refused_before_anything_runs(tmp_path):
    spec = InputSpec(shape=SHAPE, dtype="bfloat16", source="gaussian:1")
    with pytest.raises(UnsupportedInputError, match="does not support dtype 'bfloat16'; it supports fp32"):
        run_sustained(config(tmp_path, inputs=(spec,)), registry=registry())
    assert list(tmp_path.iterdir()) == []


def test_busy_gpu_is_refused_unless_allowed(tmp_path):
    from harness.devices import ProcessInfo, check_idle
    from harness.devices._cpu import CpuDevice

    class Busy(CpuDevice):
        def other_processes(self):
            return [ProcessInfo(4242, 3 * 2**30)]

    with pytest.raises(DeviceBusyError, match=r"busy: other compute processes are on it \(pid 4242 \(3072 MiB\)\).*--allow-busy"):
        check_idle(Busy(), allow_busy=False)
    assert [p.pid for p in check_idle(Busy(), allow_busy=True)] == [4242]
    res = run_sustained(config(tmp_path, kernels=("a",), allow_busy=True, protocol=PROTO.replace(repeats=1)),
                        registry=registry(), device=Busy(), sampler=FlakySampler())
    assert '"pid": 4242' in read_run(res.path).info["busy_processes_json"]


def test_gate_failure_is_recorded_and_not_timed(tmp_path):
    reg = registry()

    launches = []

    @reg.kernel("zeros", dtypes={"float32"}, devices={"cpu"})
    def zeros(inputs):
        import torch

        def launch():
            launches.append(1)
            return torch.zeros_like(inputs.q)

        return launch

    res = run_sustained(config(tmp_path, kernels=("zeros", "a"), protocol=PROTO.replace(repeats=1)), registry=reg,
                        sampler=FlakySampler())
    rows = {r["kernel"]: r for r in res.measurements}
    assert rows["zeros"]["status"] == "gate_failed" and "failed the correctness gate" in rows["zeros"]["error"]
    assert rows["zeros"].get("time_ns") is None
    assert rows["a"]["status"] in ("ok", "unsettled")
    assert len(launches) == 1  # the gate's one launch; never timed


def test_samples_are_labelled_window_by_the_row_window_not_by_the_loop_phases(tmp_path):
    # A device that was busy for only half of each chunk's wall time (a host stall between launches, as a
    # loaded CI machine makes): the first window chunk then starts after the last warm-in chunk ended, and
    # the samples in that gap belong to no figure. They must not be stored as window samples.
    from harness.devices._cpu import CpuDevice

    class HalfBusy(CpuDevice):
        def elapsed_ns(self, start, end):
            return super().elapsed_ns(start, end) // 2

    res = run_sustained(config(tmp_path, kernels=("a",), protocol=PROTO.replace(repeats=1, sample_period_s=0.002)),
                        registry=registry(), device=HalfBusy(), sampler=FlakySampler())
    run = read_run(res.path)
    (m,) = run.measurements.to_dicts()
    window = run.samples.filter(pl.col("phase") == "window")["t_ns"].to_list()
    assert window and all(m["window_start_ns"] <= t <= m["window_end_ns"] for t in window)
    gap = [s for s in run.samples.to_dicts() if s["t_ns"] < m["window_start_ns"] and s["phase"] not in ("idle",)]
    assert gap, "the half-busy device should leave samples before the window's first chunk"
    assert m["samples_in_window"] == len([t for t in window])


def test_adaptive_repeats_follow_the_pilots_spread(tmp_path):
    """--until-ci: the pilot's spread decides how many repeats each configuration takes (Stein's rule), between
    the pilot and the cap; a target the pilot already meets takes none beyond it."""
    wide = run_sustained(config(tmp_path / "wide", kernels=("a", "b"), protocol=PROTO.replace(
        repeats=2, until_ci=1e6, max_repeats=4)), registry=registry(), sampler=FlakySampler())
    assert sorted({r["repeat"] for r in wide.measurements}) == [0, 1]  # a target any pilot meets: no more
    obs = Order()
    narrow = run_sustained(config(tmp_path / "narrow", kernels=("a", "b"), protocol=PROTO.replace(
        repeats=2, until_ci=1e-9, max_repeats=4)), observer=obs, registry=registry(), sampler=FlakySampler())
    assert sorted({r["repeat"] for r in narrow.measurements}) == [0, 1, 2, 3]  # cut at the cap
    assert obs.started[4:] == [(2, "a"), (2, "b"), (3, "b"), (3, "a")]  # still rotated
    import json

    stored = json.loads(read_run(narrow.path).info["protocol_json"])
    assert (stored["repeats"], stored["until_ci"], stored["max_repeats"]) == (2, 1e-9, 4)
    with pytest.raises(Exception, match="--max-repeats >= --repeats"):
        PROTO.replace(repeats=3, until_ci=0.01, max_repeats=2)


def test_a_comparison_groups_inputs_are_timed_in_turn_within_each_repeat(tmp_path):
    """A capture and its controls (here two Gaussian inputs of one shape, no layer tag) are one group: every
    repeat times each input in turn, the inputs' and the kernels' orders rotating, so their comparison pairs by
    repeat. An input of another shape is a group of its own, timed after."""

    class Where(NullObserver):
        def __init__(self):
            self.started = []

        def on_measurement_start(self, *, kernel, input_label, repeat):
            self.started.append((repeat, input_label, kernel))

    other = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=16)
    inputs = (InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1"),
              InputSpec(shape=SHAPE, dtype="float32", source="gaussian:0.1"),
              InputSpec(shape=other, dtype="float32", source="gaussian:1", name="small"))
    obs = Where()
    res = run_sustained(config(tmp_path, kernels=("a", "b"), inputs=inputs, protocol=PROTO.replace(repeats=2)),
                        observer=obs, registry=registry(), sampler=FlakySampler())
    assert obs.started == [
        (0, "gaussian:1", "a"), (0, "gaussian:1", "b"), (0, "gaussian:0.1", "a"), (0, "gaussian:0.1", "b"),
        (1, "gaussian:0.1", "b"), (1, "gaussian:0.1", "a"), (1, "gaussian:1", "b"), (1, "gaussian:1", "a"),
        (0, "small", "a"), (0, "small", "b"), (1, "small", "b"), (1, "small", "a")]
    from harness.analysis import compare_inputs

    (ra, rb) = compare_inputs(read_run(res.path)).rows
    assert {ra.design, rb.design} == {"interleaved"} and ra.time.method == "paired t"
    sequential = run_sustained(config(tmp_path / "seq", kernels=("a",), inputs=inputs[:2], protocol=PROTO.replace(
        repeats=2, interleave_inputs=False)), observer=(seq := Where()), registry=registry(), sampler=FlakySampler())
    assert [x[1] for x in seq.started] == ["gaussian:1", "gaussian:1", "gaussian:0.1", "gaussian:0.1"]
    (row,) = compare_inputs(read_run(sequential.path)).rows
    assert row.design == "independent" and row.time.method == "Welch t"
