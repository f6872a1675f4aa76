"""run_multi end to end on the CPU: real worker processes, one per CPU stand-in 'GPU', merged into one run."""

from __future__ import annotations

import json

import polars as pl
import pytest
from multigpu_helpers import PROTO, suite

from harness.errors import DeviceBusyError
from harness.multigpu import cpu_stand_ins, run_multi
from harness.results import read_run, with_gpu

BUSY = "multigpu_fakes:busy_cpu"


def events():
    seen = []
    return seen, lambda gpu, event: seen.append((gpu, event.get("event")))


@pytest.mark.slow
def test_sharded_suite_runs_each_configuration_once_on_its_gpu(tmp_path, worker_env_for_tests):
    seen, on_event = events()
    res = run_multi(suite(tmp_path, seeds=(0, 1, 2)), gpus="all", present=cpu_stand_ins(2), on_event=on_event)
    assert res.status == "complete", res.status_detail
    run = read_run(res.path)
    m = with_gpu(run.measurements, run.info)
    # round-robin: cpu0 has configurations 0 and 2, cpu1 has 1; 2 repeats each, suite indices restored
    by_gpu = {key[0]: sorted(set(frame["config_index"])) for key, frame in m.group_by("gpu")}
    assert by_gpu == {"cpu0": [0, 2], "cpu1": [1]}
    assert m.height == 6 and set(m["status"]) <= {"ok", "unsettled"}
    assert sorted(m.filter(pl.col("config_index") == 2)["input_label"].unique()) == ["g1-s2"]
    assert {(g, e) for g, e in seen if e in ("ready", "done")} == {(g, e) for g in ("cpu0", "cpu1") for e in ("ready", "done")}
    assert sum(1 for _, e in seen if e == "measured") == 6
    # each worker's own run, with its sidecar, sits under gpus/; the manifest says who ran what
    manifest = json.loads(run.info["config_json"])["multigpu"]
    assert manifest["mode"] == "shard" and [g["config_indices"] for g in manifest["gpus"]] == [[0, 2], [1]]
    for g in manifest["gpus"]:
        sub = read_run(res.path / g["run_dir"])
        assert sub.info["status"] == "complete" and "this run is GPU " + g["gpu"] in sub.info["notes"]


def test_replicated_suite_runs_on_every_gpu_and_reports_the_spread(tmp_path, worker_env_for_tests):
    from harness.analysis import gpu_spread

    res = run_multi(suite(tmp_path, seeds=(0,)), gpus="0,1", replicate=True, present=cpu_stand_ins(2))
    assert res.status == "complete", res.status_detail
    assert sorted(r["measurement_id"] for r in res.measurements) == [
        f"cpu{g}#c0-sdpa-cpu-r{r}" for g in (0, 1) for r in (0, 1)]
    (spread,) = gpu_spread(res.measurements)
    assert [f.gpu for f in spread.gpus] == ["cpu0", "cpu1"] and spread.time_spread is not None


def test_busy_gpu_is_skipped_and_its_configurations_go_to_the_others(tmp_path, worker_env_for_tests):
    seen, on_event = events()
    res = run_multi(suite(tmp_path, seeds=(0, 1)), gpus="all", present=cpu_stand_ins(2, busy=(1,), busy_factory=BUSY),
                    on_event=on_event)
    assert ("cpu1", "busy") in seen
    assert res.status == "complete"  # nothing was lost: cpu0 ran both configurations
    assert "GPU cpu1 busy" in res.status_detail and "pid 4242" in res.status_detail
    assert {r["gpu"] for r in res.measurements} == {"cpu0"}
    assert sorted({r["config_index"] for r in res.measurements}) == [0, 1]
    assert [(o.gpu, o.status) for o in res.gpus] == [("cpu0", "complete"), ("cpu1", "busy")]


def test_every_gpu_busy_is_an_error_and_the_run_is_marked_failed(tmp_path, worker_env_for_tests):
    with pytest.raises(DeviceBusyError, match=r"No GPU could be used .*cpu0: .*busy") as e:
        run_multi(suite(tmp_path, seeds=(0,)), gpus="all", present=cpu_stand_ins(1, busy=(0,), busy_factory=BUSY))
    run_dir = str(e.value).split("The run ")[1].split(" is marked")[0]
    assert read_run(run_dir).info["status"] == "failed"


def test_a_worker_that_dies_keeps_its_finished_configurations(tmp_path, worker_env_for_tests):
    # cpu0 runs configurations 0 and 2 and dies preparing 2 (seed 13); cpu1 runs 1 and 3 to the end. The kernel
    # runs in the worker's own process (--isolation none), so its os._exit is the worker's death, as the OOM
    # killer or a node failure would bring; in a process of its own it would be only its row (test_isolation).
    # One configuration after the other (these four share a shape, so a run would otherwise time each worker's
    # two in turn, preparing both first): the death while preparing 2 comes after 0 was timed.
    config = suite(tmp_path, seeds=(0, 1, 13, 2), kernels=("multigpu_fakes:dies_on_seed_13",), isolation="none",
                   protocol=PROTO.replace(interleave_inputs=False))
    res = run_multi(config, gpus="all", present=cpu_stand_ins(2))
    assert res.status == "incomplete"
    assert sorted({(r["gpu"], r["config_index"]) for r in res.measurements}) == [("cpu0", 0), ("cpu1", 1), ("cpu1", 3)]
    assert "GPU cpu0: incomplete after 2 measurement(s) (the worker exited with status 9)" in res.status_detail
    assert "configurations [2] of 4 have no measurement" in res.status_detail
    run = read_run(res.path)
    assert run.info["status"] == "incomplete"
    dead = next(o for o in res.gpus if o.gpu == "cpu0")
    assert read_run(dead.run_dir).info["status"] == "incomplete"  # its own run no longer claims to be running


def test_a_worker_that_cannot_start_is_reported_with_its_log(tmp_path, worker_env_for_tests):
    from harness.errors import DeviceError

    with pytest.raises(DeviceError, match=r"cpu0: the worker exited with status 1 before it reported; its log .* ends"):
        run_multi(suite(tmp_path, seeds=(0,)), gpus="all", present=cpu_stand_ins(1), python="false")


def test_runs_and_merges_without_polars(tmp_path, worker_env_for_tests, monkeypatch):
    """The GPU machines have pyarrow but no polars: workers, merge and rendering must not need it."""
    import os
    import subprocess
    import sys

    blocker = tmp_path / "no-polars" / "polars"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no polars on the GPU machine')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker.parent), os.environ["PYTHONPATH"]]))
    script = f"""
import io
from pathlib import Path
from rich.console import Console
from multigpu_helpers import suite
from harness.cli.multigpu_output import render_multi
from harness.multigpu import cpu_stand_ins, run_multi
res = run_multi(suite(Path({str(tmp_path)!r}), seeds=(0,)), gpus="all", replicate=True, present=cpu_stand_ins(2))
render_multi(res, Console(file=io.StringIO(), width=150))
print(res.status, len(res.measurements))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["complete", "4"]
