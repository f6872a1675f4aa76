"""The README's main job on the H200 with the GPU defaults (fixture 20261202-005520-main-job-f17837): the
capture made on the GPU, six text windows stacked, both default kernels at the power limiter."""

from __future__ import annotations

import json
from pathlib import Path

from harness.analysis import input_sentences
from harness.capture import MODELS
from harness.results import read_rows

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"
RUN = H200 / "20261202-005520-main-job-f17837"
MANIFEST = H200 / "logs" / "20261202" / "main-job-capture-manifest.json"


def test_both_default_kernels_run_at_the_power_limiter_on_the_default_stacking():
    ms = read_rows(RUN, "measurements")
    assert {r["batch"] for r in ms} == {MODELS["smollm2-135m"].gpu_windows} == {6}
    assert {r["kernel"] for r in ms} == {"sdpa-cudnn", "sdpa-flash"}
    assert {r["input_label"] for r in ms} == {"L15:captured", "L15:gaussian:0.1"}
    assert len(ms) == 12 and all(r["status"] == "ok" for r in ms)
    assert all(r["power_limited_frac"] >= 0.9 for r in ms)


def test_the_sentences_give_the_interval_and_say_both_are_at_the_cap():
    ms = read_rows(RUN, "measurements")
    run = read_rows(RUN, "runs")[0]
    sentences = input_sentences(ms, max_clock_mhz=run["max_sm_clock_mhz"])
    assert len(sentences) == 2
    assert all("95 % Welch t interval" in s and "both at the power cap" in s for s in sentences)
    (cudnn,) = [s for s in sentences if "sdpa-cudnn" in s]
    assert "faster than on Gaussian 0.1" in cudnn  # captured L15 runs 0.7 % faster: clock +0.6 %
    (flash,) = [s for s in sentences if "sdpa-flash" in s]
    assert "by less than the threshold" in flash and "threshold 0.5 % (default)" in flash  # +0.1 % [+0.02, +0.18]


def test_the_capture_was_made_on_the_gpu_in_bf16_with_one_token_range_per_window():
    m = json.loads(MANIFEST.read_text())
    assert m["compute"]["device"] == "cuda:0" and m["compute"]["dtype"] == "bfloat16"
    assert m["random_weights"] is False and m["batch"] == 6 and m["seq_len"] == 8192
    ranges = m["text"]["token_ranges"]
    assert ranges == [[8192 * b, 8192 * (b + 1)] for b in range(6)]
