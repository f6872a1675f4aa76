"""Where a capture runs (the run's GPU in bf16, the CPU in fp32), and the estimate that refuses what does not fit."""

from __future__ import annotations

import json

import pytest
from capture_tiny import SEQ

from harness.capture import (
    MODELS,
    CaptureConfig,
    capture,
    check_fits,
    choose_capture_device,
    default_capture_dtype,
    estimate_capture,
)
from harness.errors import CaptureError, ConfigError
from harness.suite import main_job_defaults

torch = pytest.importorskip("torch")


def test_capture_device_follows_the_run_unless_given():
    assert choose_capture_device("cuda:1") == "cuda:1"
    assert choose_capture_device("rocm:0", "auto") == "rocm:0"
    assert choose_capture_device("cuda:0", "cpu") == "cpu"
    assert choose_capture_device("cpu", None) == "cpu"
    assert choose_capture_device("cpu", "cuda:0") == "cuda:0"
    with pytest.raises(CaptureError, match="--capture-device 'tpu:0' is not a device"):
        choose_capture_device("cuda:0", "tpu:0")


def test_forward_dtype_defaults_by_device():
    assert default_capture_dtype("cpu") == "float32" and default_capture_dtype("cuda:0") == "bfloat16"
    assert CaptureConfig(device="cuda:0").dtype == "bfloat16"
    assert CaptureConfig().dtype == "float32"
    assert CaptureConfig(device="cuda:0", dtype="float32").dtype == "float32"


def test_forward_dtype_takes_the_short_names_the_other_commands_take():
    # `bench capture --dtype bf16` was refused ("not one of float32, bfloat16, float16") though its help says bf16.
    assert [CaptureConfig(dtype=d).dtype for d in ("bf16", "fp16", "fp32")] == ["bfloat16", "float16", "float32"]
    with pytest.raises(ConfigError, match=r"--dtype 'fp8': .* bf16 \(bfloat16\), fp16 \(float16\) or fp32"):
        CaptureConfig(dtype="fp8")  # a dtype the inputs know, but not a forward pass's


def test_capture_on_a_gpu_this_machine_lacks_names_the_option(model_dirs, text_file, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(CaptureError) as err:
        capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0,), seq_len=SEQ, text=str(text_file),
                              root=tmp_path, device="cuda:0"))
    assert "Cannot capture on 'cuda:0'" in str(err.value) and "--capture-device cpu" in str(err.value)
    assert not any(tmp_path.iterdir()), "nothing is written when the device is refused"


def test_manifest_records_the_forward_device_and_dtype(llama_capture):
    manifest = json.loads(llama_capture.manifest.read_text())
    assert manifest["compute"]["device"] == "cpu" and manifest["compute"]["dtype"] == "float32"
    assert manifest["layers"]["0"]["compute"] == {"device": "cpu", "dtype": "float32"}
    assert manifest["random_weights"] is False and "warning" not in manifest
    assert llama_capture.device == "cpu" and llama_capture.peak_device_memory_bytes is None


def test_estimate_of_a_7b_model_on_the_cpu():
    e = estimate_capture(CaptureConfig(model="mistral-7b", layers=(3, 16), seq_len=8192), available_bytes=10**12,
                         flops_per_s=1e11)
    assert e.params == MODELS["mistral-7b"].params == 7_248_023_552
    assert e.weight_bytes == 4 * e.params and e.dtype == "float32"
    # 17 decoder layers run (the pass stops after layer 16): ~2 x 0.22 B active parameters x 8192 tokens each.
    layer_params = (e.params - 2 * 32768 * 4096 - 4096) / 32
    assert e.flops == pytest.approx(2 * 17 * layer_params * 8192 + 17 * 32 * 8192**2 * 256, rel=1e-6)
    assert e.forward_s == pytest.approx(e.flops / 5e10)
    assert 0.5e9 < e.activation_bytes < 5e9
    text = e.describe()
    assert "mistral-7b on cpu in float32" in text and "29.0 GB" in text and "7.25 B parameters" in text
    bf16 = estimate_capture(CaptureConfig(model="mistral-7b", layers=(16,), seq_len=8192, device="cuda:0"),
                            available_bytes=10**12, flops_per_s=5e14)
    assert bf16.weight_bytes == 2 * e.params and bf16.dtype == "bfloat16"


