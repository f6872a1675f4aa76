"""The decode kernels (kernels_under_test/decode.py) and a user's decode callable, through the correctness gate
on every shape kind: sdpa-kvcache here, triton-splitkv in Triton's CPU interpreter in a process of its own, and
plain callables that receive the page table, lengths and cu_seqlens by keyword (docs/workloads.md: "Workloads"), with
mutants making the usual mistakes of a decode kernel, each caught."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.errors import GateFailure, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import adapt_callable, default_registry, gate
from tests.workers.forked_run import run as forked_run

BASE = dict(batch=2, heads_q=4, heads_kv=2, seq_len=3, seq_len_kv=11, head_dim_qk=16)
KINDS = {
    "decode q1": dict(seq_len=1),
    "decode q3 causal": dict(),
    "decode q3 not causal": dict(causal=False),
    "self-attention window 4": dict(seq_len=11, window=4),
    "decode window 5": dict(window=5),
    "window not causal": dict(seq_len=7, window=3, causal=False),
    "paged 4": dict(page_size=4),
    "paged 3 window 4": dict(page_size=3, window=4),
    "varlen prefill": dict(batch=3, seq_len=11, kv_lens=(11, 2, 7)),
    "varlen decode": dict(batch=3, seq_len=2, kv_lens=(5, 1, 11)),
    "varlen paged": dict(batch=3, seq_len=1, kv_lens=(9, 4, 11), page_size=4),
    "varlen paged window": dict(batch=3, seq_len=3, kv_lens=(9, 2, 11), page_size=2, window=3),
    "self-attention": dict(seq_len=11),
}


def _inputs(dtype="bfloat16", **kw):
    shape = AttentionShape(**{**BASE, **kw})
    return make_inputs(InputSpec(shape=shape, dtype=dtype, source="gaussian:1"), device="cpu")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("kind", KINDS)
def test_sdpa_kvcache_passes_the_gate_on_every_shape_kind(kind, dtype):
    kernel = default_registry().get("sdpa-kvcache")
    x = _inputs(dtype, **KINDS[kind])
    kernel.check_supports(dtype=dtype, head_dim_qk=16, head_dim_v=16, causal=x.shape.causal, device_kind="cpu",
                          shape=x.shape)
    assert gate(kernel, x, kernel.prepare(x)).passed


@pytest.mark.slow
def test_triton_splitkv_passes_the_gate_on_every_shape_kind_in_the_interpreter():
    import importlib.util

    if importlib.util.find_spec("triton") is None:  # not imported here: it must first be imported interpreted
        pytest.skip("triton is not installed: pip install triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    res = forked_run([sys.executable, "-m", "tests.kernels.splitkv_cases"], env=env, timeout=300,
                     cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    from splitkv_cases import CASES  # noqa: E402 - this folder is on sys.path under pytest's rootdir-relative import

    assert [r["case"] for r in lines] == list(CASES)
    failed = [r for r in lines if not r["passed"]]
    assert not failed, failed


def test_kernels_that_compute_dense_attention_only_are_refused_a_workload_by_its_flag():
    reg = default_registry()
    x = _inputs(seq_len=1, page_size=4)
    with pytest.raises(UnsupportedInputError) as e:
        reg.get("sdpa-cpu").check_supports(dtype="bfloat16", head_dim_qk=16, head_dim_v=16, causal=True,
                                           device_kind="cpu", shape=x.shape)
    assert "--seq-len-q" in str(e.value) and "--page-size" in str(e.value) and "sdpa-kvcache" in str(e.value)
    splitkv = reg.get("triton-splitkv")
    assert splitkv.workloads == {"decode", "window", "paged", "varlen"}


# Plain callables: a correct decode function written with the conventions, and its mutants.
def _per_sequence(q, k, v, *, page_table=None, cache_seqlens=None, cu_seqlens_q=None, cu_seqlens_k=None, window=None,
                  is_causal=True, scale=None, mistake=None):
    """Attention one sequence at a time from what the harness hands over: q [B, Hq, Sq, d] or packed [1, Hq, T, d]
    with cu_seqlens_q, the cache dense [B, Hkv, S, d], packed [1, Hkv, T, d] with cu_seqlens_k, or in pages
    [N, P, Hkv, d] with page_table and lengths."""
    lengths = cache_seqlens.tolist() if cache_seqlens is not None else [k.shape[2]] * q.shape[0]
    starts = cu_seqlens_q.tolist() if cu_seqlens_q is not None else None
    outs = []
    for b, n in enumerate(lengths):
        if mistake == "ignores kv lengths" and page_table is not None:
            n = -(-n // k.shape[1]) * k.shape[1]  # whole pages
        if page_table is not None:
            pages = page_table[b].long()
            if mistake == "pages in order":
                pages = torch.arange(len(pages)) + b * len(pages)
            kb, vb = (t[pages].reshape(-1, t.shape[2], t.shape[3])[:n].permute(1, 0, 2) for t in (k, v))
        elif cu_seqlens_k is not None:
            c = cu_seqlens_k.tolist()
            kb, vb = k[0, :, c[b]:c[b + 1]], v[0, :, c[b]:c[b + 1]]
        else:
            kb, vb = k[b], v[b]
        qb = q[0, :, starts[b]:starts[b + 1]] if starts is not None else q[b]
        if mistake == "ignores cu_seqlens" and starts is not None:
            qb = q[0, :, b:b + 1]
        lq = qb.shape[1]
        pos = (n - lq + torch.arange(lq))[:, None] if mistake != "top-left" else torch.arange(lq)[:, None]
        j = torch.arange(n)[None, :]
        ok = (j <= pos) if is_causal else torch.ones(lq, n, dtype=torch.bool)
        if window is not None and mistake != "ignores the window":
            ok = ok & (j > pos - window)
        g = qb.shape[0] // kb.shape[0]
        o = F.scaled_dot_product_attention(qb[None], kb.repeat_interleave(g, 0)[None], vb.repeat_interleave(g, 0)[None],
                                           attn_mask=ok, scale=scale)
        outs.append(o[0])
    return torch.cat(outs, 1)[None] if starts is not None else torch.stack(outs)


def decode_attn(q, k, v, *, page_table=None, cache_seqlens=None, cu_seqlens_q=None, cu_seqlens_k=None, window=None,
                is_causal=True, scale=None):
    return _per_sequence(q, k, v, page_table=page_table, cache_seqlens=cache_seqlens, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_k=cu_seqlens_k, window=window, is_causal=is_causal, scale=scale)


def _mutant(mistake):
    def attn(q, k, v, *, page_table=None, cache_seqlens=None, cu_seqlens_q=None, cu_seqlens_k=None, window=None,
             is_causal=True, scale=None):
        return _per_sequence(q, k, v, page_table=page_table, cache_seqlens=cache_seqlens, cu_seqlens_q=cu_seqlens_q,
                             cu_seqlens_k=cu_seqlens_k, window=window, is_causal=is_causal, scale=scale,
                             mistake=mistake)
    return attn


@pytest.mark.parametrize("kind", ["decode q3 causal", "decode window 5", "paged 3 window 4", "varlen decode",
                                  "varlen paged window"])
def test_a_plain_callable_receives_the_page_table_lengths_and_cu_seqlens_and_passes(kind):
    kernel = adapt_callable(decode_attn, name="decode-attn")
    assert kernel.workloads == {"decode", "mla", "paged", "varlen", "window"}
    assert "page_table=..." in kernel.extra["convention"] and "cu_seqlens_q=..." in kernel.extra["convention"]
    x = _inputs("float32", **KINDS[kind])
    assert gate(kernel, x, kernel.prepare(x)).passed


@pytest.mark.parametrize("mistake, kind, hint", [
    ("pages in order", "paged 4", "Likely cause, pages unshuffled"),  # reads the pool as if never shuffled
    ("ignores kv lengths", "varlen paged", "Likely cause, lengths ignored"),  # attends the tail of each last page
    ("top-left", "decode q3 causal", "Likely cause, causal mask aligned to the start"),
    ("ignores the window", "decode window 5", "Likely cause, window ignored"),
    ("ignores cu_seqlens", "varlen decode", None),  # takes the packed queries as one per sequence
])
def test_mutant_decode_kernels_fail_the_gate_and_the_hint_names_the_mistake(mistake, kind, hint):
    kernel = adapt_callable(_mutant(mistake), name=f"mutant-{mistake}")
    x = _inputs("float32", **KINDS[kind])
    with pytest.raises((GateFailure, RuntimeError)) as e:
        gate(kernel, x, kernel.prepare(x))
    text = str(e.value)
    if hint is not None:
        assert hint in text and text.count("Likely cause") == 1, text
    if mistake == "top-left":
        assert "bottom-right" in text  # the gate names the convention
    else:  # no other mistake here is about the mask's alignment: S_q = 1, or the mask is right
        assert "bottom-right" not in text and "aligned to the start" not in text, text


def test_a_users_decode_function_in_its_own_process_keeps_the_workloads_it_takes(tmp_path):
    """The kernel's description crosses from its process with the workloads its signature takes: a paged decode
    function runs; the same function is refused varlen (it names no cu_seqlens_q), by flag, before any timing."""
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.results import read_rows

    (tmp_path / "mydecode.py").write_text(
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def decode_attn(q, k, v, *, page_table=None, cache_seqlens=None, is_causal=True, scale=None):\n"
        "    outs = []\n"
        "    for b, n in enumerate(cache_seqlens.tolist()):\n"
        "        kb, vb = (t[page_table[b].long()].reshape(-1, t.shape[2], t.shape[3])[:n].permute(1, 0, 2) for t in (k, v))\n"
        "        g = q.shape[1] // kb.shape[0]\n"
        "        outs.append(F.scaled_dot_product_attention(q[b:b + 1], kb.repeat_interleave(g, 0)[None],\n"
        "                                                   vb.repeat_interleave(g, 0)[None], scale=scale)[0])\n"
        "    return torch.stack(outs)\n")
    spec = f"{tmp_path / 'mydecode.py'}:decode_attn"
    args = ["sustained", "--device", "cpu", "--quick", "--repeats", "1", "--window-s", "0.1", "--warmin-cap-s", "0.3",
            "-k", spec, "--seq-len-q", "1", "--seq-len-kv", "48", "--page-size", "16", "--batch", "2", "--heads", "4",
            "--heads-kv", "2", "--head-dim", "16", "--dtype", "fp32", "-i", "gaussian:1", "--telemetry", "none",
            "--results", str(tmp_path / "r")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    (row,) = read_rows(next((tmp_path / "r").iterdir()), "measurements")
    assert row["status"] in ("ok", "unsettled") and row["page_size"] == 16 and row["gate_max_abs_diff"] < 1e-4
    res = CliRunner().invoke(app, [*args, "--varlen", "uniform"])
    assert res.exit_code == 2 and "sequences of different lengths (--varlen)" in " ".join(res.output.split())
