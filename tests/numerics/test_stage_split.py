"""bench error's split of a recipe kernel by stage, and its relative L2, cosine similarity and SNR."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from harness.cli import app
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, attention_error, default_registry
from harness.kernels._error import error_between
from harness.numerics import Recipe, attend, operands

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=96, head_dim_qk=32)


def _x():
    return make_inputs(InputSpec(shape=SHAPE, dtype="bfloat16", source="gaussian:1", seed=1), device="cpu")


def _emulated(recipe):
    def prepare(inputs):
        return lambda: attend(recipe, operands(recipe, inputs.q, inputs.k, inputs.v, dtype=torch.float32),
                              scale=inputs.scale, causal=True).out.to(torch.bfloat16)

    return Kernel(name="emulated", prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  output_dtype="bfloat16", extra={"recipe": recipe})


def test_each_stage_carries_only_its_own_error():
    only_q = Recipe(name="q-only", q="mxfp4", accumulation="exact")
    e = attention_error(_emulated(only_q), _x())
    s = e.stages
    assert s["q"].rel_rms > 0.02 and s["input"].rel_rms == s["q"].rel_rms  # Q alone is all of the inputs' error
    assert s["k"].rel_rms == s["v"].rel_rms == s["p"].rel_rms == s["accumulation"].rel_rms == 0.0
    assert s["k"].cosine == pytest.approx(1.0, abs=1e-12) and s["k"].snr_db == math.inf
    assert 0 < s["kernel"].rel_rms < 2.0**-8  # fp32 and the bf16 output only
    assert e.total.rel_rms == s["kernel"].rel_rms and e.vs_unquantized.rel_rms == pytest.approx(s["q"].rel_rms, rel=0.05)
    full = attention_error(default_registry().get("emu-nvfp4-directp"), _x()).stages
    assert all(full[n].rel_rms > 0.02 for n in ("q", "k", "v", "input", "p"))
    assert 0 < full["accumulation"].rel_rms < 1e-6  # fp32 per 64 keys: 2^-24-sized


def test_relative_l2_cosine_and_snr_of_known_vectors():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    e = error_between(torch.tensor([3.0, 4.5]), ref)
    assert e.rel_rms == pytest.approx(0.1) and e.snr_db == pytest.approx(20.0) and e.max_abs == pytest.approx(0.5)
    assert e.cosine == pytest.approx((9 + 18) / (5 * math.hypot(3, 4.5)))
    assert error_between(2 * ref, ref).cosine == pytest.approx(1.0)  # cosine ignores scale; rel L2 does not
    assert error_between(torch.zeros(2), torch.zeros(2)).cosine == 1.0
    assert error_between(torch.zeros(2), ref).cosine == 0.0 and error_between(torch.zeros(2), ref).snr_db == 0.0


def test_bench_error_prints_the_stages_and_writes_cosine_and_snr(tmp_path):
    path = tmp_path / "e.json"
    result = CliRunner().invoke(app, ["error", "--device", "cpu", "--seq-len", "64", "--heads", "2", "--head-dim", "32",
                                      "-i", "sinks:8", "-k", "emu-mxfp4-directp,sdpa-cpu", "--json", str(path)],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    for header in ("rel L2", "cos sim", "SNR dB", "Q term", "K term", "V term", "input term", "P term", "accum. term"):
        assert header in out, header
    emu, sdpa = json.loads(path.read_text())
    assert emu["reference"] == "mxfp4-directp quantized inputs" and emu["p_mode"] == "mxfp4-directp"
    for stage in ("q", "k", "v", "input", "p", "accumulation", "kernel"):
        assert emu[f"{stage}_rel_rms"] > 0 and 0.9 < emu[f"{stage}_cosine"] <= 1.0, stage
        assert emu[f"{stage}_snr_db"] == pytest.approx(-20 * math.log10(emu[f"{stage}_rel_rms"]), abs=1e-9)
    assert f"{emu['cosine']:.7f}" in out and f"{emu['q_rel_rms']:.3g}" in out
    assert sdpa["q_rel_rms"] is None and sdpa["cosine"] > 0.99999


def test_the_zyfa_recipe_is_the_fp8_kernels_declared_numerics():
    """fp8-lean-zyfa emulates exactly what triton-fp8-lean declares (harness.kernels.Numerics, lean P per 64 keys on
    e4m3 inputs with one power-of-two scale per tensor): one definition of ZYFA's numerics, reached two ways."""
    from harness.kernels import Numerics, dequantize, emulate_declared, quantize_e4m3_pow2
    from harness.numerics import RECIPES

    x = _x()
    r = RECIPES["fp8-lean-zyfa"]
    ours = attend(r, operands(r, x.q, x.k, x.v, dtype=torch.float64), scale=x.scale, causal=True, acc32=False).out
    q, k, v = (dequantize(*quantize_e4m3_pow2(t)) for t in (x.q, x.k, x.v))
    theirs = emulate_declared(Numerics(p_mode="lean"), q, k, v, scale=x.scale, causal=True, spread=False).out
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-13)
