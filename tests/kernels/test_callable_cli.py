"""`bench sustained --device cpu` with plain attention functions named as module:function and file.py:function."""

from __future__ import annotations

import re
import sys

import pytest
from typer.testing import CliRunner

from harness.cli import app

SMALL = ["--device", "cpu", "--quick", "--seq-len", "32", "--heads", "4", "--heads-kv", "2", "--head-dim", "8",
         "--dtype", "fp32", "-i", "gaussian:1", "--repeats", "1", "--window-s", "0.2", "--idle-s", "0",
         "--warmin-cap-s", "0.3"]
USER = '''
import torch.nn.functional as F

def attn(q, k, v, causal=True, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)

def zeros(q, k, v, is_causal=True, scale=None):
    return q.new_zeros(q.shape)

def one_arg(q):
    return q
'''


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    (tmp_path / "cli_user_attn.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("cli_user_attn", None)


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, " ".join(result.output.split())


def test_plain_functions_are_timed_and_zeros_refused_by_the_gate(user_dir):
    code, out = bench("sustained", *SMALL, "-k", "cli_user_attn:attn", "-k", "./cli_user_attn.py:attn",
                      "-k", "cli_user_attn:zeros", "--results", str(user_dir / "r"))
    assert code == 0, out
    # both specs appear as timed rows of the table (a number in ms/launch after the kernel name)
    for name in ("cli_user_attn:attn", "./cli_user_attn.py:attn"):
        # (the ms figure itself: with one repeat the range column is "-" and left out, issue 41)
        assert f"gaussian:1 │ {name} │" in out and re.match(r" 0\.\d{4} │", out.split(f"│ {name} │", 1)[1])
    assert "Kernel 'cli_user_attn:zeros' failed the correctness gate" in out
    assert "Measured: max |diff|" in out and "It is not timed." in out


def test_wrong_signature_stops_the_run_with_the_signature(user_dir):
    code, out = bench("sustained", *SMALL, "-k", "cli_user_attn:one_arg", "--results", str(user_dir / "r"))
    assert code == 2
    assert "takes 1 positional parameter(s) (q), not q, k, v" in out
    assert "A plain attention callable must look like `fn(q, k, v, *, is_causal=True, scale=None)`" in out
