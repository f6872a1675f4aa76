"""Decode captures (`CaptureConfig(decode_steps=N)`): the q, k, v kept are what the model's own attention consumed
at its N greedy decode steps, checked against an independent run of the same model with transformers' KV cache
and stock sdpa (no capture hook); the decode kernels pass the gate on them, dense and paged; shape, provenance
and the suite's flags (--seq-len-q / --seq-len-kv / --page-size with --model)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

S, STEPS, WINDOWS = 40, 3, 2


@pytest.fixture(scope="module")
def decode_capture(model_dirs, text_file, tmp_path_factory):
    from harness.capture import CaptureConfig, capture

    root = tmp_path_factory.mktemp("decode_captures")
    return capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0, 2), seq_len=S, decode_steps=STEPS,
                                 batch=WINDOWS, text=str(text_file), root=root))


def _independent_decode(model_dir, text_file, layer):
    """The same prompt and greedy decode with stock sdpa and a DynamicCache; per step the layer's input hidden
    states and rotary embeddings (its q is computed from them here) and its attention output (o_proj's input)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from harness.capture._text import load_text, token_windows

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), attn_implementation="sdpa").eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ids, _ = token_windows(tok, load_text(str(text_file)), seq_len=S - STEPS, batch=WINDOWS)
    attn = model.model.layers[layer].self_attn
    seen = {"q": [], "out": []}

    def pre(module, args, kwargs):
        h = kwargs.get("hidden_states", args[0] if args else None)
        cos, sin = kwargs["position_embeddings"]
        B, T, _ = h.shape
        q = module.q_proj(h).view(B, T, -1, module.head_dim).transpose(1, 2)
        seen["q"].append(apply_rotary_pos_emb(q, q, cos, sin)[0])

    hooks = [attn.register_forward_pre_hook(pre, with_kwargs=True),
             attn.o_proj.register_forward_pre_hook(lambda m, a: seen["out"].append(a[0]))]
    cache = DynamicCache(config=model.config)
    kw = {"cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values": cache}
    tokens = []
    with torch.no_grad():
        logits = model(input_ids=ids, **kw, use_cache=True).logits
        seen = {"q": [], "out": []}  # the prompt's pass is not a decode step
        for _ in range(STEPS):
            token = logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(token)
            logits = model(input_ids=token, **kw, use_cache=True).logits
    for h in hooks:
        h.remove()
    return (torch.cat(tokens, 1), torch.cat(seen["q"], 2), cache.layers[layer].keys, cache.layers[layer].values,
            torch.cat(seen["out"], 1), attn)


@pytest.mark.parametrize("layer", [0, 2])
def test_the_captured_q_k_v_are_what_the_models_attention_consumed_at_its_decode_steps(decode_capture, model_dirs,
                                                                                       text_file, layer):
    from harness.capture import load_capture

    x = load_capture(next(r.path for r in decode_capture.layers if r.layer == layer))
    manifest = json.loads(decode_capture.manifest.read_text())
    tokens, q, k, v, out, attn = _independent_decode(model_dirs["llama"], text_file, layer)
    assert manifest["decode"]["token_ids"] == tokens.tolist()  # the same greedy continuation
    assert tuple(x.q.shape) == (WINDOWS, 4, STEPS, 16) and tuple(x.k.shape) == (WINDOWS, 2, S, 16)
    # k, v: the whole cache after the last step, bit for bit as bf16; q: the steps' own queries
    assert torch.equal(x.k, k.to(torch.bfloat16)) and torch.equal(x.v, v.to(torch.bfloat16))
    assert torch.allclose(x.q.float(), q.float(), rtol=2 ** -7, atol=1e-6)
    # one call on the capture, causal aligned to the end of the cache, gives the model's N decode outputs
    from harness.inputs import AttentionShape
    from harness.kernels import workload_reference

    assert x.shape == AttentionShape(batch=WINDOWS, heads_q=4, heads_kv=2, seq_len=STEPS, seq_len_kv=S, head_dim_qk=16)
    ref = workload_reference(x)  # [B, Hq, N, dv], fp64 from the bf16 capture
    model_out = out.view(WINDOWS, STEPS, 4, 16).transpose(1, 2)
    assert (ref.float() - model_out).abs().max() < 0.03 * max(1.0, float(model_out.abs().max()))
    entry = manifest["layers"][str(layer)]
    assert entry["self_check"]["max_abs_diff"] <= entry["self_check"]["tolerance"] and "decode step" in \
        entry["self_check"]["reference"]


