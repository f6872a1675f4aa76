"""Importing the kernels of one revision's source tree, inside that revision's worker process.

The harness that measures is always the one running `bench commits`; only the kernels come from the
revision. Two things would otherwise quietly import the wrong code:

- an editable install's import hook (setuptools' `__editable__` finder) maps a package name to the
  developer's checkout ahead of anything on `sys.path`, so `kernels_under_test` would come from the
  checkout at every revision and the comparison would compare a tree with itself;
- the revision's own copy of `harness/` (when the repository is this one) would replace the
  measuring harness with an old one.

`RevisionFinder` goes first on `sys.meta_path` and serves every top-level module found in the tree
(and the submodules of those), except `harness`. Namespace directories (no `__init__.py`) are left
alone: a stray folder named like an installed package must not shadow it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

from harness.errors import KernelError, UnknownKernelError
from harness.kernels import KernelRegistry, split_spec

__all__ = ["MissingKernelError", "RevisionFinder", "revision_entry_points", "load_revision_kernel", "install_finder",
           "PROTECTED"]

PROTECTED = frozenset({"harness"})
ENTRY_POINT_GROUP = "harness.kernels"


class MissingKernelError(UnknownKernelError):
    """The kernel is not defined at one of the revisions compared."""


class RevisionFinder(importlib.abc.MetaPathFinder):
    """Resolve top-level modules present in the revision's tree from that tree, ahead of other finders."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [str(r) for r in roots]
        self.served: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top in PROTECTED:
            return None
        if path is None:
            spec = importlib.machinery.PathFinder.find_spec(fullname, self.roots)
            if spec is None or spec.origin is None:  # not in the tree, or a namespace directory
                return None
            self.served.add(fullname)
            return spec
        if top in self.served:
            # Submodules of a package served from the tree come from that package's own __path__; the
            # editable finder would otherwise answer for `kernels_under_test.x` from the checkout.
            return importlib.machinery.PathFinder.find_spec(fullname, path)
        return None


def install_finder(tree: Path) -> RevisionFinder:
    roots = [tree] + ([tree / "src"] if (tree / "src").is_dir() else [])
    finder = RevisionFinder(roots)
    sys.meta_path.insert(0, finder)
    return finder


def revision_entry_points(tree: Path) -> dict[str, str]:
    """The `harness.kernels` entry points the tree's pyproject.toml declares (name -> `module:attr`).

    Read from the file rather than from installed metadata: what is installed is one revision (or
    none), and installing every revision would change the user's environment.
    """
    import tomllib

    path = tree / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KernelError(f"{path} cannot be parsed ({exc}), so its harness.kernels entry points are unknown.") from None
    return dict(data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {}))


def _check_from_tree(module, tree: Path, what: str) -> None:
    file = getattr(module, "__file__", None)
    if file is None or not Path(file).resolve().is_relative_to(tree.resolve()):
        raise KernelError(
            f"{what}: module {module.__name__!r} was imported from {file or 'nowhere (a namespace)'}, not from the "
            f"revision's tree {tree}. Both revisions would run the same code. Give a module that lives in the "
            f"repository (module:function), or a kernel its pyproject.toml registers under [project.entry-points."
            f"\"{ENTRY_POINT_GROUP}\"]."
        )


def load_revision_kernel(tree: Path, kernel: str, *, revision: str):
    """The `Kernel` named `kernel` (a name or `module:function`) as defined at this revision's tree.

    Names are looked up in the kernels the tree registers through its `harness.kernels` entry points
    (this repository's `kernels_under_test` is one); a tree without entry points but with a
    `kernels_under_test/` package (older revisions of this repository) registers that package.
    """
    tree = Path(tree)
    install_finder(tree)
    registry = KernelRegistry()  # not default_registry(): that loads what is installed, not this revision
    where = f"revision {revision}"
    if ":" in kernel:
        parts = split_spec(kernel)
        if parts.is_file:  # checked before the file runs: one outside the tree is the same at every revision
            path = (tree / parts.target).resolve()
            if not path.is_relative_to(tree.resolve()):
                raise KernelError(
                    f"Kernel {kernel!r} at {where}: {path} is outside the repository folder {tree}, so both "
                    f"revisions would run the same file. Give a path inside the repository."
                )
        try:
            # A file path is relative to the repository folder (--repo) in this revision's worktree.
            found = registry.get(kernel, base_dir=tree)
        except UnknownKernelError as exc:  # a misfit signature is reported as it is, not as "missing"
            raise MissingKernelError(f"Kernel {kernel!r} is missing at {where}: {exc}") from None
        if not parts.is_file:
            _check_from_tree(sys.modules[parts.target], tree, f"Kernel {kernel!r} at {where}")
        return found
    points = revision_entry_points(tree)
    if not points and (tree / "kernels_under_test" / "__init__.py").is_file():
        points = {"bundled": "kernels_under_test:register"}
    if not points:
        raise KernelError(
            f"Kernel {kernel!r} cannot be looked up at {where}: the tree declares no [project.entry-points."
            f"\"{ENTRY_POINT_GROUP}\"] in pyproject.toml and has no kernels_under_test/ package. Register the "
            f"kernels there, or name the kernel as module:function."
        )
    for name, value in points.items():
        module_name, _, attr = value.partition(":")
        try:
            module = importlib.import_module(module_name)
            getattr(module, attr or "register")(registry)
        except Exception as exc:  # the plugin's own error, with the revision it came from
            raise KernelError(
                f"The {ENTRY_POINT_GROUP} entry point {name} = {value!r} failed at {where}: {type(exc).__name__}: {exc}"
            ) from None
        _check_from_tree(module, tree, f"Entry point {name} = {value!r} at {where}")
    try:
        return registry.get(kernel)
    except UnknownKernelError:
        known = ", ".join(registry.names()) or "none"
        raise MissingKernelError(
            f"Kernel {kernel!r} is missing at {where}: the kernels registered there are {known}. It was renamed "
            f"or added later; compare revisions that both define it."
        ) from None
