"""A revision's kernels come from its own tree: entry points, module:function specs, and not the checkout."""

from __future__ import annotations

import sys

import pytest
from commits_repo import git

from harness.commits import MissingKernelError, load_revision_kernel, revision_entry_points
from harness.errors import KernelError


@pytest.fixture
def isolated_imports():
    """Undo what loading a tree does to this process: the finder, and sys.modules exactly as it was
    (modules a test deleted and re-imported from a tree must not outlive it under the real names)."""
    meta, modules = list(sys.meta_path), dict(sys.modules)
    yield
    sys.meta_path[:] = meta
    sys.modules.clear()
    sys.modules.update(modules)


def test_entry_points_read_from_pyproject(kernel_repo):
    assert revision_entry_points(kernel_repo) == {"example": "example_kernels:register"}


def test_kernel_by_name_through_the_entry_point(kernel_repo, isolated_imports):
    kernel = load_revision_kernel(kernel_repo, "example-attention", revision="main")
    assert kernel.name == "example-attention"
    assert sys.modules["example_kernels"].__file__.startswith(str(kernel_repo))


def test_kernel_by_module_function(kernel_repo, isolated_imports):
    kernel = load_revision_kernel(kernel_repo, "example_kernels:example_attention", revision="main")
    assert kernel.source == "example_kernels:example_attention"


def test_missing_kernel_names_what_the_revision_has(kernel_repo, isolated_imports):
    with pytest.raises(MissingKernelError, match="'flash9' is missing at revision main: the kernels registered "
                                                 "there are example-attention"):
        load_revision_kernel(kernel_repo, "flash9", revision="main")


def test_missing_module_at_a_revision(kernel_repo, isolated_imports):
    with pytest.raises(MissingKernelError, match="'gone:attention' is missing at revision main"):
        load_revision_kernel(kernel_repo, "gone:attention", revision="main")


def test_a_module_outside_the_tree_is_refused(kernel_repo, isolated_imports):
    with pytest.raises(KernelError, match="not from the revision's tree"):
        load_revision_kernel(kernel_repo, "kernels_under_test.sdpa:sdpa_cpu", revision="main")


def test_this_repositorys_layout_wins_over_the_editable_install(tmp_path, isolated_imports):
    """A tree with its own kernels_under_test/ and harness/: the kernels come from the tree (even though an
    editable install maps kernels_under_test to the checkout), the harness stays the one measuring."""
    tree = tmp_path / "old-revision"
    (tree / "kernels_under_test").mkdir(parents=True)
    (tree / "harness").mkdir()
    (tree / "harness" / "__init__.py").write_text("raise RuntimeError('the old harness must not be imported')\n")
    (tree / "kernels_under_test" / "__init__.py").write_text(
        "from kernels_under_test import only_here\n\n"
        "def register(registry):\n    for k in only_here.registry:\n        registry.add(k)\n")
    (tree / "kernels_under_test" / "only_here.py").write_text(
        "from harness.kernels import KernelRegistry\nregistry = KernelRegistry()\n\n"
        "@registry.kernel('tree-only', dtypes={'float32'}, devices={'cpu'})\ndef prepare(inputs):\n"
        "    return lambda: inputs.q\n")
    for name in [m for m in sys.modules if m.partition(".")[0] == "kernels_under_test"]:
        del sys.modules[name]  # the fixture puts them back as they were
    kernel = load_revision_kernel(tree, "tree-only", revision="old")
    assert sys.modules["kernels_under_test.only_here"].__file__.startswith(str(tree))
    assert kernel.name == "tree-only"


def test_no_entry_point_and_no_bundled_package(tmp_path, isolated_imports):
    (tmp_path / "mod.py").write_text("X = 1\n")
    with pytest.raises(KernelError, match="declares no .project.entry-points"):
        load_revision_kernel(tmp_path, "anything", revision="r")


def test_a_broken_plugin_is_reported_with_its_revision(kernel_repo, isolated_imports):
    (kernel_repo / "example_kernels" / "__init__.py").write_text("raise ImportError('half-finished edit')\n")
    git(kernel_repo, "status")  # the tree is only read; git is not involved in loading
    with pytest.raises(KernelError, match="entry point example = 'example_kernels:register' failed at revision "
                                          "wip: ImportError: half-finished edit"):
        load_revision_kernel(kernel_repo, "example-attention", revision="wip")


def test_plain_function_by_module_and_by_file_from_the_tree(kernel_repo, isolated_imports):
    by_module = load_revision_kernel(kernel_repo, "example_kernels.plain:attention", revision="main")
    assert by_module.source == "example_kernels.plain:attention" and by_module.extra["layout"] == "bhsd"
    assert sys.modules["example_kernels.plain"].__file__.startswith(str(kernel_repo))
    by_file = load_revision_kernel(kernel_repo, "example_kernels/plain.py:attention_bshd@bshd", revision="main")
    assert by_file.name == "example_kernels/plain.py:attention_bshd@bshd" and by_file.extra["layout"] == "bshd"
    module = sys.modules[by_file.source.partition(":")[0]]
    assert module.__file__ == str((kernel_repo / "example_kernels" / "plain.py").resolve())


def test_a_file_outside_the_tree_is_refused(kernel_repo, tmp_path, isolated_imports):
    (tmp_path / "elsewhere.py").write_text("def attn(q, k, v, is_causal=True):\n    return q\n")
    with pytest.raises(KernelError, match="is outside the repository folder"):
        load_revision_kernel(kernel_repo, "../elsewhere.py:attn", revision="main")
