"""Kernel specs: `module:function`, `path/to/file.py:function`, options after `@` (a layout, the GQA mode), and
loading what a spec names (a module on the path or in the current folder, or a file by its path)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, KernelError, UnknownKernelError
from harness.kernels._decode_layout import DECODE_LAYOUTS

__all__ = ["LAYOUTS", "SPEC_OPTIONS", "CallableSpec", "apply_options", "load_target", "split_spec",
           "spec_with_options"]

LAYOUTS = ("bhsd", "bshd", *DECODE_LAYOUTS)
_SPEC_OPTIONS = {"bhsd": ("layout", "bhsd"), "bshd": ("layout", "bshd"), "decode": ("layout", "decode"),
                 "decode-bshd": ("layout", "decode-bshd"), "expand-gqa": ("gqa", "expand"),
                 "native-gqa": ("gqa", "native")}
SPEC_OPTIONS = tuple(_SPEC_OPTIONS)  # what may follow `@` in a callable spec


@dataclass(frozen=True, kw_only=True)
class CallableSpec:
    """`module:attr@opt,opt` or `path/to/file.py:attr@opt` split into its parts."""

    target: str  # module name or file path
    attr: str
    options: dict

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py") or "/" in self.target


def split_spec(spec: str) -> CallableSpec:
    """Split a kernel spec; options after `@` are `bhsd`, `bshd`, `expand-gqa`, `native-gqa`, comma-separated."""
    target, _, rest = spec.rpartition(":")
    attr, _, opts = rest.partition("@")
    if not target or not attr:
        raise KernelError(f"Kernel spec {spec!r} is not module:function or path/to/file.py:function.")
    options: dict = {}
    for token in filter(None, (t.strip() for t in opts.split(","))):
        if token not in _SPEC_OPTIONS:
            raise KernelError(f"Kernel spec {spec!r}: unknown option {token!r} after '@'; the options are "
                              f"{', '.join(_SPEC_OPTIONS)} (comma-separated), e.g. mykern:attn@bshd,expand-gqa.")
        key, value = _SPEC_OPTIONS[token]
        if key in options and options[key] != value:
            raise KernelError(f"Kernel spec {spec!r} gives two {key} options.")
        options[key] = value
    return CallableSpec(target=target, attr=attr, options=options)


def spec_with_options(spec: str, *, layout: str | None = None, gqa: str | None = None) -> str:
    """`spec` with a layout/GQA option appended; refused for a registered name (it declares its own layout)."""
    if layout is None and gqa is None:
        return spec
    if layout is not None and layout not in LAYOUTS:
        raise ConfigError(f"--layout {layout!r}: the layouts are {', '.join(LAYOUTS)}.")
    if ":" not in spec:
        raise ConfigError(f"--layout/--gqa apply to plain callables named module:function or file.py:function; "
                          f"{spec!r} is a registered kernel, which declares its own layout. Drop the option or name "
                          f"a callable.")
    parts = split_spec(spec)
    head, _, tail = spec.rpartition(":")
    attr, _, opts = tail.partition("@")
    tokens = [t for t in opts.split(",") if t]
    if layout is not None and parts.options.get("layout", layout) != layout:
        raise ConfigError(f"--layout {layout} contradicts the spec {spec!r}.")
    if layout is not None and "layout" not in parts.options:
        tokens.append(layout)
    if gqa is not None and "gqa" not in parts.options:
        tokens.append(f"{gqa}-gqa")
    return f"{head}:{attr}@{','.join(tokens)}"


def apply_options(kernels, *, layout: str | None = None, gqa: str | None = None) -> tuple[str, ...]:
    """`bench ... -k A -k B --layout bshd`: the option on every module:function / file.py:function spec.

    Registered kernels in the same list keep their own layout (comparing your function with sdpa-cudnn is
    the usual case); an option with no callable spec to apply to is refused rather than ignored.
    """
    kernels = tuple(kernels)
    if layout is None and gqa is None:
        return kernels
    if not any(":" in k for k in kernels):
        flag = "--layout" if layout is not None else "--gqa"
        raise ConfigError(f"{flag} applies to plain callables named module:function or file.py:function, and none of "
                          f"the kernels ({', '.join(kernels) or 'the defaults'}) is one; registered kernels declare their "
                          f"own layout. Drop {flag} or name a callable with -k.")
    return tuple(spec_with_options(k, layout=layout, gqa=gqa) if ":" in k else k for k in kernels)


def _load_file(path: Path):
    path = path.resolve()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == path:
            return module
    stem = path.stem
    if stem.isidentifier() and stem not in sys.modules:
        found = importlib.util.find_spec(stem)
        if found is not None and found.origin and Path(found.origin).resolve() == path:
            return importlib.import_module(stem)  # the file is that module on sys.path: import it as such
        free = found is None
    else:
        free = False
    # The file's own name when nothing else answers to it, so provenance reads `mykern:attn`; otherwise a
    # name derived from the path, so it can neither shadow nor be shadowed by an installed module.
    name = stem if free else (
        f"_bench_file_{stem if stem.isidentifier() else 'module'}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_target(spec: str, *, base_dir: Path | None = None):
    """(module, object, CallableSpec) that `spec` names; file paths are relative to `base_dir` (default cwd)."""
    parts = split_spec(spec)
    if parts.is_file:
        path = Path(parts.target)
        if not path.is_absolute():
            path = Path(base_dir or Path.cwd()) / path
        if not path.is_file():
            raise UnknownKernelError(f"Kernel spec {spec!r}: the file {path} does not exist. Give the path to a .py file "
                              f"(relative to {'the repository folder' if base_dir else 'the current directory'}).")
        what = f"file {str(path)!r}"
        load = lambda: _load_file(path)  # noqa: E731
    else:
        what = f"module {parts.target!r}"
        top = parts.target.partition(".")[0]
        here = Path(base_dir or Path.cwd())
        if top not in sys.modules and ((here / top).is_dir() or (here / f"{top}.py").is_file()) \
                and importlib.util.find_spec(top) is None:
            # A module in the current folder, as `python -m` would find it (a console script's sys.path
            # starts at the script's own folder instead).
            sys.path.insert(0, str(here))
        load = lambda: importlib.import_module(parts.target)  # noqa: E731
    try:
        module = load()
    except Exception as exc:
        raise UnknownKernelError(
            f"Kernel spec {spec!r}: importing {what} failed ({type(exc).__name__}: {exc}). Check that it is on "
            f"PYTHONPATH (or installed, or the path is right) and imports on its own."
        ) from None
    except SystemExit as exc:  # the module's own sys.exit: its error, never the exit status of the command
        code = "" if exc.code is None else repr(exc.code)
        raise UnknownKernelError(
            f"Kernel spec {spec!r}: importing it called sys.exit({code}). Check that it imports on its own "
            f"(python -c 'import ...'); nothing was run.") from None
    obj = module
    for piece in parts.attr.split("."):
        try:
            obj = getattr(obj, piece)
        except AttributeError:
            raise UnknownKernelError(f"Kernel spec {spec!r}: {what} has no attribute {parts.attr!r}.") from None
    return module, obj, parts
