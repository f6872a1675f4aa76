"""Text sources, token windows, and the requests refused before a model is loaded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from capture_tiny import SEQ, byte_tokenizer

from harness.capture import CaptureConfig, capture, load_text
from harness.capture._text import token_windows
from harness.errors import CaptureError, ConfigError

WIKITEXT = Path("/work/shared/corpora/wikitext-2/test.txt")  # test-only; the harness never reads ../shared


def test_pydoc_text_needs_no_download():
    source = load_text("pydoc")
    assert source.name == "pydoc"
    assert "pydoc_data.topics" in source.origin and "CPython" in source.origin
    assert len(source.text) > 100_000
    assert source.sha256 == hashlib.sha256(source.text.encode()).hexdigest()


def test_wikitext2_from_file():
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} is absent (the WikiText-2 test split; only this test uses it)")
    source = load_text(f"wikitext2:{WIKITEXT}")
    assert source.name == "wikitext2"
    assert source.sha256 == hashlib.sha256(WIKITEXT.read_bytes()).hexdigest()
    ids, provenance = token_windows(byte_tokenizer(bos=False), source, seq_len=4096, batch=2)
    assert ids.shape == (2, 4096) and provenance["token_ranges"] == [[0, 4096], [4096, 8192]]


def test_wikitext2_without_path_says_where_to_get_it():
    with pytest.raises(CaptureError, match="wiki.test.raw"):
        load_text("wikitext2")


def test_any_text_file_is_named_by_stem_and_hash(text_file):
    source = load_text(str(text_file))
    assert source.name == f"prose-{source.sha256[:8]}"
    assert str(text_file) in source.origin


def test_unknown_text_lists_the_sources():
    with pytest.raises(CaptureError) as err:
        load_text("no-such-file.txt")
    assert "pydoc" in str(err.value) and "wikitext2:PATH" in str(err.value)


def test_windows_start_with_bos_when_the_tokenizer_adds_one(text_file):
    source = load_text(str(text_file))
    tokenizer = byte_tokenizer(bos=True)
    text_ids = tokenizer(source.text, add_special_tokens=False)["input_ids"]
    ids, provenance = token_windows(tokenizer, source, seq_len=SEQ, batch=2)
    assert provenance["special_prefix"] == [256]
    per = SEQ - 1
    assert provenance["token_ranges"] == [[0, per], [per, 2 * per]]
    assert ids.shape == (2, SEQ)
    assert ids[0].tolist() == [256] + text_ids[:per]
    assert ids[1].tolist() == [256] + text_ids[per : 2 * per]  # the second row continues the text


def test_windows_without_bos(text_file):
    source = load_text(str(text_file))
    ids, provenance = token_windows(byte_tokenizer(bos=False), source, seq_len=SEQ)
    assert provenance["special_prefix"] == [] and provenance["token_ranges"] == [[0, SEQ]]
    assert provenance["sha256"] == source.sha256 and provenance["text_tokens"] == len(source.text.encode())


def test_seq_len_beyond_the_text(text_file):
    source = load_text(str(text_file))
    n = len(source.text.encode())
    with pytest.raises(CaptureError) as err:
        token_windows(byte_tokenizer(bos=False), source, seq_len=n + 1)
    assert f"holds {n:,} tokens" in str(err.value) and "shorter --seq-len" in str(err.value)


def test_seq_len_beyond_the_text_through_capture(model_dirs, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("too short", encoding="utf-8")
    with pytest.raises(CaptureError, match="holds 9 tokens"):
        capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0,), seq_len=SEQ, text=str(short),
                              root=tmp_path))


def test_seq_len_beyond_the_model_limit():
    with pytest.raises(CaptureError) as err:
        capture(CaptureConfig(model="smollm2-135m", layers=(3,), seq_len=8193))
    assert "beyond smollm2-135m's limit of 8192 positions" in str(err.value)


def test_layer_out_of_range():
    with pytest.raises(CaptureError) as err:
        capture(CaptureConfig(model="smollm2-135m", layers=(3, 30), seq_len=128))
    assert "Layer 30 out of range: smollm2-135m has 30 layers, numbered 0 to 29." in str(err.value)


def test_layers_are_parsed_and_checked():
    assert CaptureConfig(layers="20, 3,3").layers == (3, 20)
    with pytest.raises(ConfigError, match="integers"):
        CaptureConfig(layers="3,x")
    with pytest.raises(ConfigError, match="--seq-len 0: must be a positive integer"):
        CaptureConfig(seq_len=0)
