"""parse_gguf_once: inside a capture's loads each GGUF is parsed once and each tensor-name map built once;
what callers get is theirs to change, a changed file is parsed again, and outside the block gguf and
transformers are as they were. Driven through the same module attributes transformers looks up at call time."""

from __future__ import annotations

import os

import pytest

gguf = pytest.importorskip("gguf", reason="parse_gguf_once patches the gguf package")
utils = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")

from harness.capture._model_io import parse_gguf_once  # noqa: E402


@pytest.fixture
def counted(monkeypatch, tmp_path):
    calls = {"reader": [], "checkpoint": [], "name_map": []}

    class Reader:
        def __init__(self, path, mode="r"):
            calls["reader"].append((path, mode))

    def checkpoint(path, return_tensors=False, model_to_load=None, torch_dtype=None):
        calls["checkpoint"].append((path, return_tensors))
        return {"config": {"model_type": "llama", "layers": [1, 2]}, "tensors": {} if return_tensors else None}

    def name_map(arch, n_blocks):
        calls["name_map"].append((arch, n_blocks))
        return object()

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", name_map)
    monkeypatch.setattr(utils, "load_gguf_checkpoint", checkpoint)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return calls, path, (Reader, name_map, checkpoint)


def test_each_file_is_parsed_once_and_each_name_map_built_once(counted):
    calls, path, _ = counted
    with parse_gguf_once():
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(str(path)) is first and gguf.GGUFReader(path, "r") is first
        maps = {gguf.get_tensor_name_map(1, 30) for _ in range(397)}
        assert len(maps) == 1 and gguf.get_tensor_name_map(1, 31) not in maps
        config = utils.load_gguf_checkpoint(str(path))
        again = utils.load_gguf_checkpoint(str(path), return_tensors=False)
    assert len(calls["reader"]) == 1 and calls["name_map"] == [(1, 30), (1, 31)]
    assert calls["checkpoint"] == [(str(path), False)]
    assert config == again and config is not again


def test_what_a_caller_gets_is_its_own_to_change(counted):
    _, path, _ = counted
    with parse_gguf_once():
        mine = utils.load_gguf_checkpoint(str(path))
        mine["config"].pop("model_type")
        mine["config"]["layers"].append(3)
        theirs = utils.load_gguf_checkpoint(str(path))
    assert theirs["config"] == {"model_type": "llama", "layers": [1, 2]}


def test_loads_with_tensors_are_not_shared(counted):
    calls, path, _ = counted
    with parse_gguf_once():
        utils.load_gguf_checkpoint(str(path), return_tensors=True)
        utils.load_gguf_checkpoint(str(path), True)
        utils.load_gguf_checkpoint(str(path), model_to_load="m")
    assert calls["checkpoint"] == [(str(path), True), (str(path), True), (str(path), False)]


def test_a_changed_file_is_parsed_again(counted):
    calls, path, _ = counted
    with parse_gguf_once():
        gguf.GGUFReader(str(path))
        path.write_bytes(b"GGUF and more")
        gguf.GGUFReader(str(path))
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        gguf.GGUFReader(str(path))
    assert len(calls["reader"]) == 3


def test_outside_the_block_everything_is_as_it_was_even_after_an_error(counted):
    calls, path, originals = counted
    with pytest.raises(RuntimeError):
        with parse_gguf_once():
            gguf.GGUFReader(str(path))
            raise RuntimeError("load failed")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map, utils.load_gguf_checkpoint) == originals
    with parse_gguf_once():
        gguf.GGUFReader(str(path))  # a new block shares nothing with the last
    assert len(calls["reader"]) == 2


def test_the_one_parse_reads_what_gguf_reads_from_a_plain_view_of_the_same_map(tmp_path):
    # A real file, written by gguf's own writer: a string-array field like a vocabulary, numbers and a tensor.
    np = pytest.importorskip("numpy")
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list([f"tok{i}" for i in range(300)])
    writer.add_block_count(2)
    writer.add_float32("tiny.scale", 0.125)
    writer.add_tensor("blk.0.attn_q.weight", np.arange(48, dtype=np.float32).reshape(6, 8))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()

    def content(reader):
        fields = {name: [bytes(p) for p in f.parts] for name, f in reader.fields.items()}
        tensors = {t.name: np.array(t.data) for t in reader.tensors}
        return fields, tensors

    plain = gguf.GGUFReader(str(path))
    with parse_gguf_once():
        fast = gguf.GGUFReader(str(path))
        # the speed: no np.memmap slice (each runs memmap's Python __getitem__ and __array_finalize__)
        assert type(fast.data) is np.ndarray and not isinstance(fast.fields["tokenizer.ggml.tokens"].parts[-1],
                                                                 np.memmap)
        got = content(fast)
    want = content(plain)
    assert got[0] == want[0] and len(got[0]["tokenizer.ggml.tokens"]) == len(want[0]["tokenizer.ggml.tokens"]) > 600
    assert got[1].keys() == want[1].keys() == {"blk.0.attn_q.weight"}
    assert np.array_equal(got[1]["blk.0.attn_q.weight"], want[1]["blk.0.attn_q.weight"])
    assert isinstance(plain.data, np.memmap)  # outside the block, gguf's reader as it was