def test_moe_counts_only_the_routed_experts_a_token_uses():
    spec = MODELS["deepseek-v2-lite"]
    dense = estimate_capture(CaptureConfig(model="deepseek-v2-lite", layers=(0,), seq_len=1024),
                             available_bytes=10**12, flops_per_s=1e11)
    moe = estimate_capture(CaptureConfig(model="deepseek-v2-lite", layers=(1,), seq_len=1024),
                           available_bytes=10**12, flops_per_s=1e11)
    routed = 64 * 3 * 2048 * 1408  # one MoE layer's expert weights
    used = 6 / 64 * routed
    extra = moe.flops - dense.flops  # layer 1 (MoE) on top of layer 0 (dense MLP)
    attention = 16 * 1024**2 * (192 + 128)
    shared_and_attn = (2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 2048) + 3 * 2048 * 2816 + 2048 * 64 + 2 * 2048
    assert extra == pytest.approx(2 * 1024 * (used + shared_and_attn) + attention, rel=1e-3)
    assert moe.params == spec.params


def test_memory_refusal_names_the_numbers(model_dirs, text_file, tmp_path):
    config = CaptureConfig(model="qwen3-8b", layers=(18,), seq_len=8192)
    e = estimate_capture(config, available_bytes=20 * 10**9, flops_per_s=1e11)
    assert not e.fits
    with pytest.raises(CaptureError) as err:
        check_fits(e)
    message = str(err.value)
    assert f"needs about {e.total_bytes / 1e9:.1f} GB (weights 32.8 GB for 8,190,735,360 parameters" in message
    assert "has 20.0 GB free" in message and "Nothing was loaded" in message and "--capture-device cuda:0" in message
    check_fits(estimate_capture(config, available_bytes=e.total_bytes, flops_per_s=1e11))  # exactly enough passes


def test_capture_refuses_before_loading(model_dirs, text_file, tmp_path, monkeypatch):
    import harness.capture._capture as cap

    def no_load(*args, **kwargs):
        raise AssertionError("loaded a model that does not fit")

    monkeypatch.setattr(cap, "load_model", no_load)
    monkeypatch.setattr(cap, "estimate_capture",
                        lambda config: estimate_capture(config, available_bytes=1000, flops_per_s=1e9))
    seen = []
    with pytest.raises(CaptureError, match="has 0.0 GB free"):
        capture(CaptureConfig(model=str(model_dirs["llama"]), layers=(0,), seq_len=SEQ, text=str(text_file),
                              root=tmp_path), on_estimate=seen.append)
    assert len(seen) == 1 and seen[0].available_bytes == 1000


def test_main_job_defaults_stack_windows_on_a_gpu_only():
    gpu, cpu = main_job_defaults("smollm2-135m", "cuda:0"), main_job_defaults("smollm2-135m", "cpu")
    assert (gpu.layers, gpu.seq_len, gpu.windows) == ((15,), 8192, MODELS["smollm2-135m"].gpu_windows)
    assert gpu.windows > 1  # one window (0.21 ms) never reached the limiter on the H200
    assert (cpu.layers, cpu.seq_len, cpu.windows) == ((3, 15), 1024, 1)
    assert main_job_defaults("mistral-7b", "cuda:0").windows == MODELS["mistral-7b"].gpu_windows == 1


def test_a_dropped_model_gives_the_gpus_cache_back_and_the_cpu_skips_the_full_collection(monkeypatch):
    """After a capture, the GPU's cached blocks go back (a collection first, for tensors a reference cycle holds);
    on the CPU nothing is cached, and a full collection in a process holding a test session's objects costs
    0.3-1.6 s for nothing."""
    import gc

    from harness.capture import _model_io

    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    _model_io.release_device("cpu")
    assert calls == []
    _model_io.release_device("cuda:1")
    assert calls == ["collect", "empty_cache"]
