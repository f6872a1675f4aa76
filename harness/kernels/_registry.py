from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Iterable

import kernels_under_test
from harness.errors import KernelError, UnknownKernelError
from harness.kernels._callable import CALLABLE_SIGNATURE, adapt_callable
from harness.kernels._callable_spec import load_target
from harness.kernels._kernel import Kernel, Launch
from harness.results import file_digest, git_state

__all__ = ["KernelRegistry", "default_registry", "kernel_provenance", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "harness.kernels"


class KernelRegistry:
    """An explicit set of kernels. Decorators only record; nothing is imported or compiled here.

    Plugins are loaded only when asked (`load_plugins`), never as an import side effect: each entry
    point in the `harness.kernels` group names a callable `register(registry)`.
    """

    def __init__(self) -> None:
        self._kernels: dict[str, Kernel] = {}
        self._plugins_loaded = False
        self.plugin_errors: dict[str, str] = {}

    def add(self, kernel: Kernel) -> Kernel:
        if kernel.name in self._kernels and self._kernels[kernel.name] is not kernel:
            raise KernelError(
                f"Two kernels are registered as {kernel.name!r} ({self._kernels[kernel.name].source} and "
                f"{kernel.source}). Kernel names must be unique; rename one."
            )
        self._kernels[kernel.name] = kernel
        return kernel

    def kernel(
        self,
        name: str,
        *,
        dtypes: Iterable[str],
        devices: Iterable[str],
        head_dims: Iterable[tuple[int, int]] | None = None,
        availability: Callable[[str], str | None] | None = None,
        description: str = "",
        graph_safe: bool = True,
        causal_only: bool = False,
        tolerance: str | None = None,
        output_dtype: str | None = None,
        workloads: Iterable[str] = (),
        extra: dict | None = None,
    ) -> Callable[[Callable[..., Launch]], Callable[..., Launch]]:
        """Decorator: record `prepare` as the factory of kernel `name` and return it unchanged (`extra`: what the
        kernel declares beyond these, e.g. {"reads_inputs_at_launch": False} for one that copies its inputs in
        setup)."""

        def record(prepare: Callable[..., Launch]) -> Callable[..., Launch]:
            kwargs = {}
            if availability is not None:
                kwargs["availability"] = availability
            self.add(
                Kernel(
                    name=name,
                    prepare=prepare,
                    dtypes=frozenset(dtypes),
                    devices=frozenset(devices),
                    head_dims=None if head_dims is None else frozenset(tuple(h) for h in head_dims),
                    description=description or (prepare.__doc__ or "").strip().split("\n")[0],
                    graph_safe=graph_safe,
                    causal_only=causal_only,
                    tolerance=tolerance,
                    output_dtype=output_dtype,
                    workloads=frozenset(workloads),
                    source=f"{prepare.__module__}:{prepare.__qualname__}",
                    extra=dict(extra or {}),
                    **kwargs,
                )
            )
            return prepare

        return record

    def load_plugins(self) -> None:
        """Load every `harness.kernels` entry point (the bundled kernels are one of them)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()(self)
            except Exception as exc:  # a broken plugin must not hide the others; `bench list` shows it
                self.plugin_errors[ep.value] = f"{type(exc).__name__}: {exc}"
        if not any(ep.name == "bundled" for ep in entry_points(group=ENTRY_POINT_GROUP)):
            # Running from a source tree that was not pip-installed: register the bundled kernels directly.
            kernels_under_test.register(self)

    def names(self) -> list[str]:
        return sorted(self._kernels)

    def __iter__(self):
        return iter(self._kernels[n] for n in self.names())

    def __contains__(self, name: str) -> bool:
        return name in self._kernels

    def get(self, name: str, *, base_dir=None) -> Kernel:
        """A kernel by name, or by spec: `module:attr` / `path/to/file.py:attr`, optionally `@bshd,expand-gqa`.

        The attribute may be a `Kernel`, a factory recorded with `@registry.kernel(...)`, or a plain
        attention function, which is adapted (`adapt_callable`) under the spec as its name. File paths
        are relative to `base_dir` (default: the current directory).
        """
        if name in self._kernels:
            return self._kernels[name]
        if ":" in name:
            return self._load_spec(name, base_dir=base_dir)
        known = ", ".join(self.names()) or "(none registered)"
        raise UnknownKernelError(
            f"No kernel named {name!r}. Known kernels: {known}. `bench list kernels` shows them with their "
            f"availability; an external kernel or a plain attention function can be given as 'module:function' "
            f"or 'path/to/file.py:function'."
        )

    def _load_spec(self, spec: str, *, base_dir=None) -> Kernel:
        module, obj, parts = load_target(spec, base_dir=base_dir)
        found = self._declared(obj, module)
        if found is not None:
            if parts.options:
                raise KernelError(
                    f"Kernel spec {spec!r}: the options after '@' apply to plain attention functions; "
                    f"{found.name!r} is a declared Kernel with its own layout. Drop them."
                )
            return self.add(found)
        if isinstance(obj, type) or not callable(obj):
            raise KernelError(
                f"Kernel spec {spec!r} names {type(obj).__name__} {parts.attr!r}, which is neither a harness.kernels."
                f"Kernel, a factory recorded with @registry.kernel(...), nor an attention function. {CALLABLE_SIGNATURE}"
            )
        return self.add(adapt_callable(obj, name=spec, options=parts.options))

    def _declared(self, obj, module) -> Kernel | None:
        """The Kernel `obj` is, or whose recorded factory it is; None for anything else."""
        if isinstance(obj, Kernel):
            return obj
        for kernel in self._kernels.values():
            if kernel.prepare is obj:
                return kernel
        registry = getattr(module, "registry", None)
        if isinstance(registry, KernelRegistry):
            for kernel in registry:
                if kernel.prepare is obj:
                    return kernel
        return None


_default: KernelRegistry | None = None


def default_registry() -> KernelRegistry:
    """The process-wide registry with every installed plugin loaded (created on first call)."""
    global _default
    if _default is None:
        _default = KernelRegistry()
        _default.load_plugins()
    return _default


def kernel_provenance(kernels) -> dict:
    """Per kernel: its factory, source file, and the git commit and dirty flag of the tree holding it."""
    out = {}
    for k in kernels:
        if "provenance" in k.extra:  # read in its own process, where it was imported
            out[k.name] = k.extra["provenance"]
            continue
        try:
            file = Path(importlib.import_module(k.source.split(":")[0]).__file__).resolve()
            commit, dirty = git_state(file)
            out[k.name] = {"source": k.source, "file": str(file), "file_sha256": file_digest(file),
                           "git_commit": commit, "git_dirty": dirty, "process": "in-process"}
        except Exception as exc:  # provenance is best effort; its absence is recorded, not fatal
            out[k.name] = {"source": k.source, "error": str(exc)}
    return out
