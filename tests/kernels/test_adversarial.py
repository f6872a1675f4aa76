"""Kernels that cheat or break, kept in the tests (never bundled): the gate or the runner must catch each."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.errors import GateFailure, KernelError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import KernelRegistry, gate

SHAPE = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=48, head_dim_qk=16)
reg = KernelRegistry()
DECLARE = dict(dtypes={"float32", "bfloat16"}, devices={"cpu", "cuda"})


def _sdpa(x):
    return F.scaled_dot_product_attention(x.q, x.k, x.v, is_causal=True, scale=x.scale, enable_gqa=True)


@reg.kernel("honest", **DECLARE)
def honest(x):
    out = torch.empty_like(x.q)

    def launch():
        out.copy_(_sdpa(x))  # a preallocated output buffer, rewritten every launch: allowed
        return out

    return launch


@reg.kernel("cached", **DECLARE)
def cached(x):
    out = _sdpa(x)
    return lambda: out  # computed once in setup; the timed closure does no work


@reg.kernel("cached-copy", **DECLARE)
def cached_copy(x):
    out = _sdpa(x)
    return lambda: out.clone()  # fresh tensor each call, but never reads the inputs again


@reg.kernel("zeros", **DECLARE)
def zeros(x):
    return lambda: torch.zeros_like(x.q)


@reg.kernel("nans", **DECLARE)
def nans(x):
    def launch():
        o = _sdpa(x)
        o[0, 0, 5, 3] = float("nan")
        return o

    return launch


@reg.kernel("side-stream", dtypes={"bfloat16"}, devices={"cuda"})
def side_stream(x):
    stream = torch.cuda.Stream()

    def launch():
        with torch.cuda.stream(stream):  # the launch stream's events would time nothing
            o = _sdpa(x)
            for _ in range(20):
                o = _sdpa(x)
        return o

    return launch


def inputs(dtype="float32"):
    return make_inputs(InputSpec(shape=SHAPE, dtype=dtype, source="gaussian:1"), device="cpu")


def test_honest_kernel_with_a_reused_buffer_passes():
    x = inputs()
    k = reg.get("honest")
    assert gate(k, x, k.prepare(x)).passed


@pytest.mark.parametrize("name, message", [
    ("cached", "returned a stale output"),
    ("cached-copy", "ignores its inputs at launch"),
    ("zeros", "failed the correctness gate"),
    ("nans", "NaN/Inf values in the output"),
])
def test_cheating_kernels_fail_the_gate(name, message):
    x = inputs()
    k = reg.get(name)
    with pytest.raises(GateFailure, match=message):
        gate(k, x, k.prepare(x))
    # The gate restores the inputs it perturbed: later kernels are timed on the same data.
    assert torch.equal(x.q, inputs().q)


def test_nonfinite_inputs_are_reported_and_not_timed(tmp_path):
    from harness.config import RunConfig, SustainedProtocol
    from harness.runner import run_sustained

    spec_bad = InputSpec(shape=SHAPE, dtype="float32", source="constant:inf")
    spec_ok = InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1")
    cfg = RunConfig(kernels=("honest",), inputs=(spec_bad, spec_ok), device="cpu", telemetry="none",
                    protocol=SustainedProtocol.quick(repeats=1, idle_before_config_s=0, idle_before_kernel_s=0),
                    results_dir=tmp_path)
    res = run_sustained(cfg, registry=reg)
    rows = {r["input_label"]: r for r in res.measurements}
    assert rows["constant:inf"]["status"] == "input_error"
    assert "NaN or Inf values" in rows["constant:inf"]["error"] and rows["constant:inf"].get("time_ns") is None
    assert rows["gaussian:1"]["status"] in ("ok", "unsettled") and res.status == "complete"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: side streams are a GPU matter")
def test_side_stream_kernel_is_rejected_by_the_runner():
    from harness.devices import open_device
    from harness.runner._run import _check_stream

    x = make_inputs(InputSpec(shape=AttentionShape(batch=1, heads_q=32, heads_kv=32, seq_len=8192, head_dim_qk=128),
                              dtype="bfloat16", source="gaussian:1"), device="cuda")
    k = reg.get("side-stream")
    with pytest.raises(KernelError, match="runs on another stream"):
        _check_stream(open_device("cuda:0"), k, k.prepare(x))
