"""What code, machine and software produced a run."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["git_state", "software_versions", "host_facts", "tree_digest", "file_digest", "to_json"]


_CHECKOUT = Path(__file__).resolve().parents[2]  # harness/results/_provenance.py -> the tree holding harness/


def git_state(path: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding `path`; (None, None) outside one.

    HARNESS_GIT_COMMIT / HARNESS_GIT_DIRTY override this for the measuring checkout, the tree holding this
    package, when it is a copy without its .git (the GPU machine here receives the work tree only); the
    override is recorded as such in versions_json. Only there: a revision's worktree of `bench commits`
    lies elsewhere and has its own .git, and under the override every revision's kernel had been recorded
    with the checkout's commit.
    """
    env_commit = os.environ.get("HARNESS_GIT_COMMIT")
    if env_commit and Path(path).resolve().is_relative_to(_CHECKOUT):
        return env_commit, os.environ.get("HARNESS_GIT_DIRTY", "1") == "1"
    folder = path if path.is_dir() else path.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        return commit.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree_digest(folder: Path) -> str:
    """sha256 over the relative paths and contents of every .py file under `folder`.

    Identifies the code even where git cannot: the GPU machine here receives the work tree with a stale
    .git, so `git rev-parse` there names an old commit or none. Two trees with equal digests ran the
    same Python code.
    """
    h = hashlib.sha256()
    folder = Path(folder)
    for f in sorted(folder.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def software_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "triton", "numpy", "pyarrow", "polars", "nvidia-ml-py", "transformers", "rich", "harness"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out["torch_cuda"] = str(torch.version.cuda)
        try:
            out["cudnn"] = str(torch.backends.cudnn.version())
        except Exception:
            pass
    if os.environ.get("HARNESS_GIT_COMMIT"):
        out["git_from_env"] = "HARNESS_GIT_COMMIT"
    return out


def host_facts() -> dict[str, str]:
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
    }


def to_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
