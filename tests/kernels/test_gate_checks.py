"""The gate's checks beyond the comparison, on the CPU: each output is synchronised before it is read,
a kernel that declares it copies its inputs is not perturbed, and each failure tells the user which
kernel failed, on what, by how much, and what to change."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.errors import GateFailure
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, gate
from harness.kernels._gate import _sync

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=24, head_dim_qk=16)


def _inputs():
    return make_inputs(InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1"), device="cpu")


def _sdpa(q, k, v, x):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=x.scale)


def _kernel(prepare, name="probe", **extra):
    return Kernel(name=name, prepare=prepare, dtypes=frozenset({"float32"}), devices=frozenset({"cpu"}), extra=extra)


def test_each_output_is_synchronised_before_it_is_compared():
    x = _inputs()
    events = []

    def prepare(x):
        def launch():
            out = _sdpa(x.q, x.k, x.v, x)
            events.append(("launch", out))
            return out

        return launch

    def sync(t):
        events.append(("sync", t))

    k = _kernel(prepare)
    assert gate(k, x, k.prepare(x), sync=sync).passed
    # Three launches (the check, the stale-output check, the perturbed inputs), each output synced next.
    assert [e for e, _ in events] == ["launch", "sync"] * 3
    assert all(events[i][1] is events[i + 1][1] for i in range(0, 6, 2))


def test_the_default_sync_waits_for_the_device_of_a_cuda_tensor_only(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))

    class OnCuda:
        is_cuda = True
        device = "cuda:3"

    _sync(OnCuda())
    assert calls == ["cuda:3"]
    _sync(torch.ones(2))  # a CPU tensor: nothing to wait for
    _sync(object())  # not a tensor at all: nothing either (the comparison reports it)
    assert calls == ["cuda:3"]


def _copying_kernel(**extra):
    def prepare(x):
        q, k, v = (t.clone() for t in (x.q, x.k, x.v))  # copies taken in prepare(): later changes unseen
        return lambda: _sdpa(q, k, v, x)

    return _kernel(prepare, name="copies-in-prepare", **extra)


def test_a_kernel_that_declares_it_copies_its_inputs_is_not_perturbed():
    x = _inputs()
    k = _copying_kernel(reads_inputs_at_launch=False)
    assert gate(k, x, k.prepare(x)).passed
    undeclared = _copying_kernel()
    with pytest.raises(GateFailure, match="ignores its inputs at launch"):
        gate(undeclared, x, undeclared.prepare(x))


def test_failure_message_names_the_kernel_the_inputs_and_the_numbers():
    x = _inputs()
    k = _kernel(lambda x: lambda: _sdpa(x.q, x.k, x.v, x) * 1.01, name="one-percent-off")
    with pytest.raises(GateFailure) as e:
        gate(k, x, k.prepare(x))
    msg = str(e.value)
    assert msg.startswith("Kernel 'one-percent-off' failed the correctness gate on gaussian:1 ")
    assert f"({SHAPE.label()}, float32): max |diff| beyond rounding " in msg
    assert ">= 0.0001. Measured: max |diff| " in msg and ", limit 0.0001), rel. RMS error 0.01, SNR 40.0 dB" in msg
    assert msg.endswith(". It is not timed.")


def test_stale_output_message_says_what_the_launch_must_do():
    x = _inputs()
    out = _sdpa(x.q, x.k, x.v, x)
    k = _kernel(lambda x: lambda: out, name="cached")
    with pytest.raises(GateFailure) as e:
        gate(k, x, k.prepare(x))
    msg = str(e.value)
    assert msg.startswith("Kernel 'cached' returned a stale output: after its previous output was overwritten "
                          "with NaN, a second launch did not produce the right result (")
    assert f"({out.numel()} NaN/Inf values in the output; " in msg
    assert msg.endswith("). The launch closure must compute the output on every call, not return a cached tensor. "
                        "It is not timed.")


def test_ignored_inputs_message_says_what_to_declare():
    x = _inputs()
    k = _copying_kernel()
    with pytest.raises(GateFailure) as e:
        gate(k, x, k.prepare(x))
    msg = str(e.value)
    assert msg.startswith("Kernel 'copies-in-prepare' ignores its inputs at launch: after q, k, v were changed in "
                          "place its output did not match attention on the new values (max |diff| beyond rounding ")
    assert msg.endswith("). A kernel that quantizes or copies its inputs in prepare() must declare "
                        "extra={'reads_inputs_at_launch': False}. It is not timed.")
