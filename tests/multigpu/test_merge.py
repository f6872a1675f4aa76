"""Merging per-GPU runs (synthetic ones, written with RunWriter): the GPU of every row, indices, status."""

from __future__ import annotations

import json

import polars as pl
import pytest
from multigpu_helpers import write_run

from harness.errors import ResultsError
from harness.multigpu import merge_runs
from harness.results import gpu_of, read_run, split_measurement_id, with_gpu

A, B = "00000000:19:00.0", "00000000:3B:00.0"


def test_replicated_runs_merge_with_the_gpu_on_every_row(tmp_path):
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [100, 101], (1, "k"): [200, 202]}, suite_size=2)
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [104, 105], (1, "k"): [208, 206]}, suite_size=2)
    res = merge_runs([a, b], out=tmp_path / "merged")
    assert res.status == "complete" and res.status_detail == ""
    run = read_run(tmp_path / "merged")  # an ordinary run directory
    assert run.info["status"] == "complete" and run.info["pci_bus_id"] == f"{A},{B}"
    assert run.info["device_name"] == "NVIDIA H200" and run.info["power_limit_w"] == 700.0
    m = with_gpu(run.measurements, run.info)
    assert m.height == 8 and m["measurement_id"].n_unique() == 8
    assert sorted(m.filter(pl.col("gpu") == B)["time_ns"].to_list()) == [104, 105, 206, 208]
    assert split_measurement_id(m["measurement_id"][0]) == (A, "c0-k-r0")
    # chunks and samples carry the GPU through the same id, so joins stay per GPU
    chunks = with_gpu(run.chunks, run.info)
    assert set(chunks["gpu"]) == {A, B} and chunks.height == 16
    assert set(run.samples["measurement_id"]) == set(m["measurement_id"])
    # the per-GPU runs are kept, untouched, and listed in the manifest
    manifest = json.loads(run.info["config_json"])["multigpu"]
    assert [g["gpu"] for g in manifest["gpus"]] == [A, B]
    for g in manifest["gpus"]:
        assert read_run(tmp_path / "merged" / g["run_dir"]).info["pci_bus_id"] == g["gpu"]
    assert json.loads(run.info["telemetry_json"]) == {A: {"gpu": A}, B: {"gpu": B}}


def test_shards_get_their_suite_indices_back(tmp_path):
    # worker 0 ran suite configurations 0 and 2 as its local 0 and 1; worker 1 ran configuration 1
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10], (1, "k"): [30]}, config_indices=(0, 2), suite_size=3,
                  mode="shard")
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [20]}, config_indices=(1,), suite_size=3, mode="shard")
    res = merge_runs([a, b], out=tmp_path / "m")
    assert res.status == "complete"
    got = {(r["config_index"], r["gpu"]): r["time_ns"] for r in res.measurements}
    assert got == {(0, A): 10, (2, A): 30, (1, B): 20}
    assert {r["measurement_id"] for r in res.measurements} == {f"{A}#c0-k-r0", f"{A}#c2-k-r0", f"{B}#c1-k-r0"}


def test_a_run_that_stopped_keeps_its_measurements_and_the_merge_is_incomplete(tmp_path):
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10, 11]}, config_indices=(0, 2), suite_size=3,
                  mode="shard", status="running")  # its worker died during configuration 2
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [20, 21]}, config_indices=(1,), suite_size=3, mode="shard")
    res = merge_runs([a, b], out=tmp_path / "m")
    assert res.status == "incomplete"
    assert "GPU 00000000:19:00.0: incomplete after 2 measurement(s)" in res.status_detail
    assert "configurations [2] of 3 have no measurement" in res.status_detail
    assert read_run(tmp_path / "m").info["status"] == "incomplete"
    assert sorted(r["config_index"] for r in res.measurements) == [0, 0, 1, 1]


