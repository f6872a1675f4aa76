"""The text a model reads during a capture, and the token windows taken from it."""

from __future__ import annotations

import hashlib
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import CaptureError

__all__ = ["DEFAULT_TEXT", "TextSource", "TEXT_SOURCES", "load_text", "text_name", "token_windows", "byte_windows", "documents",
           "document_windows"]

TEXT_SOURCES = {
    "pydoc": "CPython's own documentation text (pydoc_data.topics, joined); needs no download",
    "wikitext2:PATH": "the WikiText-2 test split, from the raw file (wiki.test.raw) at PATH",
    "PATH": "any UTF-8 text file",
}
# The text a capture reads unless told otherwise (harness.suite re-exports it as the suite's default): needs no download.
DEFAULT_TEXT = "pydoc"


@dataclass(frozen=True, kw_only=True)
class TextSource:
    name: str  # the folder-name part: pydoc, wikitext2, or the file's stem and hash
    origin: str  # what it is, in words
    sha256: str
    text: str = field(repr=False)

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "origin": self.origin, "sha256": self.sha256, "chars": len(self.text)}


def load_text(source: str) -> TextSource:
    """Read a text source: `pydoc`, `wikitext2:PATH`, or a file path.

    >>> load_text("pydoc").name
    'pydoc'
    """
    if source == "pydoc":
        from pydoc_data.topics import topics

        # Sorted keys: the order is then fixed by the text itself, not by how the module was generated.
        text = "\n".join(topics[k] for k in sorted(topics))
        origin = f"CPython {platform.python_version()} pydoc_data.topics ({len(topics)} topics joined by newlines)"
        return _source("pydoc", origin, text)
    kind, sep, rest = source.partition(":")
    if kind == "wikitext2":
        if not sep or not rest:
            raise CaptureError(
                "--text wikitext2 needs the path of the WikiText-2 test split: --text wikitext2:PATH, where PATH "
                "is wiki.test.raw from the wikitext-2-raw-v1 archive (or the `test` split of the Hugging Face "
                "dataset Salesforce/wikitext, config wikitext-2-raw-v1, written out as one text file)."
            )
        return _source("wikitext2", f"WikiText-2 test split from {rest}", _read(Path(rest), source))
    if kind == "file" and sep:
        source = rest
    path = Path(source).expanduser()
    if not path.is_file():
        raise CaptureError(
            f"Unknown text {source!r}: not a file. Use one of: "
            + "; ".join(f"{k} ({v})" for k, v in TEXT_SOURCES.items())
            + "."
        )
    text = _read(path, source)
    digest = _sha(text)
    return _source(f"{_slug(path.stem)}-{digest[:8]}", f"text file {path}", text)


def text_name(source: str) -> str:
    """The folder-name part for a text source, without tokenizing anything."""
    return load_text(source).name


def _source(name: str, origin: str, text: str) -> TextSource:
    if not text.strip():
        raise CaptureError(f"The text {name!r} ({origin}) is empty; give a file with some prose in it.")
    return TextSource(name=name, origin=origin, sha256=_sha(text), text=text)


