"""Windows of the text stacked along the batch, with controls of the stacked shape; damaged captures refused
(never silently re-captured); `--list` verifies."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from capture_tiny import SEQ

from harness.capture import (
    CaptureConfig,
    capture,
    ensure_capture,
    format_listing,
    list_captures,
    load_capture,
    model_input_specs,
    recapture_command,
)
from harness.errors import CaptureError
from harness.inputs import make_inputs

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def stacked(tmp_path_factory):
    """The tiny Llama with 3 windows of 64 tokens, read through model_input_specs (the main job's path)."""
    from capture_tiny import TEXT, build_model, byte_tokenizer

    root = tmp_path_factory.mktemp("stack")
    model_dir = root / "llama"
    build_model("llama").save_pretrained(model_dir)
    byte_tokenizer(bos=True).save_pretrained(model_dir)
    text = root / "prose.txt"
    text.write_text(TEXT, encoding="utf-8")
    specs = model_input_specs(str(model_dir), layers=(1,), seq_len=SEQ, text=str(text), root=root / "captures",
                              windows=3, controls=("gaussian:0.1", "zeros"), dtype="float32")
    return model_dir, text, root / "captures", specs


def test_windows_stack_along_the_batch_with_controls_of_that_shape(stacked):
    model_dir, text, root, specs = stacked
    assert [s.label for s in specs] == ["L01:captured", "L01:gaussian:0.1", "L01:zeros"]
    assert {s.shape for s in specs} == {specs[0].shape} and specs[0].shape.batch == 3
    assert len({s.scale for s in specs}) == 1
    captured, control = (make_inputs(s, device="cpu") for s in specs[:2])
    assert captured.q.shape == control.q.shape == (3, 4, SEQ, 16)
    assert float(control.q.float().std()) == pytest.approx(0.1, rel=0.1)
    # Each row is its own window: the rows differ, and row b matches a one-window capture of window b.
    assert not torch.equal(captured.q[0], captured.q[1])


def test_manifest_records_each_windows_token_range(stacked):
    model_dir, text, root, specs = stacked
    path = specs[0].source.partition(":")[2]
    manifest = json.loads((Path(path).parent / "manifest.json").read_text())
    per_window = SEQ - 1  # the tokenizer puts <s> in front of every window
    assert manifest["batch"] == 3 and manifest["stacking"]["windows"] == 3
    assert manifest["text"]["token_ranges"] == [[0, per_window], [per_window, 2 * per_window],
                                                [2 * per_window, 3 * per_window]]
    assert manifest["text"]["special_prefix"] == [256]


def test_a_window_row_is_the_capture_of_that_window(stacked, tmp_path):
    """Row 1 of the stacked capture equals a capture of window 1 alone (the text shifted by one window)."""
    model_dir, text, root, specs = stacked
    shifted = tmp_path / "shifted.txt"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ids = tok(text.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
    shifted.write_text(tok.decode(ids[SEQ - 1:]), encoding="utf-8")
    alone = capture(CaptureConfig(model=str(model_dir), layers=(1,), seq_len=SEQ, text=str(shifted), root=tmp_path))
    stacked_q = load_capture(specs[0].source.partition(":")[2]).q
    torch.testing.assert_close(load_capture(alone.layers[0].path).q[0], stacked_q[1], atol=2e-2, rtol=2e-2)


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_damaged_capture_is_refused_not_recaptured(llama_capture, model_dirs, text_file, monkeypatch, tmp_path):
    import shutil

    import harness.capture._capture as cap
    from harness.capture._weights import sha256_file

    capture_copy = tmp_path / "root" / llama_capture.directory.parent.name / llama_capture.directory.name
    shutil.copytree(llama_capture.directory, capture_copy)
    path = capture_copy / "layer02.safetensors"
    manifest = json.loads((capture_copy / "manifest.json").read_text())
    _flip(path)
    damaged_bytes = path.read_bytes()
    monkeypatch.setattr(cap, "capture", lambda *a, **k: pytest.fail("re-captured a damaged file"))
    common = dict(layers=(0, 2), seq_len=SEQ, text=str(text_file), root=capture_copy.parent.parent)
    with pytest.raises(CaptureError) as err:
        ensure_capture(str(model_dirs["llama"]), **common)
    message = str(err.value)
    assert str(path) in message and manifest["layers"]["2"]["sha256"] in message and sha256_file(path) in message
    assert recapture_command(manifest, 2, capture_copy) in message
    assert path.read_bytes() == damaged_bytes, "the damaged file is left as it was"
    monkeypatch.undo()
    with pytest.raises(CaptureError, match="is damaged"):  # an explicit capture without --recapture refuses too
        capture(CaptureConfig(model=str(model_dirs["llama"]), **common))
    assert path.read_bytes() == damaged_bytes
    paths = ensure_capture(str(model_dirs["llama"]), recapture=True, **common)
    assert torch.equal(load_capture(paths[1]).q, load_capture(llama_capture.layers[1].path).q)


def test_a_pickle_renamed_safetensors_is_refused(capture_copy):
    path = capture_copy / "layer00.safetensors"
    path.write_bytes(pickle.dumps({"q": [1.0]}))
    with pytest.raises(CaptureError, match="is damaged: its sha256 is"):
        load_capture(path)


def test_recapture_command_rebuilds_the_request(capture_copy, model_dirs, text_file):
    manifest = json.loads((capture_copy / "manifest.json").read_text())
    command = recapture_command(manifest, 2, capture_copy)
    assert command == (f"bench capture --model {model_dirs['llama']} --layers 2 --seq-len {SEQ} --text {text_file} "
                       f"--captures {capture_copy.parent.parent} --recapture")
    manifest.update(batch=4, random_weights=True)
    manifest["model"]["weights"] = {"identity": {"seed": 7}}
    assert recapture_command(manifest, 2, capture_copy).endswith("--windows 4 --random-weights --seed 7 --recapture")


def test_list_verifies_every_capture(capture_copy):
    root = capture_copy.parent.parent
    _flip(capture_copy / "layer02.safetensors")
    infos = list_captures(root, verify=True)
    assert [(i.layer, i.status == "ok") for i in infos] == [(0, True), (2, False)]
    assert "is damaged" in infos[1].status
    text = format_listing(infos)
    lines = text.splitlines()
    assert lines[0].split() == ["status", "model", "text", "layer", "shape", "weights", "forward", "self-check", "MB",
                                "path"]
    assert lines[1].split()[:4] == ["ok", "llama", capture_copy.name.rsplit("-S", 1)[0], "0"]
    assert lines[2].startswith("DAMAGED") and "cpu float32" in lines[2] and str(capture_copy / "layer02.safetensors") in lines[2]
    assert lines[-1].startswith(f"{capture_copy / 'layer02.safetensors'}: ") and "--recapture" in lines[-1]
    assert all(i.status == "not verified" for i in list_captures(root))
    (capture_copy / "manifest.json").write_text("{")
    (bad,) = list_captures(root, verify=True)
    assert bad.status.startswith("damaged manifest") and "DAMAGED" in format_listing([bad])
