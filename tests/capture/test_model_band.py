"""`bench error --model --reference K`: the reference model is the model with a BF16 kernel's attention (ZYFA's
way), on a tiny llama on the CPU. The same kernel under another name is then bit for bit that model (KL and dNLL
exactly 0), a broken kernel is above the band, and dNLL is the text's next-token NLL difference (its sign means
nothing on these untrained miniatures; the real SmolLM2 is benchmarks/h200/lowp_recipes_table.py's)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.analysis import model_error_summary
from harness.capture import ModelErrorConfig, model_error
from harness.errors import ConfigError
from harness.kernels import Kernel, default_registry
from harness.results import read_rows

REG = default_registry()


def _config(model, text_file, tmp_path, **kw):
    base = dict(model=str(model), text=str(text_file), seq_len=40, documents=3, batch=3, layers=(1,), device="cpu",
                results_root=tmp_path / "results", command="test", reference="sdpa-cpu")
    return ModelErrorConfig(**{**base, **kw})


def _zeros():
    return Kernel(name="zeros", prepare=lambda x: (lambda: torch.zeros_like(x.q[..., : x.v.shape[-1]])),
                  dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}))


def test_a_bf16_reference_model_and_the_band_of_two_bf16_kernels(model_dirs, text_file, tmp_path):
    ref = REG.get("sdpa-cpu")
    twin = dataclasses.replace(ref, name="sdpa-cpu-twin")  # the reference's own attention, renamed
    result = model_error(_config(model_dirs["llama"], text_file, tmp_path), kernels=[twin, _zeros()],
                         floor=REG.get("reference-fp64"), reference=ref)
    rows = read_rows(result.path, "model_error")
    assert {r["reference"] for r in rows} == {"sdpa-cpu"}
    for r in rows:
        assert len(r["dnll_nats"]) == r["tokens"] - 1 == 39
        if r["kernel"] == "sdpa-cpu-twin":  # the reference model itself: nothing differs
            assert max(r["kl_nats"]) == 0.0 and max(abs(x) for x in r["dnll_nats"]) == 0.0
    floor = [r for r in rows if r["role"] == "floor" and r["scope"] == "all"]
    assert min(r["kl_mean_nats"] for r in floor) > 0  # fp64 attention vs sdpa-cpu's bf16: a band above 0
    figures = {(f["kernel"], f["scope"]): f for f in model_error_summary(result.rows, resamples=200)}
    assert figures[("sdpa-cpu-twin", "all")]["band_verdict"] == "in band"
    zeros = figures[("zeros", "all")]
    assert zeros["band_verdict"] == "above band"
    pooled = [x for r in rows if r["kernel"] == "zeros" and r["scope"] == "all" for x in r["dnll_nats"]]
    assert zeros["dnll_mean_nats"] == pytest.approx(sum(pooled) / len(pooled), rel=1e-5) and zeros["dnll_mean_nats"] != 0
    assert zeros["band_nats"] == figures[("reference-fp64", "all")]["kl_mean_hi_nats"]


def test_dnll_is_the_next_tokens_nll_difference():
    from harness.capture._model_error import _token_figures

    g = torch.Generator().manual_seed(0)
    ref, got = torch.randn(2, 5, 11, generator=g), torch.randn(2, 5, 11, generator=g)
    ids = torch.randint(0, 11, (2, 5), generator=g)
    _, _, dnll = _token_figures(ref, got, ids)
    lr, lg = torch.log_softmax(ref.double(), -1), torch.log_softmax(got.double(), -1)
    want = torch.tensor([[lr[b, t, ids[b, t + 1]] - lg[b, t, ids[b, t + 1]] for t in range(4)] for b in range(2)])
    assert dnll.shape == (2, 4) and torch.allclose(dnll, want.double())


def test_token_figures_in_slices_are_those_of_the_whole():
    # Slices of 3 positions (not dividing S = 7) give what one pass over all positions gives, at every position.
    from harness.capture._model_error import _token_figures

    g = torch.Generator().manual_seed(1)
    ref, got = torch.randn(2, 7, 13, generator=g), torch.randn(2, 7, 13, generator=g)
    got[1, 6] = ref[1, 6]  # one position where both models agree: KL 0, top-1 the same
    ids = torch.randint(0, 13, (2, 7), generator=g)
    kl, top1, dnll = _token_figures(ref, got, ids, slice_elements=3 * 13)
    lr, lg = torch.log_softmax(ref.double(), -1), torch.log_softmax(got.double(), -1)
    assert torch.allclose(kl, (lr.exp() * (lr - lg)).sum(-1).clamp_min(0.0)) and kl[1, 6] == 0
    assert torch.equal(top1, lr.argmax(-1) == lg.argmax(-1)) and top1[1, 6]
    want = (lr[:, :-1].gather(-1, ids[:, 1:, None]) - lg[:, :-1].gather(-1, ids[:, 1:, None])).squeeze(-1)
    assert dnll.shape == (2, 6) and torch.allclose(dnll, want)
    kl1, top11 = _token_figures(ref, got, slice_elements=1)  # one position a slice, no ids: two figures
    assert torch.allclose(kl1, kl) and torch.equal(top11, top1)


def test_the_reference_must_differ_from_the_floor_and_match_the_config(model_dirs, text_file, tmp_path):
    ref = REG.get("sdpa-cpu")
    with pytest.raises(ConfigError, match="is also the floor"):
        model_error(_config(model_dirs["llama"], text_file, tmp_path), kernels=[], floor=ref, reference=ref)
    with pytest.raises(ConfigError, match="records reference 'sdpa-cpu'"):
        model_error(_config(model_dirs["llama"], text_file, tmp_path), kernels=[], floor=REG.get("reference-fp64"))
    from harness.suite import model_error_kernels

    with pytest.raises(ConfigError, match="--reference sdpa-cpu and --floor sdpa-cpu"):
        model_error_kernels(["emu-mxfp8"], device="cpu", floor="sdpa-cpu", reference="sdpa-cpu")
    assert model_error_kernels(["emu-mxfp8"], device="cpu", reference="sdpa-cpu") == (("emu-mxfp8",), "reference-fp64")


def test_no_per_layer_leaves_only_the_every_layer_scope_and_the_reference_is_recorded():
    from harness.suite import CaptureArgs, ShapeArgs, model_error_config

    def cfg(**kw):
        capture = CaptureArgs(model="smollm2-135m", layers=kw.pop("layers", ()))
        return model_error_config(model="smollm2-135m", device="cuda:0", shape=ShapeArgs(), capture=capture,
                                  documents=None, all_layers=True, results="r", name=None, command="c", **kw)

    assert cfg(per_layer=False).layers == () and cfg().layers == tuple(range(30))
    assert cfg(reference="sdpa-cudnn").reference == "sdpa-cudnn" and cfg().reference == "fp64"
    with pytest.raises(ConfigError, match="--no-per-layer contradict"):
        cfg(per_layer=False, layers=(3,))


def test_a_run_stopped_at_its_limit_keeps_the_documents_it_finished_and_the_table_says_so(
        model_dirs, text_file, tmp_path, capsys):
    # One document a pass (batch 1): the stop comes in the second document's pass, so the first one's rows are kept,
    # the run says `incomplete`, and the recipe table read from the run says how many documents it rests on and why.
    import importlib.util
    from pathlib import Path

    calls = {"n": 0}

    def stops_in_document_two(x):
        calls["n"] += 1
        if calls["n"] > 3:  # the tiny llama has 3 layers: the fourth call is document 2's first layer
            raise KeyboardInterrupt
        return lambda: torch.zeros_like(x.q[..., : x.v.shape[-1]])

    kernel = Kernel(name="stops", prepare=stops_in_document_two, dtypes=frozenset({"bfloat16"}),
                    devices=frozenset({"cpu"}))
    config = _config(model_dirs["llama"], text_file, tmp_path, batch=1, layers=())
    with pytest.raises(KeyboardInterrupt):
        model_error(config, kernels=[kernel], floor=REG.get("reference-fp64"), reference=REG.get("sdpa-cpu"))
    (run,) = (tmp_path / "results").iterdir()
    info = read_rows(run, "runs")[0]
    assert info["status"] == "incomplete" and "rows of finished documents are kept" in info["status_detail"]
    rows = read_rows(run, "model_error")
    assert {(r["kernel"], r["document"]) for r in rows} == {("reference-fp64", 0), ("stops", 0)}
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "h200" / "lowp_recipes_table.py"
    spec = importlib.util.spec_from_file_location("lowp_recipes_table", script)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    assert table.main(["--run", str(run)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("Recipes on the model (1 documents x 40 tokens; run incomplete: stopped by")
