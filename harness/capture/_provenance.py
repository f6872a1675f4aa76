"""What made a capture: the harness's version and git commit, and the software that ran the model."""

from __future__ import annotations

import importlib.metadata as md
import platform
import subprocess
from pathlib import Path

import harness

__all__ = ["harness_provenance", "software_versions"]


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        # --no-optional-locks: reading the status must never write the index of a tree others edit.
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(root), *args],
            capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def harness_provenance() -> dict:
    """Version, commit and dirty flag (None where the harness is not a git checkout)."""
    commit = _git("rev-parse", "HEAD")
    # Untracked files under harness/ count: a new module changes what ran as much as an edited one.
    status = _git("status", "--porcelain", "--", "harness", "kernels_under_test", "pyproject.toml") if commit else None
    return {"version": harness.__version__, "commit": commit or None, "dirty": bool(status) if commit else None}


def software_versions() -> dict:
    versions = {"python": platform.python_version()}
    for dist in ("torch", "transformers", "safetensors", "gguf"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    return versions
