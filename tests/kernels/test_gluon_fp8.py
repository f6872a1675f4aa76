"""`gluon-fp8-lean` and `gluon-fp8-lean-summma` (kernels_under_test/gluon_fp8.py): declared like the FP8
kernels they change, compiled ahead of time for sm_90 on any machine, and on a Hopper GPU checked
against `triton-fp8-lean-accmma`, whose P they form the same way.

Gluon has no CPU interpreter, so off a Hopper GPU the numbers can only be checked in the SASS: products
as QGMMA with P from registers, an in-flight wait (DEPBAR.LE gsb0 > 0: softmax between a wgmma and its
wait), no spill. The compile runs in a subprocess: this process's triton may be in interpreter mode.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kernels import default_registry

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("gluon-fp8-lean", "gluon-fp8-lean-summma", "gluon-fp8-lean-summma-fresh")


def test_gluon_kernels_declare_lean_p_and_its_bound():
    reg = default_registry()
    lean = reg.get("triton-fp8-lean")
    for name in NAMES:
        k = reg.get(name)
        assert k.extra["variant_of"] == "triton-fp8-lean"
        for key in ("p_mode", "p_rel_error", "quant", "p_block", "sigma", "beta", "tau"):
            assert k.extra[key] == lean.extra[key], key
        assert k.tolerance == lean.tolerance == "fp8"
        assert k.devices == {"cuda"} and k.head_dims == {(64, 64), (128, 128)}


def test_gluon_kernels_explain_why_not_on_the_cpu():
    for name in NAMES:
        why = default_registry().get(name).availability("cpu")
        assert why and "Hopper" in why


SCRIPT = r"""
import json, re, subprocess, sys, os
import triton
from kernels_under_test import gluon_fp8 as g
bin_ = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
out = {}
for name, cfg in (("lean", g.CONFIGS[(128, 128)]), ("summma", g.SUMMMA_CONFIGS[(128, 128)]),
                  ("fresh", g.FRESH_CONFIGS[(128, 128)])):
    k = g.compile_for(head_dim=128, causal=True, config=cfg)
    path = f"{sys.argv[1]}/{name}.cubin"
    open(path, "wb").write(k.asm["cubin"])
    sass = subprocess.run([f"{bin_}/cuobjdump", "-sass", path], capture_output=True, text=True).stdout
    res = subprocess.run([f"{bin_}/cuobjdump", "-res-usage", path], capture_output=True, text=True).stdout
    out[name] = dict(sass=sass, res=res, shared=k.metadata.shared)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("triton", reason="triton is not installed: pip install triton")
    tmp = tmp_path_factory.mktemp("gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp)], check=False, capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)
    if run.returncode != 0:
        if "gluon" in run.stderr and ("ImportError" in run.stderr or "ModuleNotFoundError" in run.stderr):
            pytest.skip("this triton has no Gluon")
        raise AssertionError(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_gluon_sass_keeps_wgmma_in_flight_and_does_not_spill(compiled):
    for name, c in compiled.items():
        assert re.search(r"STACK:0\b", c["res"]), (name, c["res"])
        assert "QGMMA.64x64x32.F32.E4M3.E4M3" in c["sass"]  # QK, both operands from shared memory
        assert re.search(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc", c["sass"])  # PV, P from registers
        pending = "0x2" if name in ("summma", "fresh") else "0x1"
        assert f"WARPGROUP.DEPBAR.LE gsb0, {pending}" in c["sass"], name  # QK(j) waited, PV(j-1) in flight
        assert c["shared"] <= 76 * 1024  # three CTAs a Hopper SM
    # summma: the row sum is a QGMMA of N=8 (P from registers against the ones tile), and no vector adds
    assert re.search(r"QGMMA\.64x8x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc", compiled["summma"]["sass"])
    fadd = {n: len(re.findall(r"\bFADD\b", c["sass"])) for n, c in compiled.items()}
    assert fadd["summma"] < fadd["lean"] - 64, fadd
    # each block's row-sum wgmma starts from zero (use_acc=False), never from the running sum
    sums = re.findall(r"QGMMA\.64x8x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc\[UR\d+\], (RZ, !UPT|R\d+)",
                      compiled["summma"]["sass"])
    assert sums and sums[::2] == ["RZ, !UPT"] * (len(sums) // 2) and "RZ, !UPT" not in sums[1::2], sums
    # PV (two k-steps of 32 keys a block): fresh starts each block from zero, the others chain the running output
    pv = {n: re.findall(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3 R\d+, R\d+, gdesc\[UR\d+\], (RZ, !UPT|R\d+)", c["sass"])
          for n, c in compiled.items()}
    assert pv["fresh"] and pv["fresh"][::2] == ["RZ, !UPT"] * (len(pv["fresh"]) // 2), pv["fresh"]
    assert "RZ, !UPT" not in pv["fresh"][1::2] and all("RZ, !UPT" not in pv[n] for n in ("lean", "summma")), pv


def fp8_mma_add(c, terms, bits=13):
    """c + sum(terms) as one FP8 wgmma k-step adds them: every term aligned to the largest (C included) and
    truncated toward zero to `bits` fraction bits there, then summed."""
    import torch

    allt = torch.cat([c[:, None].double(), terms.double()], 1)
    amax = allt.abs().amax(1, keepdim=True)
    _, e = torch.frexp(amax)
    q = torch.where(amax > 0, torch.ldexp(torch.ones_like(amax), e - 1 - bits), torch.ones_like(amax))
    return (torch.trunc(allt / q) * q).sum(1).float()


def test_a_long_sum_of_positives_swamps_in_the_fp8_wgmma_accumulator_but_not_per_block():
    # Why summma's row sum takes a fresh accumulator each key block: Hopper's FP8 wgmma adds its products
    # to C in ~13 fraction bits aligned to the largest term (fp8_mma_add; docs/experiments/summma-row-sum.md).
    # A near-uniform row of 16384 keys, P codes 48..64: chained through C the sum stalls near 2^13 codes; per
    # block (64 codes) into zero, then added in fp32, it is exact. 1024 keys: both exact.
    import torch

    g = torch.Generator().manual_seed(0)
    p = torch.tensor([48.0, 52.0, 56.0, 60.0, 64.0])[torch.randint(0, 5, (1, 16384), generator=g)]
    exact = p.double().cumsum(1)[0, 64 - 1::64]
    chained, fresh, zero = torch.zeros(1), torch.zeros(1), torch.zeros(1)
    ch, fr = [], []
    for j in range(256):
        blk = p[:, 64 * j:64 * (j + 1)]
        chained = fp8_mma_add(fp8_mma_add(chained, blk[:, :32]), blk[:, 32:])
        fresh = fresh + fp8_mma_add(fp8_mma_add(zero, blk[:, :32]), blk[:, 32:])
        ch.append(float(chained))
        fr.append(float(fresh))
    ch, fr = torch.tensor(ch, dtype=torch.float64), torch.tensor(fr, dtype=torch.float64)
    assert torch.equal(fr, exact)
    assert torch.equal(ch[:16], exact[:16])  # 1024 keys
    assert ch[-1] / exact[-1] < 0.7


def test_a_long_pv_sum_of_one_sign_swamps_in_the_running_output_but_not_per_block():
    # Why gluon-fp8-lean-summma-fresh: real activations keep one sign per channel over many keys, so the running
    # output grows like the row sum and, as the wgmma's C operand, truncates each new product as the row sum
    # did (SmolLM2 layer 0, S=8192: 3.77 x its declared allowance on the H200). Values of one sign (v in 0.5..1,
    # P codes 48..64) over 16384 keys: chained 26 % low by the end; per block, then fp32, within 1e-3 (each block's
    # own two k-steps truncate a little). Gaussian values of random sign: both within 1 %, as on Gaussian inputs.
    import torch

    g = torch.Generator().manual_seed(1)
    p = torch.tensor([48.0, 52.0, 56.0, 60.0, 64.0])[torch.randint(0, 5, (1, 16384), generator=g)]
    ratios = []
    for v in (0.5 + 0.5 * torch.rand(1, 16384, generator=g), torch.randn(1, 16384, generator=g)):
        pv = p * v
        exact = float(pv.double().sum())
        chained, fresh, zero = torch.zeros(1), torch.zeros(1), torch.zeros(1)
        for j in range(256):
            blk = pv[:, 64 * j:64 * (j + 1)]
            chained = fp8_mma_add(fp8_mma_add(chained, blk[:, :32]), blk[:, 32:])
            fresh = fresh + fp8_mma_add(fp8_mma_add(zero, blk[:, :32]), blk[:, 32:])
        ratios.append((float(chained) / exact, float(fresh) / exact))
    (one_sign_chained, one_sign_fresh), (random_chained, random_fresh) = ratios
    assert one_sign_chained < 0.8 and abs(one_sign_fresh - 1) < 1e-3, ratios
    assert abs(random_chained - 1) < 0.01 and abs(random_fresh - 1) < 0.01, ratios


def _hopper() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="needs a Hopper (sm_90) GPU: Gluon's wgmma")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dims", [(1, 4, 4, 1024, 128, True), (2, 4, 2, 1040, 64, False), (1, 2, 2, 240, 128, True)],
                         ids=["S1024-d128-causal", "S1040-d64-gqa", "S240-d128-causal"])
def test_gluon_matches_the_triton_kernel_of_the_same_p(name, dims):
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import gate, kernel_reference_inputs, reference_attention

    b, hq, hkv, s, d, causal = dims
    shape = AttentionShape(batch=b, heads_q=hq, heads_kv=hkv, seq_len=s, head_dim_qk=d, causal=causal)
    x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1.0"), device="cuda")
    reg = default_registry()
    kernel = reg.get(name)
    base = reg.get("triton-fp8-lean-accmma").prepare(x)().float()
    got = kernel.prepare(x)().float()
    assert (got - base).abs().max() <= 2.0**-7 * base.abs().max()
    q, k, v = kernel_reference_inputs(kernel, x)
    assert gate(kernel, x, kernel.prepare(x), reference=reference_attention(q, k, v, scale=x.scale, causal=causal)).passed
