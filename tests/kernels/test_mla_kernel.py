"""triton-mla (MLA decode, absorbed form) in Triton's CPU interpreter against the fp64 reference, in a process of its
own (tests/kernels/mla_cases.py): every shape kind passes the gate with each latent-cache element loaded exactly
once per head block, and each mutant of its source is caught: the latent tile loaded again as V (the gate passes,
the load count does not), the RoPE dims dropped from the scores, the page table's index taken for the page."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.errors import UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import default_registry
from tests.workers.forked_run import run as forked_run

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def lines():
    import importlib.util

    if importlib.util.find_spec("triton") is None:  # not imported here: it must first be imported interpreted
        pytest.skip("triton is not installed: pip install triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    res = forked_run([sys.executable, "-m", "tests.kernels.mla_cases"], env=env, timeout=300, cwd=HERE.parents[1])
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def test_every_shape_kind_passes_the_gate_and_reads_the_latent_cache_once(lines):
    sys.path.insert(0, str(HERE))
    from mla_cases import CASES, TMA_CASES

    good = [r for r in lines if "mutant" not in r]
    assert [r["case"] for r in good] == list(CASES)
    assert all(r["passed"] for r in good), [r for r in good if not r["passed"]]
    # TMA where every block is whole, and only there: a block cut by a sequence's end keeps its masked loads
    assert {r["case"] for r in good if r["tma"]} == TMA_CASES
    for r in good:
        blocks = 2 if r["case"] == "heads in two blocks" else 1  # each block of query heads reads the cache
        if r["case"] == "window 7":  # only the window's band (from the block it starts in) is read, once
            assert r["reads_max"] == 1 and r["never_read"] > 0
        else:
            assert (r["reads_min"], r["reads_max"], r["never_read"]) == (blocks, blocks, 0), r


@pytest.mark.parametrize("mutant", ["latent read twice", "latent read twice, tma", "rope part dropped", "wrong page",
                                    "wrong page, tma", "tma row in page dropped"])
def test_each_mutant_is_caught(lines, mutant):
    (r,) = [r for r in lines if r.get("mutant") == mutant]
    if mutant.startswith("latent read twice"):  # same numbers, twice the bytes: only the load count sees it
        assert r["passed"] and r["reads_max"] == 2
    else:
        assert not r["passed"] and "failed the correctness gate" in r["error"]


def test_triton_mla_takes_only_the_latent_layout():
    kernel = default_registry().get("triton-mla")
    assert kernel.workloads == {"decode", "window", "paged", "varlen", "mla"}
    x = make_inputs(InputSpec(shape=AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=1, seq_len_kv=16,
                                                   head_dim_qk=32), dtype="bfloat16"), device="cpu")
    from kernels_under_test import _triton_mla

    with pytest.raises(UnsupportedInputError, match="absorbed form only"):
        _triton_mla.prepare(x)


def test_the_exported_decode_configs_are_the_ones_the_kernels_use():
    from kernels_under_test import _triton_decode, _triton_mla, decode

    assert decode.SPLITKV_CANDIDATES is _triton_decode.CANDIDATES and decode.SPLITKV_CONFIG is _triton_decode.CONFIG
    assert decode.SPLITKV_CANDIDATES_PAGED is _triton_decode.CANDIDATES_PAGED
    assert decode.MLA_CONFIG is _triton_mla.CONFIG and decode.MLA_CONFIG_NARROW is _triton_mla.CONFIG_NARROW
    assert decode.MLA_CANDIDATES is _triton_mla.CANDIDATES
