"""Loading a model and its tokenizer with the capture hook installed, offline and quietly."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import os
from typing import Iterator

from harness.capture._hook import ATTN_IMPLEMENTATION, register_attention
from harness.capture._models import ModelSpec, architecture_config
from harness.capture._weights import ResolvedWeights
from harness.errors import CaptureError

__all__ = ["load_tokenizer", "load_model", "build_random", "quiet_transformers", "parse_gguf_once", "release_device"]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' own progress bars and advice while our progress bar runs; restore after."""
    from transformers.utils import logging as tlog

    bars = tlog.is_progress_bar_enabled()
    verbosity = tlog.get_verbosity()
    tlog.disable_progress_bar()
    tlog.set_verbosity_error()
    # The GGUF loader draws its own tqdm bar, outside transformers' switch; the name is swapped back below.
    gguf_utils = _gguf_utils()
    gguf_tqdm = getattr(gguf_utils, "tqdm", None)
    if gguf_tqdm is not None:
        gguf_utils.tqdm = functools.partial(gguf_tqdm, disable=True)
    try:
        yield
    finally:
        if gguf_tqdm is not None:
            gguf_utils.tqdm = gguf_tqdm
        if bars:
            tlog.enable_progress_bar()
        tlog.set_verbosity(verbosity)


@contextlib.contextmanager
def parse_gguf_once() -> Iterator[None]:
    """Inside, each GGUF file is parsed once and each tensor-name map built once.

    transformers parses a GGUF's metadata afresh for the tokenizer, for the config and twice for the model
    (about 5 s each for SmolLM2's 49k-token vocabulary) and turns its fields into Python values for each,
    and builds gguf's tensor-name map once per submodule (397 times, 10 s). All are pure functions of their
    arguments while the file is unchanged, so a capture's loads share one of each; outside the block gguf
    and transformers are as they were.

    The one parse is also about 4x faster: gguf's reader slices its np.memmap once per field part (2.7 M slices
    for that vocabulary), and each slice of a memmap runs memmap's Python-level __getitem__ and
    __array_finalize__ (4.5 of the parse's 5.5 s, measured). Here the reader slices a plain ndarray view of the
    same memory map: the same bytes, no copy, the same values, the slices in C."""
    try:
        import gguf
        import numpy as np
    except ImportError:
        yield
        return
    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    class PlainViewReader(reader_cls):
        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, value):  # GGUFReader.__init__ sets np.memmap(path); its .base keeps the mapping open
            self._plain = value.view(np.ndarray) if isinstance(value, np.memmap) else value

    readers: dict = {}

    def reader(path, mode="r"):
        stat = os.stat(path)
        key = (os.path.realpath(path), mode, stat.st_size, stat.st_mtime_ns)
        if key not in readers:
            readers[key] = PlainViewReader(path, mode)
        return readers[key]

    utils = _gguf_utils()
    checkpoint = getattr(utils, "load_gguf_checkpoint", None)
    metadata: dict = {}

    def load_checkpoint(path, return_tensors=False, *args, **kwargs):
        if return_tensors or args or kwargs:
            return checkpoint(path, return_tensors, *args, **kwargs)
        key = os.path.realpath(path)
        if key not in metadata:
            metadata[key] = checkpoint(path)
        return copy.deepcopy(metadata[key])  # callers pop and rename keys of what they get

    gguf.GGUFReader = reader
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    if checkpoint is not None:
        utils.load_gguf_checkpoint = load_checkpoint
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map
        if checkpoint is not None:
            utils.load_gguf_checkpoint = checkpoint
        readers.clear()
        metadata.clear()


def _gguf_utils():
    try:
        from transformers import modeling_gguf_pytorch_utils
    except ImportError:
        return None
    return modeling_gguf_pytorch_utils


def _kwargs(weights: ResolvedWeights) -> dict:
    # local_files_only: a capture reads what is on disk; it never starts a download or a hub lookup.
    kw = {"local_files_only": True}
    if weights.gguf_file:
        kw["gguf_file"] = weights.gguf_file
    return kw


def load_tokenizer(weights: ResolvedWeights):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(weights.folder), **_kwargs(weights))
    except Exception as exc:  # missing tokenizer files surface as OSError, ValueError or TypeError
        raise CaptureError(
            f"Cannot load a tokenizer from {weights.where}: {exc}. A model folder needs its tokenizer files "
            f"(tokenizer.json or tokenizer.model, tokenizer_config.json) beside config.json; download them "
            f"with the weights."
        ) from None


def load_model(weights: ResolvedWeights, *, dtype: str, device: str):
    """The causal LM with every attention layer calling the capture hook (plain sdpa until recording)."""
    import torch
    from transformers import AutoModelForCausalLM

    register_attention()
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(weights.folder),
            attn_implementation=ATTN_IMPLEMENTATION,
            dtype=getattr(torch, dtype),
            **_kwargs(weights),
        )
    except Exception as exc:
        raise CaptureError(
            f"Cannot load the model at {weights.where}: {type(exc).__name__}: {exc}. Check that the folder holds "
            f"complete weights (every shard named in model.safetensors.index.json), and for a GGUF file that "
            f"the `gguf` package is installed (pip install gguf)."
        ) from None
    return model.to(device).eval()


def build_random(spec: ModelSpec, *, dtype: str, device: str, seed: int):
    """The registered architecture at its published size with random weights (transformers' own init,
    seeded), built directly on `device` in `dtype`: nothing is downloaded, nothing passes through the CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    register_attention()
    config = architecture_config(spec)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTN_IMPLEMENTATION,
                                                 dtype=getattr(torch, dtype))
    return model.eval()


def release_device(device: str) -> None:
    """Give a GPU's cached blocks back after the model is dropped, so the run that follows has them. On the CPU
    there is no cache to give back: the model's tensors were freed when it was dropped, and a full collection
    (0.3-1.6 s in a process holding a test session's or a notebook's objects) would buy nothing."""
    if device == "cpu":
        return
    import torch

    gc.collect()  # the tensors a reference cycle holds, before the allocator can return their blocks
    torch.cuda.empty_cache()
