"""Fixtures: the tiny models saved as local Hugging Face folders, a text file, one shared capture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from capture_tiny import SEQ, TEXT, build_model, byte_tokenizer, tiny_configs


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("tiny_models")
    dirs = {}
    for kind in tiny_configs():
        path = root / kind
        build_model(kind).save_pretrained(path)
        byte_tokenizer(bos=kind == "llama").save_pretrained(path)
        dirs[kind] = path
    return dirs


@pytest.fixture(scope="session")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "prose.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def llama_capture(model_dirs, text_file, tmp_path_factory):
    """One capture of the tiny Llama (layers 0 and 2), made once; tests copy it before changing it."""
    from harness.capture import CaptureConfig, capture

    root = tmp_path_factory.mktemp("captures")
    return capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0, 2), seq_len=SEQ, text=str(text_file),
                                 root=root))


@pytest.fixture
def capture_copy(llama_capture, tmp_path) -> Path:
    """A private copy of the tiny Llama capture directory."""
    target = tmp_path / "copy" / llama_capture.directory.name
    shutil.copytree(llama_capture.directory, target)
    return target
