"""`bench doctor` as a CI preflight (exit 2 when the device named is missing) and `bench doctor|list ... --json`
(harness/report/machine.schema.json); `bench list kernels` says what each kernel computes, as declared and enforced."""

from __future__ import annotations

import json

import jsonschema
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import UnsupportedInputError
from harness.inputs import AttentionShape
from harness.report import MACHINE_SCHEMA

SCHEMA = json.loads(MACHINE_SCHEMA.read_text())


def bench(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, " ".join(result.output.split())


def doc(path):
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    return data


def test_doctor_exits_2_when_the_named_gpu_is_missing_and_says_so_in_the_json(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    code, out = bench("doctor", "--device", "cuda:0", "--json", str(tmp_path / "d.json"))
    assert code == 2, out
    assert "error: --device cuda:0 cannot be used on this machine (cuda: PyTorch sees no CUDA GPU" in out
    d = doc(tmp_path / "d.json")
    assert d["command"] == "doctor" and d["device"] == "cuda:0" and d["exit_code"] == 2
    assert d["device_missing"].startswith("cuda: PyTorch sees no CUDA GPU")
    assert {"name": "cuda", "status": "missing",
            "detail": "PyTorch sees no CUDA GPU: this machine can only run --device cpu"} in d["items"]


def test_doctor_on_a_device_that_is_there_exits_0(tmp_path):
    code, out = bench("doctor", "--device", "cpu", "--json", str(tmp_path / "d.json"))
    assert code == 0, out
    d = doc(tmp_path / "d.json")
    assert d["device"] == "cpu" and d["device_missing"] is None and d["exit_code"] == 0
    assert any(c["name"] == "kernel sdpa-cpu" and c["status"] == "ok" for c in d["items"])


def test_list_kernels_shows_what_each_kernel_computes_in_the_table_and_the_json(tmp_path):
    code, out = bench("list", "kernels", "--device", "cpu", "--json", str(tmp_path / "k.json"))
    assert code == 0, out
    rows = {r["name"]: r for r in doc(tmp_path / "k.json")["items"]}
    assert rows["sdpa-kvcache"]["computes"] == ["dense", "decode", "paged", "varlen", "window", "mla"]
    assert rows["triton-splitkv"]["computes"] == ["dense", "decode", "paged", "varlen", "window"]
    assert rows["triton-mla"]["computes"] == ["decode", "paged", "varlen", "window", "mla"]
    assert rows["sdpa-cpu"]["computes"] == ["dense"] and rows["sdpa-cpu"]["available"] is True
    assert rows["sdpa-cudnn"]["available"] is False and rows["sdpa-cudnn"]["unavailable_reason"] == "runs on cuda, not cpu"
    assert "│ sdpa-kvcache │ dense, decode, paged, varlen, window, mla │" in out
    assert "mla = MLA's absorbed form (--mla)" in out


@pytest.mark.parametrize("what", ["models", "inputs", "telemetry", "runs"])
def test_every_list_takes_json(tmp_path, what):
    extra = ["--results", str(tmp_path)] if what == "runs" else []
    code, out = bench("list", what, *extra, "--json", str(tmp_path / "l.json"))
    assert code == 0, out
    d = doc(tmp_path / "l.json")
    assert d["command"] == f"list {what}" and (d["items"] or what == "runs")
    if what == "inputs":
        assert any(i["name"].startswith("gaussian") for i in d["items"])


def test_a_json_path_that_is_a_folder_is_refused_before_anything(tmp_path):
    code, out = bench("list", "kernels", "--json", str(tmp_path))
    assert code == 2 and "--json" in out and "that is a folder" in out


MLA = dict(batch=2, heads_q=4, heads_kv=1, seq_len=1, seq_len_kv=40, head_dim_qk=48, head_dim_v=32, latent_kv=True)


def test_what_list_kernels_says_is_what_a_run_is_refused_by():
    from harness.kernels import default_registry

    reg = default_registry()
    mla, dense = AttentionShape(**MLA), AttentionShape(batch=1, heads_q=4, heads_kv=4, seq_len=16, head_dim_qk=16)

    def check(name, shape):
        reg.get(name).check_supports(dtype="bfloat16", head_dim_qk=shape.head_dim_qk, head_dim_v=shape.head_dim_v,
                                     causal=True, device_kind="cuda", shape=shape)

    check("sdpa-kvcache", mla)
    with pytest.raises(UnsupportedInputError, match=r"does not compute MLA's absorbed form \(--mla"):
        check("triton-splitkv", mla)
    with pytest.raises(UnsupportedInputError, match="computes MLA's absorbed form only; give --mla"):
        check("triton-mla", dense)