def test_a_slurm_task_that_never_ran_makes_the_merge_incomplete(tmp_path):
    runs = [write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]}, suite_size=1, task=t, tasks=3, host=f"n{t}")
            for t in (0, 2)]
    res = merge_runs(runs, out=tmp_path / "m")
    assert res.status == "incomplete" and "tasks [1] produced no run" in res.status_detail
    # two nodes with a GPU at the same bus id: the host keeps them apart
    assert {r["gpu"] for r in res.measurements} == {f"n0/{A}", f"n2/{A}"}
    assert sorted(p.name for p in (tmp_path / "m" / "gpus").iterdir()) == [
        "n0-00000000-19-00.0-task0000", "n2-00000000-19-00.0-task0002"]


def test_plain_runs_without_a_sidecar_merge_by_their_runs_row(tmp_path):
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]}, sidecar=False)
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [12]}, sidecar=False)
    res = merge_runs([a, b], out=tmp_path / "m")
    assert res.status == "complete" and {r["gpu"] for r in res.measurements} == {A, B}


def test_refusals(tmp_path):
    a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]})
    b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [10]}, protocol_json='{"window_s": 1.0}')
    with pytest.raises(ResultsError, match="different protocols"):
        merge_runs([a, b], out=tmp_path / "m1")
    with pytest.raises(ResultsError, match="is named twice"):
        merge_runs([a, a], out=tmp_path / "m2")
    with pytest.raises(ResultsError, match="exists"):
        merge_runs([a], out=tmp_path / "t")
    with pytest.raises(ResultsError, match="not a run directory"):
        merge_runs([tmp_path], out=tmp_path / "m3")


def test_gpu_of_a_single_gpu_run_is_its_run_row():
    info = {"pci_bus_id": A, "device_kind": "cuda"}
    assert gpu_of({"measurement_id": "c0-k-r0"}, info) == A
    assert gpu_of({"measurement_id": f"{B}#c0-k-r0"}, info) == B
    assert gpu_of({"measurement_id": "x", "gpu": "from-a-column"}, info) == "from-a-column"
    frame = with_gpu(pl.DataFrame({"measurement_id": ["c0-k-r0", f"{B}#c0-k-r1"]}), info)
    assert frame["gpu"].to_list() == [A, B]


def test_a_future_gpu_column_is_filled_and_read(tmp_path, monkeypatch):
    """The proposed schema change (measurements.gpu, string): with it, the merge writes the column and readers use it."""
    from harness.results import _schema

    measurements = [*_schema._COLUMNS["measurements"], ("gpu", "string")]
    monkeypatch.setitem(_schema._COLUMNS, "measurements", measurements)
    _schema.table_schema.cache_clear()
    try:
        a = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]})
        b = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [12]})
        merge_runs([a, b], out=tmp_path / "m")
        run = read_run(tmp_path / "m")
        assert sorted(run.measurements["gpu"].to_list()) == [A, B]
        assert with_gpu(run.measurements, run.info)["gpu"].to_list() == run.measurements["gpu"].to_list()
    finally:
        monkeypatch.undo()
        _schema.table_schema.cache_clear()


def test_two_replicated_tasks_on_one_device_stay_two_and_the_notes_count_runs(tmp_path):
    """Two CPU tasks of `bench slurm --replicate` both measured "cpu": kept apart, so the spread is shown."""
    from harness.analysis import gpu_spread

    runs = [write_run(tmp_path / "t", gpu="cpu", times={(0, "k"): [100 + t, 101 + t]}, suite_size=1, task=t, tasks=2)
            for t in (0, 1)]
    res = merge_runs(runs, out=tmp_path / "m")
    assert res.status == "complete" and [o.gpu for o in res.gpus] == ["cpu~task0", "cpu~task1"]
    assert {r["measurement_id"] for r in res.measurements} == {f"cpu~task{t}#c0-k-r{r}" for t in (0, 1) for r in (0, 1)}
    (spread,) = gpu_spread(res.measurements)
    assert sorted(g.gpu for g in spread.gpus) == ["cpu~task0", "cpu~task1"]
    assert read_run(tmp_path / "m").info["notes"].startswith(
        "merged run of 2 run(s) of 2 Slurm task(s) on 1 device(s) (replicate)")


