"""The paths a command is given: absolute from its start, and the figures' files checked writable before it runs.

A kernel run in the command's own process (`--isolation none`, `bench error`, `bench repro`) may change
directory; relative paths resolved after it did would move what the command writes (issue 41: `--json out.json`
landed in the kernel's folder, once in `/`). `absolute_paths` wraps every command (`harness.cli`).
"""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path

from harness.errors import ConfigError

__all__ = ["absolute_paths", "check_writable"]

# Options that hold a path as a string (`-` is stdout, not a path).
_STR_PATHS = frozenset({"json_out", "csv_out"})


def _absolute(name: str, value):
    if isinstance(value, Path):
        return value.absolute()
    if name in _STR_PATHS and isinstance(value, str) and value not in ("", "-"):
        return str(Path(value).absolute())
    if isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
        return [v.absolute() for v in value]
    return value


def absolute_paths(fn):
    """A command whose path options (every `Path`, and --json/--csv) are made absolute before it runs. Typer
    reads the signature of `fn`."""

    @functools.wraps(fn)
    def command(**kwargs):
        return fn(**{k: _absolute(k, v) for k, v in kwargs.items()})

    # Annotations evaluated where `fn` was written (they are strings there; this module's names differ).
    sig = inspect.signature(fn, eval_str=True)
    command.__signature__ = sig
    command.__annotations__ = {n: p.annotation for n, p in sig.parameters.items()} | {"return": sig.return_annotation}
    del command.__wrapped__  # typer must see the signature set here, as with_options's
    return command


def check_writable(flag: str, path: Path) -> None:
    """Refuse a --json / --csv path that cannot be written before anything runs, not after an hour of measuring."""
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: that is a folder; give a file name in it (e.g. {path / 'figures'}"
                          f"{'.json' if flag == '--json' else '.csv'}).")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: its folder cannot be made ({exc.strerror or exc}). Give a path in a "
                          f"writable folder, or - for stdout.") from None
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"{flag} {path}: {'the file' if path.exists() else 'its folder ' + str(path.parent)} is not "
                          f"writable. Give a path in a writable folder, or - for stdout.")