def _read(path: Path, source: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaptureError(f"Text file {str(path)!r} (from --text {source}) does not exist.") from None
    except UnicodeDecodeError as exc:
        raise CaptureError(f"Text file {str(path)!r} is not UTF-8 ({exc}); convert it first.") from None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _slug(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:40] or "text"


def token_windows(tokenizer, source: TextSource, *, seq_len: int, batch: int = 1):
    """`batch` consecutive windows of `seq_len` tokens: the tokenizer's leading special tokens (BOS, if it
    adds one) then the next text tokens. Returns (input_ids [batch, seq_len], provenance dict)."""
    import torch

    # Which special tokens the tokenizer puts in front, learned from a probe so the (long) text is
    # tokenized once, without specials.
    with_special = tokenizer("x", add_special_tokens=True)["input_ids"]
    without = tokenizer("x", add_special_tokens=False)["input_ids"]
    prefix = list(with_special[: len(with_special) - len(without)]) if with_special[-len(without):] == without else []
    ids = tokenizer(source.text, add_special_tokens=False, verbose=False)["input_ids"]
    per_window = seq_len - len(prefix)
    need = per_window * batch
    if per_window <= 0 or need > len(ids):
        raise CaptureError(
            f"The text {source.name!r} ({source.origin}) holds {len(ids):,} tokens for this tokenizer, but "
            f"--seq-len {seq_len} x batch {batch} needs {need:,}. Use a longer text (--text wikitext2:PATH or "
            f"--text FILE) or a shorter --seq-len / smaller batch."
        )
    rows = [prefix + ids[b * per_window : (b + 1) * per_window] for b in range(batch)]
    provenance = {
        **source.provenance(),
        "text_tokens": len(ids),
        "special_prefix": prefix,
        "token_ranges": [[b * per_window, (b + 1) * per_window] for b in range(batch)],
        "note": "token_ranges index the text's tokens without special tokens; each window is special_prefix + that range",
    }
    return torch.tensor(rows, dtype=torch.long), provenance


def byte_windows(source: TextSource, *, seq_len: int, batch: int = 1):
    """Windows of the text's UTF-8 bytes as token ids (0-255), for a model with random weights: it has no
    tokenizer, and its activations mean nothing whatever ids it reads. Same return shape as token_windows."""
    import torch

    data = source.text.encode("utf-8")
    need = seq_len * batch
    if need > len(data):
        raise CaptureError(
            f"The text {source.name!r} ({source.origin}) holds {len(data):,} bytes, but --seq-len {seq_len} x "
            f"batch {batch} needs {need:,} byte tokens. Use a longer text or a shorter --seq-len / fewer windows."
        )
    rows = [list(data[b * seq_len : (b + 1) * seq_len]) for b in range(batch)]
    provenance = {
        **source.provenance(),
        "text_tokens": len(data),
        "special_prefix": [],
        "token_ranges": [[b * seq_len, (b + 1) * seq_len] for b in range(batch)],
        "tokenizer": "none (random weights): token ids are the text's UTF-8 bytes",
        "note": "token_ranges index the text's UTF-8 bytes; each window is that range",
    }
    return torch.tensor(rows, dtype=torch.long), provenance


_WIKI_TITLE = re.compile(r"^ = ([^=].*?) = *$", flags=re.M)


def documents(source: TextSource) -> list[tuple[str, str]]:
    """(title, text) of each document of a text, in order: pydoc's topics (sorted by name, as `load_text`
    joins them), WikiText-2's articles (each from its ` = Title = ` line to the next one), or for any other
    file the whole text as one document (its windows are then consecutive parts of it)."""
    if source.name == "pydoc":
        from pydoc_data.topics import topics

        return [(k, topics[k]) for k in sorted(topics)]
    if source.name == "wikitext2":
        heads = list(_WIKI_TITLE.finditer(source.text))
        return [(m.group(1), source.text[m.start(): heads[i + 1].start() if i + 1 < len(heads) else len(source.text)])
                for i, m in enumerate(heads)]
    return [(source.name, source.text)]


def document_windows(tokenizer, source: TextSource, *, seq_len: int, count: int):
    """The first `seq_len` tokens (the tokenizer's leading special tokens, then the document's) of each of the
    first `count` documents that hold that many, one document per row, so a bootstrap over rows resamples
    documents. A text of one document (any file but pydoc and WikiText-2) gives consecutive windows of it.
    With `tokenizer` None the ids are UTF-8 bytes (random weights). Returns (ids [count, seq_len], provenance).
    """
    import torch

    if tokenizer is None:
        prefix, encode = [], (lambda text: list(text.encode("utf-8")))
    else:
        with_special = tokenizer("x", add_special_tokens=True)["input_ids"]
        without = tokenizer("x", add_special_tokens=False)["input_ids"]
        prefix = list(with_special[: len(with_special) - len(without)]) if with_special[-len(without):] == without else []

        def encode(text):
            return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    per = seq_len - len(prefix)
    docs = documents(source)
    rows, picked, skipped = [], [], 0
    for index, (title, text) in enumerate(docs):
        if per <= 0 or len(rows) == count:
            break
        ids = encode(text)
        windows = [ids[i: i + per] for i in range(0, len(ids) - per + 1, per)] if len(docs) == 1 else [ids[:per]]
        for w in windows:
            if len(w) == per and len(rows) < count:
                rows.append(prefix + w)
                picked.append({"index": index, "title": title, "tokens": len(ids)})
        skipped += len(ids) < per
    if len(rows) < count:
        raise CaptureError(
            f"The text {source.name!r} ({source.origin}) has {len(rows)} document(s) of at least {per} tokens "
            f"(--seq-len {seq_len}) for this tokenizer, but --documents {count} asks for {count}. Use a shorter "
            f"--seq-len, fewer --documents, or a longer text (--text wikitext2:PATH or --text FILE)."
        )
    provenance = {
        **source.provenance(),
        "documents": picked,
        "documents_in_text": len(docs),
        "documents_too_short": skipped,
        "special_prefix": prefix,
        "unit": "documents" if len(docs) > 1 else "consecutive windows of one text",
        "tokenizer": "none (random weights): token ids are the text's UTF-8 bytes" if tokenizer is None else "the model's",
    }
    return torch.tensor(rows, dtype=torch.long), provenance
