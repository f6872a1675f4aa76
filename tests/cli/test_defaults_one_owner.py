"""Every default has one owner in harness.suite (or a protocol's own field): the CLI's options are None, the suite fills
them in, and the help texts quote the owner's value rather than a number of their own."""

from __future__ import annotations

import inspect

import pytest

from harness.capture import DEFAULT_MODEL, MODELS
from harness.cli import analysis, capture, commits, history
from harness.cli.common_args import CAPTURE, PROTOCOL, SHAPE, SOURCES
from harness.config import BurstProtocol, SustainedProtocol
from harness.errors import ConfigError
from harness.suite import (
    CAPTURE_DEVICE,
    CAPTURE_SEQ_LEN,
    DEFAULT_DEVICE,
    DEFAULT_TEXT,
    SHAPE_DEFAULTS,
    CaptureArgs,
    ShapeArgs,
    attention_shape,
    burst_protocol,
    capture_config,
    default_layers,
    default_seq_len,
    input_specs,
    machine_device,
    run_device,
    seq_lens,
)


def _option(fn, name):
    return inspect.signature(fn).parameters[name].default


@pytest.mark.parametrize("fn, name", [(analysis.burst, "device"), (analysis.burst, "warmup"),
                                      (analysis.burst, "timed"), (analysis.burst, "repeats"),
                                      (analysis.burst, "idle_s"), (capture.capture_cmd, "model"),
                                      (capture.capture_cmd, "seq_len"), (capture.capture_cmd, "text"),
                                      (capture.capture_cmd, "device"), (capture.capture_cmd, "layers"),
                                      (commits.commits, "device"), (commits.nightly, "device"),
                                      (history.bisect, "device"), (history.bisect, "input_")])
def test_the_commands_options_default_to_none(fn, name):
    assert _option(fn, name).default is None


def test_help_texts_quote_the_protocols_values():
    p, q, b = SustainedProtocol(), SustainedProtocol.quick(), BurstProtocol()
    for name, field in (("repeats", "repeats"), ("window_s", "window_s"), ("warmin_cap_s", "warmin_cap_s"),
                        ("idle_s", "idle_before_kernel_s"), ("chunk_s", "chunk_s")):
        assert f"(default {getattr(p, field):g}; --quick {getattr(q, field):g})" in PROTOCOL[name][1].help
    assert f"(default {p.launch_timeout_s:g})" in PROTOCOL["launch_timeout_s"][1].help
    for name, value in (("warmup", b.warmup_launches), ("timed", b.timed_launches), ("repeats", b.repeats),
                        ("idle_s", b.idle_s)):
        assert f"(default {value:g})" in _option(analysis.burst, name).help
    assert _option(analysis.burst, "threads") is PROTOCOL["threads"][1]  # one declaration of --threads


def test_help_texts_quote_the_suites_values():
    assert f"(default {DEFAULT_DEVICE})" in SOURCES["device"][1].help
    assert f"default {default_seq_len('cuda:0', model=False)} on a GPU" in SHAPE["seq_len"][1].help
    assert f"{default_seq_len('cpu', model=False)} on the CPU" in SHAPE["seq_len"][1].help
    assert f"default {SHAPE_DEFAULTS['heads']}" in SHAPE["heads"][1].help
    assert f"{DEFAULT_TEXT} (default)" in CAPTURE["text"][1].help
    assert f"e.g. {MODELS[DEFAULT_MODEL].gpu_windows} for {DEFAULT_MODEL}" in CAPTURE["windows"][1].help
    assert f"default {CAPTURE_SEQ_LEN}" in _option(capture.capture_cmd, "seq_len").help


def test_one_place_decides_the_device():
    assert run_device(None) == DEFAULT_DEVICE and run_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="--sustained-device 'tpu:0'"):
        run_device("tpu:0", flag="--sustained-device")


def test_this_machines_device_is_rocm_on_pytorchs_rocm_build(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", "6.2.0", raising=False)
    assert machine_device() == "rocm:0"
    monkeypatch.setattr(torch.version, "hip", None)
    assert machine_device() == "cuda:0"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert machine_device() == "cpu"


def test_the_pytest_plugin_asks_the_suite_for_its_device_and_protocol(monkeypatch):
    import torch

    from harness import pytest_plugin

    class Options:
        def __init__(self, **given):
            self.given = given

        def getoption(self, name):
            return self.given.get(name)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", "6.2.0", raising=False)
    assert pytest_plugin._device(Options()) == "rocm:0"  # it said cuda:0 on ROCm before
    with pytest.raises(ConfigError, match="--sustained-device"):
        pytest_plugin._device(Options(sustained_device="gpu0"))
    assert pytest_plugin._protocol(Options(sustained_quick=True, sustained_repeats=4)) == SustainedProtocol.quick(
        repeats=4)
    with pytest.raises(ConfigError, match="--sustained-window-s 0"):  # named as the user typed it
        pytest_plugin._protocol(Options(sustained_window_s=0.0))


def test_burst_protocol_is_the_protocols_defaults_with_the_options_on_top():
    assert burst_protocol() == BurstProtocol()
    assert burst_protocol(warmup=0, timed=7).timed_launches == 7
    with pytest.raises(ConfigError, match="--timed 0"):
        burst_protocol(timed=0)


def test_bench_capture_defaults_come_from_the_suite_and_the_models_registry():
    config = capture_config()
    assert (config.model, config.layers, config.seq_len, config.device, config.text, config.batch) == (
        DEFAULT_MODEL, default_layers(MODELS[DEFAULT_MODEL].num_layers), CAPTURE_SEQ_LEN, CAPTURE_DEVICE,
        DEFAULT_TEXT, 1)
    other = capture_config(model="mistral-7b")  # the default layers are the model's, not the default model's
    assert other.layers == default_layers(MODELS["mistral-7b"].num_layers) != config.layers


def test_one_rule_for_s_q_and_s_kv_and_their_conflict():
    assert seq_lens(None, None, None, default=512) == (512, 512)
    assert seq_lens(4096, 1, None, default=512) == (1, 4096)
    assert seq_lens(None, 2, 1024, default=512) == (2, 1024)
    with pytest.raises(ConfigError, match="--seq-len and --seq-len-kv"):
        attention_shape(ShapeArgs(seq_len=64, seq_len_kv=128), device="cpu")
    with pytest.raises(ConfigError, match="--seq-len and --seq-len-kv"):  # captured inputs: the same rule, one message
        input_specs(sources=None, shape=ShapeArgs(seq_len=64, seq_len_kv=128),
                    capture=CaptureArgs(model=DEFAULT_MODEL), device="cpu")

