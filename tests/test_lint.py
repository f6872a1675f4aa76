"""The tree passes `ruff check` (pyproject.toml's [tool.ruff]: pyflakes, sorted imports, imports at the top of the
module but for the listed heavy ones), importing the harness loads none of those, and scripts/hoist_imports.py,
which moves function-local imports up, does what it says and nothing more."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
HOIST = ROOT / "scripts" / "hoist_imports.py"


def _ruff() -> str:
    ruff = Path(sys.executable).parent / "ruff"
    found = str(ruff) if ruff.exists() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (the dev extra installs it: pip install -e '.[dev]'): the tree was not "
                    "linted")
    return found


def _lazy() -> list[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return conf["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-module-level-imports"]


def test_ruff_finds_nothing():
    out = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, (
        f"ruff check found problems (a function-local import: run `python scripts/hoist_imports.py`; an unsorted "
        f"block: `ruff check --fix`):\n{out.stdout}{out.stderr}")


def test_importing_the_harness_loads_no_listed_library():
    # The CLI (every command, so `bench --help`), the pytest plugin (loaded by every pytest run where the harness
    # is installed) and the bundled kernels' registrations import the whole harness at their top; none of it may
    # load what pyproject.toml lists as heavy.
    lazy = [m for m in _lazy() if not m.startswith(("harness.", "kernels_under_test."))]
    code = ("import sys, harness.cli, harness.pytest_plugin, kernels_under_test\n"
            "from harness.kernels import KernelRegistry\n"
            "kernels_under_test.register(KernelRegistry())\n"
            f"print(sorted(m for m in {lazy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def _hoist(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HOIST), "--root", str(root), *args], capture_output=True, text=True)


def _imports(body) -> list[str]:
    return [ast.unparse(s) for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]


def test_hoist_imports_moves_own_and_standard_imports_up_and_leaves_listed_ones(tmp_path):
    _write(tmp_path, {
        "pyproject.toml": """
            [tool.ruff.lint.flake8-tidy-imports]
            banned-module-level-imports = ["torch", "harness._heavy"]
        """,
        "harness/__init__.py": "",
        "harness/errors.py": "class ConfigError(Exception):\n    pass\n",
        "harness/_heavy.py": "import torch\n",
        "kernels_under_test/__init__.py": "",
        "harness/a.py": '''
            """A module."""

            from __future__ import annotations

            import os
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from harness.errors import ConfigError


            def f():
                """Doc."""
                import json

                import torch

                from harness.errors import ConfigError

                return json, torch, ConfigError, os


            def g():
                from harness import _heavy
                from harness.errors import ConfigError as Refused

                return _heavy, Refused
        ''',
    })
    first = _hoist(tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    text = (tmp_path / "harness/a.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    top = _imports(tree.body)
    assert top[0] == "from __future__ import annotations"
    assert {"import json", "import os"} <= set(top)
    # at the module's top level, so at run time too, not only under TYPE_CHECKING
    errors = {(a.name, a.asname) for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "harness.errors"
              for a in s.names}
    assert errors == {("ConfigError", None), ("ConfigError", "Refused")}, top
    f, g = (n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert _imports(f.body) == ["import torch"]  # listed: stays where it is used
    assert _imports(g.body) == ["from harness import _heavy"]
    assert ast.get_docstring(f) == "Doc." and ast.get_docstring(tree) == "A module."
    # Rerunnable: a second run finds nothing to move and changes nothing.
    again = _hoist(tmp_path, "--check")
    assert again.returncode == 0, again.stdout
    assert (tmp_path / "harness/a.py").read_text(encoding="utf-8") == text


def test_hoist_imports_leaves_an_import_whose_name_means_something_else_where_it_would_go(tmp_path):
    module_level = '''
        import os


        def f():
            from harness.errors import ConfigError as os

            return os
    '''
    closure = '''
        def outer(ConfigError):
            def inner():
                from harness.errors import ConfigError

                return ConfigError

            return inner
    '''
    _write(tmp_path, {
        "pyproject.toml": "[tool.ruff.lint.flake8-tidy-imports]\nbanned-module-level-imports = []\n",
        "harness/__init__.py": "",
        "harness/errors.py": "class ConfigError(Exception):\n    pass\n",
        "kernels_under_test/__init__.py": "",
        "harness/b.py": module_level,
        "harness/c.py": closure,
    })
    out = _hoist(tmp_path)
    assert out.returncode == 1
    assert "harness/b.py:5: from harness.errors import ConfigError as os: the module already binds 'os'" in out.stdout
    assert ("harness/c.py:3: from harness.errors import ConfigError: the function (or one around it) also binds "
            "'ConfigError'") in out.stdout
    assert (tmp_path / "harness/b.py").read_text(encoding="utf-8") == textwrap.dedent(module_level).lstrip("\n")
    assert (tmp_path / "harness/c.py").read_text(encoding="utf-8") == textwrap.dedent(closure).lstrip("\n")
