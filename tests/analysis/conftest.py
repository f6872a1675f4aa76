"""A fixture that damages a copy of a run directory (the committed fixtures stay untouched)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def copy_run(tmp_path):
    """copy_run(src) -> a writable copy of a run directory under tmp_path."""

    def copy(src: Path) -> Path:
        dst = tmp_path / src.name
        shutil.copytree(src, dst)
        return dst

    return copy
