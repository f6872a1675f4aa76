"""Issue 41: the output keeps being checked while it is timed (runner._watch). A kernel that passes the gate and
then returns zeros, a wrong shape or a cached tensor was timed and reported complete on main (0.002 ms/launch);
now its row is gate_failed and says what changed. An honest kernel whose output moves by its rounding passes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.config import RunConfig, SustainedProtocol
from harness.inputs import AttentionShape, InputSpec
from harness.kernels import KernelRegistry
from harness.results import read_run
from harness.runner import run_sustained

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8)
PROTO = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, window_s=0.05, chunk_s=0.02,
                                settle_trend_window_s=0.05, warmin_min_s=0.02, warmin_cap_s=0.1, repeats=2)


def _sdpa(inputs):
    return F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, is_causal=True, scale=inputs.scale,
                                          enable_gqa=True)


def _turns(after: int, wrong):
    """prepare() of a kernel that is honest for its first `after` calls, then returns wrong(honest output)."""

    def prepare(inputs):
        calls = [0]
        cache = {}

        def launch():
            calls[0] += 1
            out = _sdpa(inputs)
            if calls[0] <= after:
                cache["out"] = out
                return out
            return wrong(out, cache)

        return launch

    return prepare


KERNELS = {
    "zeros_after_gate": _turns(6, lambda out, cache: torch.zeros_like(out)),
    "shape_after_gate": _turns(6, lambda out, cache: out[:, :, :1]),
    "cached_after_gate": _turns(6, lambda out, cache: cache["out"]),
    "one_row_after_gate": _turns(6, lambda out, cache: out.index_fill(2, torch.tensor([5]), 0.0)),
    # right values, no work: a copy of what it computed before (found by the adversarial pass of issue 41)
    "copies_after_gate": _turns(6, lambda out, cache: cache["out"].clone()),
    # honest, its output a tensor that requires grad (adversarial round 3, A9: the gate's NaN check raised)
    "needs_grad": _turns(0, lambda out, cache: out.requires_grad_(True)),
    # honest, with a different rounding on every call: within what the gate measured, so never refused
    "jitters": _turns(0, lambda out, cache: out * (1 + 2.0**-23 * torch.randn_like(out).sign())),
}


def _run(tmp_path, names, *, measurer="sustained"):
    reg = KernelRegistry()
    for name in names:
        reg.kernel(name, dtypes={"float32"}, devices={"cpu"})(KERNELS[name])
    spec = InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1")
    config = RunConfig(kernels=tuple(names), inputs=(spec,), device="cpu", protocol=PROTO, results_dir=tmp_path,
                       telemetry="none")
    res = run_sustained(config, registry=reg)
    return res, {r["kernel"]: r for r in read_run(res.path).measurements.iter_rows(named=True)}


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("watch"), list(KERNELS))


def test_a_kernel_that_returns_zeros_after_the_gate_is_caught_in_its_first_window(watched):
    _, rows = watched
    r = rows["zeros_after_gate"]
    assert r["status"] == "gate_failed" and r["time_ns"] is None and r["repeat"] == 0, r
    assert "Kernel 'zeros_after_gate' on gaussian:1 (B1 H2/1 S32 d8 causal, float32): its output changed after the " \
           "gate: the last launch's output differs from the output the gate passed in 64 of 64 rows" in r["error"]
    assert "in the last launch of repeat 0's timed window" in r["error"]


def test_a_wrong_shape_after_the_gate_is_caught_and_named(watched):
    r = watched[1]["shape_after_gate"]
    assert r["status"] == "gate_failed", r
    assert "its last launch returned a float32 tensor of shape [1, 2, 1, 8]; the gate passed float32 [1, 2, 32, 8]" in r["error"]


def test_a_cached_tensor_after_the_gate_is_caught_by_the_launch_after_the_window(watched):
    r = watched[1]["cached_after_gate"]
    assert r["status"] == "gate_failed", r
    assert "one more launch after the last launch of repeat 0's timed window, its previous output overwritten with " \
           "NaN (a stale output" in r["error"]
    assert "(64 hold NaN or Inf)" in r["error"]


def test_a_kernel_that_returns_a_kept_copy_after_the_gate_is_caught_when_v_doubles(watched):
    r = watched[1]["copies_after_gate"]
    assert r["status"] == "gate_failed", r
    assert "on the same q, k and v scaled by 2 (the output must double" in r["error"], r["error"]
    assert "the launch's output differs from 2 x the output the gate passed in 64 of 64 rows" in r["error"]


def test_one_changed_row_is_enough(watched):
    r = watched[1]["one_row_after_gate"]
    assert r["status"] == "gate_failed" and "in 2 of 64 rows" in r["error"], r["error"]
    assert "row (b 0, h 0, s 5)" in r["error"]


def test_an_honest_kernel_whose_rounding_moves_is_timed_on_every_repeat(watched):
    res, rows = watched
    r = rows["jitters"]
    assert r["status"] in ("ok", "unsettled") and r["time_ns"] > 0, r["error"]
    assert res.status == "complete"  # one kernel timed: the run is not failed


def test_the_watch_allows_twice_the_gates_error_and_no_more():
    from harness.runner._watch import OutputChanged, OutputWatch

    gated = torch.randn(2, 3, 16, 8, dtype=torch.float64)
    watch = OutputWatch("Kernel 'k' on x")
    watch.first(gated)
    watch.arm(type("G", (), {"max_abs_diff": 1e-3})())
    watch.check(gated + 1.9e-3 * torch.randn_like(gated).sign(), during="w")  # within 2 x 1e-3 per element
    with pytest.raises(OutputChanged, match="in 96 of 96 rows"):
        watch.check(gated + 3e-3, during="w")  # every element moved beyond it
    with pytest.raises(OutputChanged, match=r"\(1 hold NaN or Inf\)"):
        bad = gated.clone()
        bad[1, 2, 3, 4] = float("inf")
        watch.check(bad, during="w")
    unarmed = OutputWatch("k")
    unarmed.first(gated)
    unarmed.check(torch.zeros_like(gated), during="w")  # without a passed gate (--no-gate) nothing is judged


def test_the_last_launch_of_each_call_is_what_the_loop_keeps():
    from harness.devices import open_device
    from harness.runner import build_launcher

    outs = []

    def launch():
        outs.append(torch.full((1,), float(len(outs))))
        return outs[-1]

    kernel = type("K", (), {"graph_safe": False, "name": "k"})()
    launcher = build_launcher(open_device("cpu"), kernel, launch, strategy="loop", target_s=1e-9, max_launches=3)
    launcher.enqueue()
    assert launcher.last() is outs[-1]
    assert launcher.again() is outs[-1] and len(outs) >= 2


def test_an_output_that_requires_grad_is_judged_as_its_values(watched):
    r = watched[1]["needs_grad"]
    assert r["status"] in ("ok", "unsettled") and r["time_ns"] > 0, r["error"]
