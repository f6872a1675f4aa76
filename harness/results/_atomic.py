"""The one way this project writes a file: beside the target under a temporary name, then renamed.

A reader never sees half a file, and an interrupted or failed write (Ctrl-C, a full disk) leaves the
previous file intact and no temporary behind. Every writer of the harness goes through `atomic_path`.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

__all__ = ["atomic_path", "write_bytes_atomic", "write_text_atomic", "write_json_atomic", "TMP_SUFFIX"]

TMP_SUFFIX = ".tmp"  # temporaries are `.<name>.<random>.tmp`: hidden, and never matched as parts


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write to; renamed onto `path` when the block ends without an exception."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private (0600); give it the mode an ordinary open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 1) -> Path:
    """`obj` as JSON (non-finite floats as NaN/Infinity, as Python's json writes them)."""
    return write_text_atomic(path, json.dumps(obj, indent=indent) + "\n")