def test_shards_of_one_device_keep_its_name(tmp_path):
    runs = [write_run(tmp_path / "t", gpu="cpu", times={(0, "k"): [100]}, config_indices=(t,), suite_size=2, task=t,
                      tasks=2, mode="shard") for t in (0, 1)]
    res = merge_runs(runs, out=tmp_path / "m")
    assert {r["gpu"] for r in res.measurements} == {"cpu"} and res.status == "complete"
    assert "merged run of 2 run(s) of 2 Slurm task(s) on 1 device(s) (shard)" in read_run(tmp_path / "m").info["notes"]


def _job_folder(tmp_path):
    job = tmp_path / "job"
    (job / "tasks").mkdir(parents=True)
    (job / "logs").mkdir()
    (job / "job.json").write_text("{}")
    return job


def test_a_task_that_wrote_no_table_is_named_with_its_log(tmp_path):
    job = _job_folder(tmp_path)
    (job / "tasks" / "20261201-120000-task0001-ab12").mkdir()  # the folder, then an import error
    (job / "logs" / "77_1.out").write_text("Traceback (most recent call last):\nModuleNotFoundError: No module named "
                                           "'pyarrow'\n")
    (job / "logs" / "77_0.out").write_text("all fine\n")
    with pytest.raises(ResultsError, match=r"task0001-ab12 is not a run directory: it has no runs\.parquet.*The task's "
                                           r"log says why: .*logs/77_1\.out: ModuleNotFoundError: No module named "
                                           r"'pyarrow'\.$"):
        merge_runs([job / "tasks" / "20261201-120000-task0001-ab12"], out=tmp_path / "m")


def test_an_unexpanded_tasks_pattern_says_no_task_wrote_a_run(tmp_path):
    job = _job_folder(tmp_path)
    (job / "logs" / "77_0.out").write_text("/usr/bin/python: No module named harness\n")
    with pytest.raises(ResultsError, match=r"tasks/\* does not exist: the shell passed the pattern unexpanded .* no "
                                           r"task wrote a run directory\. The task's log says why: .*77_0\.out: "
                                           r"/usr/bin/python: No module named harness"):
        merge_runs([job / "tasks" / "*"], out=tmp_path / "m")


def test_bench_merge_exits_by_the_merged_status(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.multigpu import MERGE_EXIT

    def merge(*runs, out):
        return CliRunner().invoke(app, ["merge", *map(str, runs), "--out", str(tmp_path / out)],
                                  env={"COLUMNS": "200"}).exit_code

    ok = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]}, suite_size=1)
    stopped = write_run(tmp_path / "t", gpu=B, times={(0, "k"): [10]}, suite_size=1, status="incomplete")
    nothing = write_run(tmp_path / "t", gpu=B, times={}, suite_size=1, task=1)
    assert MERGE_EXIT == {"complete": 0, "failed": 4, "incomplete": 5}  # 3 is an internal error (README)
    assert merge(ok, out="m0") == 0
    assert merge(ok, stopped, out="m1") == 5
    assert merge(nothing, out="m2") == 4
    assert merge(tmp_path / "t" / "absent", out="m3") == 2  # bad input, as everywhere


def test_bench_merge_never_writes_into_a_run_it_merges(tmp_path):
    """Issue 31: `bench merge R --out R/sub` copied R into itself 33 levels deep, then exited 3."""
    from typer.testing import CliRunner

    from harness.cli import app

    run = write_run(tmp_path / "t", gpu=A, times={(0, "k"): [10]}, suite_size=1)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    res = CliRunner().invoke(app, ["merge", str(run), "--out", str(run / "sub")], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "outputs never go inside inputs" in " ".join(res.output.split())
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before  # nothing written into it
    with pytest.raises(ResultsError, match="is inside the run directory"):
        merge_runs([run], out=run / "gpus" / "deeper")
