"""Reproducibility: bitwise comparison of repeated launches, with and without interference."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel
from harness.kernels._repro import reproducibility
from kernels_under_test.sdpa import registry as sdpa


def _inputs():
    shape = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=64, head_dim_qk=32)
    return make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1.0", seed=2), device="cpu")


def _fake(name, make_launch):
    return Kernel(name=name, prepare=make_launch, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}))


def _flaky_every(n):
    """Deterministically 'nondeterministic': every n-th launch perturbs one element by one ulp."""

    def prepare(inputs):
        calls = {"n": 0}
        base = inputs.q.float().sum(-1)

        def launch():
            calls["n"] += 1
            out = base.clone()
            if calls["n"] % n == 0:
                out[0, 0, 0] = torch.nextafter(out[0, 0, 0], torch.tensor(float("inf")))
            return out

        return launch

    return _fake(f"flaky-{n}", prepare)


@pytest.mark.parametrize("interfere", [None, "gemm", "attention"])
def test_sdpa_cpu_is_bitwise_reproducible(interfere):
    report = reproducibility(sdpa.get("sdpa-cpu"), _inputs(), launches=12, interfere=interfere)
    assert report.reproducible and report.differing == 0 and report.first_differing is None
    assert report.max_abs_diff == 0.0 and report.launches == 12
    assert "bitwise identical" in report.summary()


def test_differing_launches_are_counted():
    report = reproducibility(_flaky_every(3), _inputs(), launches=20)
    # launches 0..19; the closure's calls 3, 6, ..., 18 are launches 2, 5, ..., 17
    assert report.differing == 6 and report.first_differing == 2
    assert 0 < report.max_abs_diff < 1e-5
    assert "6 of 19 launches differ" in report.summary()


def test_a_reused_output_buffer_is_compared_before_it_is_overwritten():
    def prepare(inputs):
        out = torch.empty(4)
        state = {"i": 0}

        def launch():
            state["i"] += 1
            out.fill_(float(state["i"] % 2))  # alternates 1, 0, 1, 0 in the same buffer
            return out

        return launch

    report = reproducibility(_fake("alternating", prepare), _inputs(), launches=6)
    assert report.differing == 3  # launches 1, 3, 5 differ from launch 0


def test_bits_not_values_are_compared():
    def prepare(inputs):
        values = iter([0.0, -0.0, float("nan"), float("nan")] * 3)
        return lambda: torch.full((2,), next(values))

    report = reproducibility(_fake("signed-zero", prepare), _inputs(), launches=4)
    # -0.0 == 0.0 numerically but not bitwise; NaN never equals the first (0.0) launch either way
    assert report.differing == 3


def test_bad_arguments_are_explained():
    with pytest.raises(ConfigError, match="Unknown interfering kernel 'fft'"):
        reproducibility(sdpa.get("sdpa-cpu"), _inputs(), launches=3, interfere="fft")
    with pytest.raises(ConfigError, match="at least 2 launches"):
        reproducibility(sdpa.get("sdpa-cpu"), _inputs(), launches=1)
