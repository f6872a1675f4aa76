"""The gate applies a kernel's declared recipe: each bundled emulated recipe passes against its own reference, and
its mutants fail: a wrong block size, a scale rounded the wrong way, a rotation applied to one side only. A
mutant's error is small next to FP4's own rounding (a few % of the output), so a gate that merely allowed the
format's rounding would pass it; these fail because the recipe's envelope leaves no room where no rounding
boundary is near (harness.numerics._emulate)."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from harness.errors import GateFailure
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import Kernel, compare_declared, default_registry, gate
from harness.kernels._recipes import emulate_recipe
from harness.numerics import RECIPES, OperandFormat, attend, mutated, operands, parse_recipe

SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=128, head_dim_qk=64)


@pytest.fixture(scope="module")
def x():
    inputs = make_inputs(InputSpec(shape=SHAPE, dtype="bfloat16", source="gaussian:1", seed=4), device="cpu")
    inputs.k[..., 5] += 3.0  # an outlier channel, so the rotation has something to spread
    return inputs


def _kernel(recipe, launch_of, name="mutant", **extra):
    """A kernel declaring `recipe` whose launch is `launch_of(inputs)`."""
    return Kernel(name=name, prepare=launch_of, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  output_dtype="bfloat16", extra={"recipe": recipe, **extra})


def _fp32(recipe, inputs, ops=None):
    ops = ops or operands(recipe, inputs.q, inputs.k, inputs.v, dtype=torch.float32)
    return attend(recipe, ops, scale=inputs.scale, causal=True).out.to(torch.bfloat16)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_bundled_recipe_passes_the_gate_against_its_own_reference(name, x):
    kernel = default_registry().get(f"emu-{name}")
    result = gate(kernel, x, kernel.prepare(x))
    assert result.passed and result.max_ratio < 1 and result.reference.startswith("fp64 emulation: Q ")
    assert result.tolerance.name == "recipe" and result.snr_db >= result.tolerance.min_snr_db


def _fails(recipe, x, out) -> str:
    em = emulate_recipe(_kernel(recipe, None), x)
    r = compare_declared(out, em, kernel="mutant")
    assert not r.passed, f"the mutant passed: max ratio {r.max_ratio}"
    return r.reason


@pytest.mark.parametrize("name,half", [("mxfp4-directp", 16), ("nvfp4-directp", 8), ("mxfp8", 16), ("qk4v8", 8),
                                       ("mxfp4-directp+had", 16)])
def test_a_wrong_block_size_fails(name, half, x):
    r = RECIPES[name]
    wrong = mutated(r, q=dataclasses.replace(r.q, granularity=half), k=dataclasses.replace(r.k, granularity=half))
    assert "allowance" in _fails(r, x, _fp32(wrong, x))


@contextlib.contextmanager
def _patched(module, name, fn):
    old = getattr(module, name)
    setattr(module, name, fn)
    try:
        yield
    finally:
        setattr(module, name, old)


def test_an_e8m0_scale_rounded_up_instead_of_down_fails(x):
    """ceil(log2 amax) - emax for floor: every MX block one binade coarser (elements use half the grid)."""
    from harness.numerics import _formats, _scaled

    floor_exponent = _formats.e8m0_exponent

    def ceil_exponent(amax, fmt):
        e = floor_exponent(amax, fmt)
        return e + (amax > torch.exp2(e + _formats.element_format(fmt).emax)).to(e.dtype)

    for name in ("mxfp4-directp", "mxfp8"):
        r = RECIPES[name]
        with _patched(_scaled, "e8m0_exponent", ceil_exponent):  # where the scaled quantizer looks it up
            out = _fp32(r, x)
        _fails(r, x, out)


def test_an_nvfp4_block_scale_rounded_down_instead_of_to_nearest_fails(x):
    """The E4M3 block scale truncated onto its grid: a block's largest value then saturates at 6."""
    from harness.numerics import _scaled, grid

    nearest, e4m3 = _scaled.round_to, torch.tensor(grid("e4m3"))

    def truncating(t, fmt):
        if fmt != "e4m3":
            return nearest(t, fmt)
        g = e4m3.to(t.dtype)
        return g[(torch.searchsorted(g, t.contiguous(), right=True) - 1).clamp(0, len(g) - 1)]

    for name in ("nvfp4-directp", "qk4v8"):
        r = RECIPES[name]
        with _patched(_scaled, "round_to", truncating):
            out = _fp32(r, x)
        _fails(r, x, out)


