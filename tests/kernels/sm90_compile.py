"""Run a script that compiles Triton kernels ahead of time for Hopper (sm_90) and prints one JSON line, as the SASS
tests do (tests/kernels/test_triton_sass.py, test_mla_sass.py). In a subprocess: this process's triton may be in
interpreter mode (the root conftest.py imports it with TRITON_INTERPRET=1 on a machine without a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["compile_report"]

ROOT = Path(__file__).resolve().parents[2]


def compile_report(script: str) -> dict:
    """The JSON the script prints last; it gets the path of triton's bundled cuobjdump as its first argument.
    Skips where the triton wheel ships no ptxas or cuobjdump."""
    import triton

    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    tool = bin_dir / "cuobjdump"
    if not (tool.exists() and (bin_dir / "ptxas").exists()):
        pytest.skip(f"this triton wheel ships no ptxas/cuobjdump under {bin_dir}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # triton 3.9 warns when unset; 1 is what the JIT does today
    proc = subprocess.run([sys.executable, "-c", script, str(tool)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