def test_a_decode_capture_records_its_shape_and_provenance_and_how_to_make_it_again(decode_capture):
    from harness.capture import capture_spec, list_captures, recapture_command

    d = decode_capture.directory
    assert d.name.startswith("prose-") and d.name.endswith(f"-S{S}-decode{STEPS}-B{WINDOWS}")
    m = json.loads(decode_capture.manifest.read_text())
    assert (m["seq_len"], m["batch"], m["decode"]["steps"], m["decode"]["prompt_tokens"]) == (S, WINDOWS, STEPS, S - STEPS)
    assert m["rope"]["positions"].endswith(f"{S - STEPS}..{S - 1}")
    spec = capture_spec(d / "layer02.safetensors")
    assert (spec.shape.seq_len, spec.shape.seq_len_kv, spec.shape.features()) == (STEPS, S, {"decode"})
    assert "--decode-steps 3" in recapture_command(m, 2, d) and "--windows 2" in recapture_command(m, 2, d)
    listed = {i.layer: i for i in list_captures(d.parent.parent, verify=True)}
    assert listed[2].status == "ok" and f"Sq{STEPS} Skv{S}" in listed[2].shape.label()


@pytest.mark.parametrize("page", [None, 8])
def test_sdpa_kvcache_passes_the_gate_on_a_decode_capture_and_its_control_dense_and_paged(decode_capture, page):
    import dataclasses

    from harness.capture import capture_spec
    from harness.inputs import InputSpec, make_inputs
    from harness.kernels import default_registry, gate

    spec = capture_spec(decode_capture.directory / "layer02.safetensors")
    spec = dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, page_size=page))
    control = InputSpec(shape=spec.shape, dtype=spec.dtype, source="gaussian:0.1", scale=spec.scale)
    kernel = default_registry().get("sdpa-kvcache")
    for s in (spec, control):
        x = make_inputs(s, device="cpu")
        assert x.shape == spec.shape and (x.page_table is not None) == (page is not None)
        if page:
            assert tuple(x.k.shape)[1:] == (page, 2, 16) and x.page_table.shape == (WINDOWS, S // page)
        assert gate(kernel, x, kernel.prepare(x)).passed


def test_paging_a_capture_moves_its_cache_and_nothing_else(decode_capture):
    import dataclasses

    from harness.capture import capture_spec, load_capture
    from harness.inputs import make_inputs, sequences

    path = decode_capture.directory / "layer00.safetensors"
    spec = capture_spec(path)
    paged = make_inputs(dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, page_size=16)), device="cpu")
    dense = load_capture(path)
    used = [p for b, row in enumerate(paged.page_table.tolist()) for p in row[:paged.shape.pages_per_sequence()[b]]]
    assert used != list(range(len(used)))  # the pages are shuffled, not laid out in order
    for seq in sequences(paged):
        assert torch.equal(seq.k[0], dense.k[seq.index]) and torch.equal(seq.v[0], dense.v[seq.index])
    assert torch.equal(paged.q, dense.q) and "page size 16" in paged.provenance["paged"]


@pytest.mark.slow
def test_triton_splitkv_passes_the_gate_on_a_paged_decode_capture_in_the_interpreter(decode_capture):
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: pip install triton")
    code = (
        "import dataclasses, json, sys\n"
        "from harness.capture import capture_spec\n"
        "from harness.inputs import make_inputs\n"
        "from harness.kernels import default_registry, gate\n"
        "spec = capture_spec(sys.argv[1])\n"
        "k = default_registry().get('triton-splitkv')\n"
        "for page in (None, 8):\n"
        "    s = dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, page_size=page), dtype='bfloat16')\n"
        "    x = make_inputs(s, device='cpu')\n"
        "    print(json.dumps({'page': page, 'passed': gate(k, x, k.prepare(x)).passed}))\n"
    )
    res = subprocess.run([sys.executable, "-c", code, str(decode_capture.directory / "layer02.safetensors")],
                         capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert rows == [{"page": None, "passed": True}, {"page": 8, "passed": True}]


def test_the_suite_builds_a_decode_capture_and_its_control_from_the_shape_flags(decode_capture, model_dirs, text_file):
    from harness.errors import ConfigError
    from harness.suite import CaptureArgs, ShapeArgs, input_specs

    args = CaptureArgs(model=str(model_dirs["llama"]), layers=(2,), text=str(text_file), windows=WINDOWS,
                       captures=decode_capture.directory.parent.parent)
    specs = input_specs(sources=None, shape=ShapeArgs(seq_len_q=STEPS, seq_len_kv=S, page_size=8), capture=args,
                        device="cpu")
    assert [s.name for s in specs] == ["L02:captured", "L02:gaussian:0.1"]
    assert {s.shape for s in specs} == {specs[0].shape} and specs[0].shape.page_size == 8
    assert (specs[0].shape.seq_len, specs[0].shape.seq_len_kv, specs[0].shape.batch) == (STEPS, S, WINDOWS)
    with pytest.raises(ConfigError, match="--seq-len-kv too"):
        input_specs(sources=None, shape=ShapeArgs(seq_len_q=1), capture=args, device="cpu")
    with pytest.raises(ConfigError, match="--window"):
        input_specs(sources=None, shape=ShapeArgs(seq_len_q=1, seq_len_kv=S, window=4), capture=args, device="cpu")
