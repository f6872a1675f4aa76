"""Suite-wide settings for the CPU test machine (here, not in tests/: --doctest-modules would import a
tests/conftest.py as a module named `conftest` beside the subfolders' own)."""

from __future__ import annotations

import os
import sys

# One OpenMP thread per process: pytest-xdist runs two workers on a 2-CPU machine, and torch's default of
# one thread per CPU in each oversubscribes it; OpenMP's spinning barriers then stall a CPU "kernel" for
# seconds (past the tests' launch timeouts). Subprocesses inherit it. A value set by the caller is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported before this file (a plugin): its pool is sized already
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_configure(config):
    # pytest-xdist's loadfile hands out files by their number of tests, most first, so the files of one or two
    # slow tests (whole commands run in subprocesses) went last and one worker ran them alone at the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    # Files holding a slow test first, each file's tests kept together and in order (a stable sort).
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)
