"""The captures/ format: manifest round trip, loading checks, damaged files, listing, the capture: source."""

from __future__ import annotations

import json
import math

import pytest
from capture_tiny import SEQ

from harness.capture import (
    CaptureConfig,
    capture,
    capture_shape,
    capture_spec,
    ensure_capture,
    list_captures,
    load_capture,
)
from harness.errors import CaptureError, InputError
from harness.inputs import InputSpec, make_inputs

torch = pytest.importorskip("torch")


def test_manifest_round_trip(llama_capture, text_file):
    manifest = json.loads((llama_capture.directory / "manifest.json").read_text())
    assert manifest["format"] == "harness.capture" and manifest["version"] == 1
    assert manifest["seq_len"] == SEQ and manifest["batch"] == 1 and manifest["stored_dtype"] == "bfloat16"
    assert manifest["model"]["heads_q"] == 4 and manifest["model"]["heads_kv"] == 2
    assert manifest["model"]["weights"]["origin"] == "--model path"
    assert len(manifest["model"]["weights"]["identity"]["config_sha256"]) == 64
    assert manifest["rope"]["theta"] == 10000.0 and manifest["rope"]["captured"] == "after RoPE"
    assert manifest["text"]["sha256"] == __import__("hashlib").sha256(text_file.read_bytes()).hexdigest()
    assert manifest["text"]["special_prefix"] == [256] and manifest["text"]["token_ranges"] == [[0, SEQ - 1]]
    assert set(manifest["harness"]) == {"version", "commit", "dirty"}
    assert sorted(manifest["layers"]) == ["0", "2"]
    for result in llama_capture.layers:
        entry = manifest["layers"][str(result.layer)]
        assert entry["file"] == f"layer{result.layer:02d}.safetensors"
        assert entry["shapes"] == {"q": [1, 4, SEQ, 16], "k": [1, 2, SEQ, 16], "v": [1, 2, SEQ, 16]}
        assert entry["scale"] == 0.25 and entry["causal"] is True
        assert entry["self_check"]["max_abs_diff"] == result.self_check_max_abs_diff <= entry["self_check"]["tolerance"]
        stats = entry["stats"]
        assert set(stats) == {"q_std", "k_std", "v_std", "q_excess_kurtosis", "k_excess_kurtosis",
                              "v_excess_kurtosis", "logit_std", "sink_mass", "deep_block_share"}
        assert 1 / SEQ <= stats["sink_mass"] <= 1 and 0 <= stats["deep_block_share"] <= 1
        x = load_capture(result.path)
        assert x.provenance["sha256"] == entry["sha256"] and x.provenance["layer"] == result.layer
        assert x.provenance["text"]["name"] == manifest["text"]["name"]
        assert x.shape.label() == f"B1 H4/2 S{SEQ} d16 causal"
        assert x.q.is_contiguous() and x.dtype == "bfloat16" and x.source == f"capture:{result.path}"


def test_statistics_match_a_direct_computation():
    """Sink mass, logit std and the deep-block share computed naively on the whole score matrix."""
    from harness.capture._recompute import recompute

    S = 320  # not a multiple of 64: the last key block is partial
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, S, 16, generator=g) * 1.5 for h in (4, 2, 2))
    scale = 0.5  # logits std ~ 4.5: many blocks fall more than 8 binades below their row max
    s = (q @ k.repeat_interleave(2, dim=1).transpose(-1, -2)) * scale
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    masked = s.masked_fill(~mask, float("-inf"))
    p = masked.softmax(-1)
    padded = torch.nn.functional.pad(masked, (0, 384 - S), value=float("-inf"))
    blocks = padded.view(1, 4, S, 6, 64).amax(-1)
    valid = (torch.arange(6) * 64)[None, :] <= torch.arange(S)[:, None]
    gap = (masked.amax(-1, keepdim=True) - blocks) / math.log(2)
    deep = float(((gap > 8) & valid).sum() / (valid.sum() * 4))
    out = p @ v.repeat_interleave(2, dim=1)
    diff, stats = recompute(q, k, v, scale=scale, model_out=out, block_rows=48)
    assert diff < 1e-5
    assert 0.05 < deep < 0.95
    assert stats.deep_block_share == pytest.approx(deep, abs=1e-9)
    assert stats.sink_mass == pytest.approx(float(p[..., 0].mean()), rel=1e-5)
    assert stats.logit_std == pytest.approx(float(s[..., mask].std(unbiased=False)), rel=1e-4)
    assert stats.q_std == pytest.approx(float(q.std(unbiased=False)), rel=1e-4)
    x = q.double().flatten()
    kurt = float(((x - x.mean()) ** 4).mean() / x.var(unbiased=False) ** 2 - 3)
    assert stats.q_excess_kurtosis == pytest.approx(kurt, rel=1e-6)


def test_capture_source_through_make_inputs(llama_capture):
    path = llama_capture.layers[0].path
    spec = capture_spec(path)
    assert spec.shape == capture_shape(path) and spec.scale == 0.25
    x = make_inputs(spec, device="cpu")
    assert torch.equal(x.q, load_capture(path).q)
    fp32 = make_inputs(capture_spec(path, dtype="float32"), device="cpu")
    assert fp32.q.dtype == torch.float32 and torch.equal(fp32.q, x.q.float())
    fp8 = make_inputs(capture_spec(path, dtype="fp8"), device="cpu")
    assert fp8.q.dtype == torch.float8_e4m3fn and set(fp8.provenance["descale"]) == {"q", "k", "v"}


