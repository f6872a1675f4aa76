"""scripts/setup.sh: an isolated venv (what the tests import is what setup installed), and pip's output passed
through whole but for the one warning a partial on-disk index makes per project, counted into one line."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"


def test_the_venv_setup_made_sees_no_system_site_packages():
    if sys.prefix == sys.base_prefix or Path(sys.prefix) != ROOT / ".venv":
        pytest.skip("not running in this checkout's .venv (made by scripts/setup.sh)")
    cfg = (Path(sys.prefix) / "pyvenv.cfg").read_text()
    import torch

    if torch.version.cuda or torch.version.hip:  # a GPU image's torch, used as found on purpose
        pytest.skip("a GPU image: setup keeps its torch through --system-site-packages")
    assert "include-system-site-packages = false" in cfg, cfg
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"]
    assert base not in sys.path, sys.path
    assert Path(torch.__file__).is_relative_to(sys.prefix) and torch.__version__.startswith("2.13.0")


def test_pip_warnings_of_partial_local_indexes_are_counted_and_others_kept(tmp_path):
    """The ~20 (here 87) "Location 'file://...' is ignored" lines became one summary; anything else pip says
    on stderr, and its exit status, come through unchanged."""
    fn = SETUP.read_text()
    start = fn.index("pip_install() {")
    body = fn[start:fn.index("\n}\n", start) + 3]
    script = f'''
set -euo pipefail
python() {{
  echo "WARNING: Location 'file:///opt/pypi/simple/glob2/' is ignored: it is neither a file nor a directory." >&2
  echo "WARNING: Location 'file:///opt/pypi-more/simple/rich/' is ignored: it is neither a file nor a directory." >&2
  echo "WARNING: something else pip wants you to see" >&2
  return 3
}}
SKIPPED={tmp_path / "skipped"}
: >"$SKIPPED"
{body}
status=0; pip_install foo || status=$?
echo "status $status"
'''
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "status 3", proc.stdout + proc.stderr
    assert proc.stderr.strip() == "WARNING: something else pip wants you to see", proc.stderr
    assert (tmp_path / "skipped").read_text().split() == ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]


@pytest.mark.parametrize("uv, uv_status, calls, said", [
    ("python -m uv", 0, ["uv pip install -q -e .[dev]"], ""),
    ("python -m uv", 2, ["uv pip install -q -e .[dev]", "pip -e .[dev]"], "setup: uv could not install -e .[dev]; pip does"),
    ("", 0, ["pip -e .[dev]"], ""),
])
def test_installs_go_through_uv_where_it_could_be_had_and_else_through_pip(uv, uv_status, calls, said, tmp_path):
    """uv installs the extras in ~5 s against pip's ~25 s; where uv is missing (no network) or one of its installs
    fails, pip does that install, and says so."""
    fn = SETUP.read_text()
    start = fn.index("\ninstall() {") + 1
    body = fn[start:fn.index("\n}\n", start) + 3]
    log = tmp_path / "calls"
    script = f'''
set -euo pipefail
python() {{ shift 2; echo "uv $*" >>{log}; return {uv_status}; }}
pip_install() {{ echo "pip $*" >>{log}; }}
PIP=pip_install
UV="{uv}"
{body}
install -e '.[dev]'
'''
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == calls and proc.stderr.strip() == said