def test_a_power_of_two_input_scale_one_binade_too_large_fails(x):
    r = RECIPES["fp8-lean-zyfa"]
    amax = float(x.q.abs().max())
    wrong = mutated(r, q=OperandFormat(element="e4m3", granularity="tensor", scale="pow2", static=amax / 2))
    _fails(r, x, _fp32(wrong, x))


@pytest.mark.parametrize("name", ["fp8-lean-zyfa+had", "mxfp8+had", "nvfp4-directp+had", "qk4v8-rank1+had"])
def test_a_rotation_applied_to_one_side_only_fails(name, x):
    r = RECIPES[name]
    rotated = operands(r, x.q, x.k, x.v, dtype=torch.float32)
    plain = operands(dataclasses.replace(r, hadamard=False), x.q, x.k, x.v, dtype=torch.float32)
    one_side = dataclasses.replace(rotated, k=plain.k)  # Q rotated, K not: QK^T is no longer QK^T
    _fails(r, x, _fp32(r, x, ops=one_side))


def test_the_gate_itself_fails_a_mutant_and_names_the_recipe(x):
    r = RECIPES["mxfp4-directp"]
    wrong = mutated(r, q=dataclasses.replace(r.q, granularity=16))
    kernel = _kernel(r.name, lambda inputs: (lambda: _fp32(wrong, inputs)))
    with pytest.raises(GateFailure, match="max |diff| from its declared numerics' emulation") as info:
        gate(kernel, x, kernel.prepare(x))
    assert "Q mxfp4, K mxfp4" in str(info.value)


def _stale_max(recipe, inputs, shift):
    """The recipe computed with each row's P rounded against a stale running max (scores shifted per row before
    rounding, which softmax itself ignores): how an online-softmax kernel rounds."""
    ops = operands(recipe, inputs.q, inputs.k, inputs.v, dtype=torch.float32)
    from harness.numerics import _emulate

    real = _emulate._round_p

    def shifted(rec, t, p, **kw):
        s = shift[: t.shape[-2], None].to(t.dtype)
        return real(rec, t + s, torch.exp2(t + s - t.amax(-1, keepdim=True)), **kw) * torch.exp2(-s)

    with _patched(_emulate, "_round_p", shifted):
        return attend(recipe, ops, scale=inputs.scale, causal=True).out.to(torch.bfloat16)


def test_p_rounded_at_a_running_max_needs_the_running_declaration(x):
    """Declared against the exact row max, a kernel rounding P at a stale max fails (nothing allows it); declared
    "running", the gate allows every P another rounding and it passes; a one-sided rotation still fails there."""
    shift = torch.rand(SHAPE.seq_len, generator=torch.Generator().manual_seed(9)) * 0.4
    exact_r = RECIPES["mxfp8"]
    out = _stale_max(exact_r, x, shift)
    _fails(exact_r, x, out)
    running = dataclasses.replace(exact_r, p_max="running")
    em = emulate_recipe(_kernel(running, None), x)
    assert compare_declared(out, em, kernel="online").passed
    had = dataclasses.replace(RECIPES["mxfp8+had"], p_max="running")
    rotated = operands(had, x.q, x.k, x.v, dtype=torch.float32)
    one_side = dataclasses.replace(rotated, k=operands(exact_r, x.q, x.k, x.v, dtype=torch.float32).k)
    _fails(had, x, _fp32(had, x, ops=one_side))


def test_recipes_round_trip_through_their_declared_dict():
    for r in RECIPES.values():
        assert parse_recipe(r.to_dict()) == r
    with pytest.raises(Exception, match="unknown"):
        parse_recipe({"q": "nvfp4", "rotation": True})


def test_the_exact_allowance_is_zero_wherever_no_rounding_boundary_is_near(x):
    """Against the exact row max the gate allows a row something only where one of its keys (or operands) sits
    within fp32's reach of a rounding boundary: most rows of a plain recipe get nothing but the fp32
    accumulation's and the output's rounding."""
    em = emulate_recipe(_kernel("mxfp8", None), x)
    rows_allowed = (em.p_bound.amax(-1) > 0).double().mean()
    assert float(rows_allowed) < 0.3
    assert float(em.accumulation.max()) < 1e-4 * float(em.out.abs().max())
