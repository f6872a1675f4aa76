"""`run_burst` runs on the one run loop (issue 13): gate failures by type, non-finite inputs per kernel,
Ctrl-C -> incomplete, and the same failure isolation as the sustained runner."""

from __future__ import annotations

import pytest

from harness.errors import KernelError
from harness.inputs import AttentionShape, InputSpec
from harness.results import read_run
from harness.runner import BurstConfig, BurstProtocol, NullObserver, run_burst
from tests.runner.ending_kernels import registry as broken

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=64, head_dim_qk=16)
PROTO = BurstProtocol(warmup_launches=2, timed_launches=3, repeats=1, idle_s=0.0)


def spec(source):
    return InputSpec(shape=SHAPE, dtype="float32", source=source)


@broken.kernel("says-gate", dtypes={"float32"}, devices={"cpu"})
def says_gate(x):
    # Not a gate failure, though its message says "gate": the old burst loop matched on the text.
    raise KernelError("the gate driver library is missing")


def test_gate_failure_by_type_non_finite_inputs_per_kernel_and_isolation(tmp_path):
    cfg = BurstConfig(kernels=("honest", "nan-output", "says-gate", "raises"),
                      inputs=(spec("constant:nan"), spec("gaussian:1")), device="cpu", telemetry="none",
                      protocol=PROTO, results_dir=tmp_path)
    res = run_burst(cfg, registry=broken)
    assert res.status == "complete" and not res.nothing_timed
    run = read_run(res.path)
    assert run.info["status"] == "complete"
    got = {(r["config_index"], r["kernel"]): (r["status"], r["error"] or "") for r in run.measurements.iter_rows(named=True)}
    # The NaN input is recorded per kernel, and the run went on to the next input.
    for k in cfg.kernels:
        assert got[(0, k)][0] == "input_error" and "NaN or Inf" in got[(0, k)][1]
    assert got[(1, "honest")][0] == "burst"
    assert got[(1, "nan-output")][0] == "gate_failed"
    assert got[(1, "says-gate")] == ("error", "Kernel 'says-gate' on gaussian:1 (B1 H2/1 S64 d16 causal, float32), "
                                              "stage prepare: the gate driver library is missing")
    assert got[(1, "raises")][0] == "error" and "stage gate (first call): RuntimeError: boom" in got[(1, "raises")][1]


def test_ctrl_c_in_a_burst_run_marks_it_incomplete(tmp_path):
    class Interrupt(NullObserver):
        def on_measurement_end(self, row):
            raise KeyboardInterrupt

    cfg = BurstConfig(kernels=("honest",), inputs=(spec("gaussian:1"),), device="cpu", telemetry="none",
                      protocol=PROTO.__class__(warmup_launches=2, timed_launches=3, repeats=2, idle_s=0.0),
                      results_dir=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_burst(cfg, registry=broken, observer=Interrupt())
    (run_dir,) = tmp_path.iterdir()
    run = read_run(run_dir)
    assert run.info["status"] == "incomplete"
    assert run.info["status_detail"] == "interrupted by the user (KeyboardInterrupt) after 1 timed measurements; they are kept"
    assert run.measurements["status"].to_list() == ["burst"]
