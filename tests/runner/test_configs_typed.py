"""The configs that time kernels share one declaration of their common fields (device, telemetry, results_dir, launch,
gate, allow_busy), carry no default device, and cross processes by their own to_dict / from_dict."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.analysis import VerdictRule
from harness.commits import CommitsConfig
from harness.config import (
    BurstConfig,
    BurstProtocol,
    RunConfig,
    RunSettings,
    SustainedProtocol,
    protocol_from_dict,
    with_cpu_threads,
)
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec
from harness.runner import InModelConfig

SPEC = InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=1, seq_len=32, head_dim_qk=8), dtype="float32",
                 source="gaussian:1", seed=3, name="g1")
SHARED = {f.name for f in dataclasses.fields(RunSettings)}


def _json(d: dict) -> dict:
    return json.loads(json.dumps(d))


@pytest.mark.parametrize("cls", [RunConfig, BurstConfig, CommitsConfig, InModelConfig])
def test_every_config_takes_the_shared_fields_from_one_type_and_redeclares_none(cls):
    assert issubclass(cls, RunSettings)
    assert SHARED == {"device", "telemetry", "results_dir", "launch", "gate", "allow_busy"}
    assert not SHARED & set(cls.__dict__.get("__annotations__", {})), f"{cls.__name__} re-declares a shared field"


def test_a_config_without_a_device_is_refused_the_suite_decides_it():
    with pytest.raises(TypeError, match="device"):
        RunConfig(kernels=("sdpa-cpu",), inputs=(SPEC,))


def test_the_shared_checks_run_for_every_config(tmp_path):
    with pytest.raises(ConfigError, match="--launch graph"):
        BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", launch="graph")
    with pytest.raises(ConfigError, match="--launch graph"):
        CommitsConfig(repo=tmp_path, kernel="k", revisions=("a", "b"), input=SPEC, device="cpu", launch="graph")
    with pytest.raises(ConfigError, match="--isolation"):
        BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", isolation="thread")


def test_run_and_burst_configs_round_trip_through_json(tmp_path):
    run = RunConfig(kernels=("sdpa-cpu", "mod:fn@bshd"), inputs=(SPEC,), device="cpu", telemetry="none",
                    protocol=SustainedProtocol.quick(repeats=4, l2="cold", until_ci=0.01, max_repeats=6),
                    results_dir=tmp_path / "r", run_name="x", launch="loop", gate=False, allow_busy=True, notes="n",
                    isolation="process")
    assert RunConfig.from_dict(_json(run.to_dict())) == run
    burst = BurstConfig(kernels=("sdpa-cpu",), inputs=(SPEC,), device="cpu", into=tmp_path / "run", run_name="b",
                        protocol=BurstProtocol(warmup_launches=7, timed_launches=9, threads=2), isolation="none")
    back = BurstConfig.from_dict(_json(burst.to_dict()))
    assert back == burst and isinstance(back.protocol, BurstProtocol) and back.into == tmp_path / "run"


def test_commits_config_round_trips_and_its_revision_run_keeps_its_settings(tmp_path):
    rule = VerdictRule(threshold=0.02, threshold_source="--fail-on-slowdown 2%")
    config = CommitsConfig(repo=tmp_path, kernel="mod:fn", revisions=("a", "b"), input=SPEC, device="cpu",
                           telemetry="none", protocol=SustainedProtocol.quick(until_ci=0.02, max_repeats=8),
                           results_dir=tmp_path / "r", launch="loop", gate=False, allow_busy=True, rule=rule,
                           max_time_s=30.0, width_target=0.01)
    assert CommitsConfig.from_dict(_json(config.to_dict())) == config
    run = config.run_config(run_name="commits-0-abc", notes="rev a")
    assert {n: getattr(run, n) for n in SHARED} == {n: getattr(config, n) for n in SHARED}
    assert (run.kernels, run.inputs, run.run_name, run.notes) == (("mod:fn",), (SPEC,), "commits-0-abc", "rev a")
    assert run.protocol == with_cpu_threads(config.protocol, "cpu")  # as every RunConfig on the CPU


def test_a_protocol_dict_names_its_kind():
    for proto in (SustainedProtocol(), SustainedProtocol.quick(threads=1), BurstProtocol(idle_s=0.5)):
        back = protocol_from_dict(_json(proto.to_dict()))
        assert back == proto and type(back) is type(proto)
    assert protocol_from_dict(SustainedProtocol().as_dict()) == SustainedProtocol()  # a runs row's protocol_json
    with pytest.raises(ConfigError, match="kind 'adaptive'"):
        protocol_from_dict({"kind": "adaptive"})


def test_what_the_run_loop_reads_is_fixed_for_a_burst():
    burst, sustained = BurstProtocol(), SustainedProtocol(rotate_order=False, interleave_inputs=False)
    assert (burst.rotate_order, burst.interleave_inputs, burst.until_ci) == (True, False, None)
    assert (sustained.rotate_order, sustained.interleave_inputs) == (False, False)
    assert "rotate_order" not in burst.as_dict()  # not a burst setting: not recorded as one