def test_capture_source_with_a_wrong_shape(llama_capture):
    path = llama_capture.layers[0].path
    wrong = InputSpec(shape=capture_shape(path).__class__(batch=1, heads_q=4, heads_kv=2, seq_len=32, head_dim_qk=16),
                      source=f"capture:{path}")
    with pytest.raises(InputError, match="capture_spec"):
        make_inputs(wrong, device="cpu")


def test_list_captures(llama_capture, capture_copy):
    found = list_captures(capture_copy.parent.parent)
    assert [(c.layer, c.kind, c.seq_len) for c in found] == [(0, "capture", SEQ), (2, "capture", SEQ)]
    assert found[0].path == capture_copy / "layer00.safetensors" and found[0].bytes > 0


def test_checksum_mismatch(capture_copy):
    from harness.capture._weights import sha256_file

    path = capture_copy / "layer02.safetensors"
    expected = json.loads((capture_copy / "manifest.json").read_text())["layers"]["2"]["sha256"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one bit flipped in the last value
    path.write_bytes(bytes(data))
    with pytest.raises(CaptureError) as err:
        load_capture(path)
    message = str(err.value)
    assert f"{path} is damaged: its sha256 is {sha256_file(path)}, but its manifest records {expected}" in message
    assert "--layers 2 --seq-len 64" in message and message.rstrip("`.").endswith("--recapture")


def test_corrupt_safetensors(capture_copy):
    """A truncated file whose checksum was (wrongly) re-recorded: safetensors itself must refuse it."""
    from harness.capture._weights import sha256_file

    path = capture_copy / "layer00.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    manifest_path = capture_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["layers"]["0"]["sha256"] = sha256_file(path)
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(CaptureError, match="not a readable safetensors file"):
        load_capture(path)


def test_manifest_shape_mismatch(capture_copy):
    manifest_path = capture_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["layers"]["0"]["shapes"]["k"] = [1, 4, SEQ, 16]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(CaptureError) as err:
        load_capture(capture_copy / "layer00.safetensors")
    assert "tensor k has shape [1, 2, 64, 16], but the manifest records [1, 4, 64, 16]" in str(err.value)


def test_missing_or_foreign_manifest(capture_copy):
    stray = capture_copy / "layer07.safetensors"
    stray.write_bytes((capture_copy / "layer00.safetensors").read_bytes())
    with pytest.raises(CaptureError, match="is not listed in"):
        load_capture(stray)
    (capture_copy / "manifest.json").unlink()
    with pytest.raises(CaptureError, match="manifest.json is missing"):
        load_capture(capture_copy / "layer00.safetensors")
    with pytest.raises(CaptureError, match="does not exist"):
        load_capture(capture_copy / "layer09.safetensors")


def test_new_layers_merge_into_the_manifest(model_dirs, text_file, tmp_path):
    common = dict(model=str(model_dirs["qwen3"]), seq_len=SEQ, text=str(text_file), root=tmp_path)
    first = capture(CaptureConfig(layers=(0,), **common))
    capture(CaptureConfig(layers=(1,), **common))
    manifest = json.loads((first.directory / "manifest.json").read_text())
    assert sorted(manifest["layers"]) == ["0", "1"]
    assert load_capture(first.directory / "layer00.safetensors").shape.heads_q == 4


def test_ensure_capture_reuses_what_is_there(model_dirs, text_file, tmp_path, monkeypatch):
    import harness.capture._capture as cap

    common = dict(seq_len=SEQ, text=str(text_file), root=tmp_path)
    paths = ensure_capture(str(model_dirs["llama"]), layers=(1,), **common)
    assert [p.name for p in paths] == ["layer01.safetensors"]

    def refuse(*args, **kwargs):
        raise AssertionError("recaptured a layer that was already there")

    monkeypatch.setattr(cap, "capture", refuse)
    assert ensure_capture(str(model_dirs["llama"]), layers=(1,), **common) == paths
    monkeypatch.undo()
    paths[0].unlink()  # a missing file is captured again
    again = ensure_capture(str(model_dirs["llama"]), layers="1", **common)
    assert load_capture(again[0]).shape.seq_len == SEQ


def test_progress_runs_through_every_stage(model_dirs, text_file, tmp_path):
    import io

    from rich.console import Console

    from harness.capture import capture_progress

    console = Console(file=io.StringIO(), width=100, force_terminal=False)
    with capture_progress(console) as progress:
        capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(1,), seq_len=SEQ, text=str(text_file),
                              root=tmp_path), progress=progress)
    (task,) = progress.tasks
    # tokenize + load + attention calls of layers 0..1 + check + save
    assert task.total == task.completed == 6
    assert task.description == "capture llama: done"


def test_import_loads_no_heavy_module():
    import subprocess
    import sys

    code = "import sys, harness.capture; print(sorted(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
