"""`--l2 cold` (runner._l2): launches rotate through copies of the inputs that together exceed twice the cache,
every copy prepared by the kernel itself, a graph holding whole rotations, recorded in the protocol and the
measurement's launch note; `--l2 warm` (the default) leaves the launch alone."""

from __future__ import annotations

import pytest

from harness.config import RunConfig, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import KernelRegistry
from harness.results import read_rows
from harness.runner import _l2, run_sustained
from harness.runner._launch import build_launcher

SHAPE = AttentionShape(batch=2, heads_q=2, heads_kv=1, seq_len=1, seq_len_kv=32, head_dim_qk=16, page_size=8)
PROTO = dict(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.1, chunk_s=0.05, settle_trend_window_s=0.1,
             warmin_min_s=0.05, warmin_cap_s=0.3, repeats=1)


def _registry(seen: list):
    reg = KernelRegistry()

    @reg.kernel("spy", dtypes={"float32"}, devices={"cpu"}, workloads={"decode", "paged"})
    def prepare(inputs):
        from harness.kernels import workload_reference

        def launch():
            seen.append(inputs.k.data_ptr())
            return workload_reference(inputs).float()

        return launch

    return reg


class _CPU:
    kind, spec, supports_graphs = "cpu", "cpu", False


def test_copies_cover_twice_the_cache_and_inputs_over_twice_it_take_none():
    assert _l2.copies_needed(1000, 4000) == 9 and _l2.copies_needed(8000, 4000) == 1
    assert _l2.copies_needed(7999, 4000) == 3


def test_a_cold_launch_rotates_through_copies_each_prepared_by_the_kernel(monkeypatch):
    seen: list = []
    kernel = _registry(seen).get("spy")
    x = make_inputs(InputSpec(shape=SHAPE, dtype="float32"), device="cpu")
    nbytes = _l2.input_bytes(x)
    monkeypatch.setattr(_l2, "cache_bytes", lambda device: 2 * nbytes)  # 5 copies: 4 of them cover twice it
    launch = _l2.cold_launch(kernel, x, kernel.prepare(x), device=_CPU())
    assert launch.rotation == 5 and "5 copies" in launch.note
    outs = [launch() for _ in range(10)]
    assert len(set(seen)) == 5 and seen[:5] == seen[5:] and seen[0] == x.k.data_ptr()
    assert all(o.equal(outs[0]) for o in outs)  # the copies hold the same values, page table included


def test_a_launcher_holds_whole_rotations_and_names_them():
    class Fake:
        kind, spec, supports_graphs = "cpu", "cpu", False

        def synchronize(self):
            pass

        def mark(self):
            return 0

        def wait(self, m):
            pass

        def elapsed_ns(self, a, b):
            return 5 * 1000  # 1 us a launch

    def launch():
        return None

    launch.rotation, launch.note = 7, "L2 cold: 7 copies"
    got = build_launcher(Fake(), type("K", (), {"name": "k", "graph_safe": True})(), launch, strategy="auto",
                         target_s=0.0001, max_launches=2000)
    assert got.launches_per_call == 98 and got.launches_per_call % 7 == 0  # 100 rounded down to rotations
    assert got.note == "device has no graphs; L2 cold: 7 copies"


def test_a_cold_run_records_the_protocol_and_the_copies(tmp_path, monkeypatch):
    seen: list = []
    monkeypatch.setattr(_l2, "cache_bytes", lambda device: 3 * _l2.input_bytes(make_inputs(
        InputSpec(shape=SHAPE, dtype="float32"), device="cpu")))  # 7 copies
    config = RunConfig(kernels=("spy",), inputs=(InputSpec(shape=SHAPE, dtype="float32"),), device="cpu",
                       protocol=SustainedProtocol.quick(**PROTO, l2="cold"), telemetry="none", results_dir=tmp_path)
    result = run_sustained(config, registry=_registry(seen))
    assert result.status == "complete"
    row = read_rows(result.path, "measurements")[0]
    assert row["status"] in ("ok", "unsettled") and row["launch_note"].startswith("device has no graphs; L2 cold: ")
    import json

    assert json.loads(read_rows(result.path, "runs")[0]["protocol_json"])["l2"] == "cold"
    assert len(set(seen)) == 7 and "7 copies" in row["launch_note"]  # the gate's calls were on the inputs
    warm_seen: list = []
    warm = run_sustained(RunConfig(kernels=("spy",), inputs=config.inputs, device="cpu", telemetry="none",
                                   protocol=SustainedProtocol.quick(**PROTO), results_dir=tmp_path),
                         registry=_registry(warm_seen))
    assert len(set(warm_seen)) == 1 and "L2" not in (read_rows(warm.path, "measurements")[0]["launch_note"] or "")


def test_a_shape_far_below_the_cache_is_refused_rather_than_copied_without_end(monkeypatch):
    x = make_inputs(InputSpec(shape=SHAPE, dtype="float32"), device="cpu")
    monkeypatch.setattr(_l2, "cache_bytes", lambda device: 480 << 20)  # this machine's CPU: a 480 MiB L3
    with pytest.raises(ConfigError, match="would need .* copies .* --l2 warm"):
        _l2.cold_launch(None, x, lambda: None, device=_CPU())


def test_l2_must_be_warm_or_cold():
    from harness.suite import sustained_protocol

    with pytest.raises(ConfigError, match="--l2 'lukewarm'"):
        sustained_protocol(quick=True, l2="lukewarm")
    assert sustained_protocol(l2="cold").l2 == "cold" and SustainedProtocol().l2 == "warm"
