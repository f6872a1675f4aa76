"""Output off a terminal (pipes, files, CI logs at rich's default 80 columns): every figure and every name
whole, one log line per measurement, and the figures as JSON (checked against the schema) and CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import FIGURES_SCHEMA
from tests.workers.forked_run import run as forked_run

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "tests" / "fixtures" / "compare"
RUN_A, RUN_B = COMPARE / "20261130-043508-issue2-b7147a-A", COMPARE / "20261130-043508-issue2-b7147a-B"
REPORT_RUN = ROOT / "tests" / "fixtures" / "h200" / "20261130-043801-smollm2-217172"
NO_COLUMNS = {"COLUMNS": None, "LINES": None}  # rich's fallback: 80 columns

LONG_KERNEL = "sdpa-cpu-with-a-deliberately-long-kernel-name-v2"
LONG_INPUT = "gaussian:0.0123456789"


def piped(*args, env=None):
    """`bench ARGS` as CI runs it: stdout is not a terminal and COLUMNS is unset."""
    result = CliRunner().invoke(app, list(args), env={**NO_COLUMNS, **(env or {})})
    return result.exit_code, result.output


def validate(doc: dict) -> None:
    jsonschema.validate(doc, json.loads(FIGURES_SCHEMA.read_text()),
                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def line_with(text: str, *parts: str) -> str:
    """The one line holding every part: a figure or name split over two lines fails here."""
    hits = [ln for ln in text.splitlines() if all(p in ln for p in parts)]
    assert hits, f"no line holds all of {parts}:\n{text}"
    return hits[0]


def ratio(value, low, high) -> str:
    return f"{value:.4f}" if low is None else f"{value:.4f} [{low:.4f}, {high:.4f}]"


def test_the_schema_is_itself_valid_and_versioned():
    from harness.report import FIGURES_SCHEMA_VERSION

    schema = json.loads(FIGURES_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": FIGURES_SCHEMA_VERSION}
    with pytest.raises(jsonschema.ValidationError):  # a row without its figures is refused
        validate({"schema": "harness.figures", "schema_version": FIGURES_SCHEMA_VERSION, "harness_version": "0",
                  "command": "compare", "runs": [], "tables": {"comparison": [{"kernel": "k"}]}, "verdict": None})


def test_compare_piped_keeps_every_figure_whole_and_exports_json_and_csv(tmp_path):
    js, cs = tmp_path / "cmp.json", tmp_path / "cmp.csv"
    code, out = piped("compare", str(RUN_A), str(RUN_B), "--pair-inputs", "gaussian:0.1=gaussian:1",
                      "--fail-on-slowdown", "50%", "--json", str(js), "--csv", str(cs))
    assert code == 0, out
    doc = json.loads(js.read_text())
    validate(doc)
    assert doc["command"] == "compare" and [r["run_id"] for r in doc["runs"]] == [RUN_A.name, RUN_B.name]
    line = doc["verdict"].pop("line")
    assert doc["verdict"] == {"verdict": "pass", "exit_code": 0, "threshold_frac": 0.5, "slower": [],
                              "threshold_source": "--fail-on-slowdown 50%", "unresolved": [], "same_code": [],
                              "unresolved_policy": "fail"}
    assert line.startswith("PASS: nothing slower beyond the 50 % (--fail-on-slowdown 50%) threshold (2 compared")
    assert line in out  # the gate's line as printed
    rows = doc["tables"]["comparison"]
    assert {r["kernel"] for r in rows} == {"sdpa-cudnn", "sdpa-flash"}
    for r in rows:  # each row's figures, as the table formats them, on one line with its kernel and inputs
        line_with(out, r["kernel"], r["input_a"], r["input_b"], f"{r['time_a_ms']:.4f}", f"{r['time_b_ms']:.4f}",
                  ratio(r["time_b_over_a"], r["time_b_over_a_low"], r["time_b_over_a_high"]),
                  ratio(r["cycles_b_over_a"], r["cycles_b_over_a_low"], r["cycles_b_over_a_high"]),
                  f"{r['clock_a_mhz']:.0f} / {r['clock_b_mhz']:.0f}", r["verdict"])
    # CSV: the same rows, read back by polars and by the csv module, full precision
    frame = pl.read_csv(cs)
    assert frame["table"].to_list() == ["comparison"] * len(rows)
    assert frame["time_b_over_a"].to_list() == [r["time_b_over_a"] for r in rows]
    back = list(csv.DictReader(cs.open(newline="")))
    assert [float(r["time_a_ms"]) for r in back] == [r["time_a_ms"] for r in rows]
    assert [r["kernel"] for r in back] == [r["kernel"] for r in rows]


def test_compare_json_to_stdout_sends_the_tables_to_stderr():
    result = CliRunner().invoke(app, ["compare", str(RUN_A), str(RUN_B), "--pair-inputs", "gaussian:0.1=gaussian:1",
                                      "--json", "-"], env=NO_COLUMNS)
    assert result.exit_code == 0, result.output
    validate(json.loads(result.stdout))  # stdout is the document alone
    assert "time B/A" in result.stderr


def test_compare_fail_is_a_verdict_exit_1_in_the_json_too(tmp_path):
    js = tmp_path / "cmp.json"
    code, out = piped("compare", str(RUN_A), str(RUN_B), "--pair-inputs", "gaussian:0.1=gaussian:1", "--between-runs-cv", "0%",
                      "--fail-on-slowdown", "0.1%", "--json", str(js))
    doc = json.loads(js.read_text())
    validate(doc)
    assert code == 1 and doc["verdict"]["verdict"] == "fail" and doc["verdict"]["exit_code"] == 1, out
    assert doc["verdict"]["slower"]


def test_report_piped_keeps_every_figure_whole(tmp_path):
    cs = tmp_path / "r.csv"
    code, out = piped("report", str(REPORT_RUN), "--csv", str(cs), "--json", str(tmp_path / "r.json"))
    assert code == 0, out
    assert "0.2115" in line_with(out, "L15:captured", "sdpa-cudnn", "0.2115", "1980", "1868", "0.943", "0.3940")
    doc = json.loads((tmp_path / "r.json").read_text())
    validate(doc)
    for r in doc["tables"]["sustained"]:
        line_with(out, r["input"], r["kernel"], f"{r['time_ms']:.4f}", f"{r['nvml_clock_mhz']:.0f}",
                  f"{r['inband_clock_mhz']:.0f}", f"{r['inband_to_nvml']:.3f}")
        line_with(out, r["input"], r["kernel"], f"{r['board_power_w']:.0f}", f"{r['tflop_per_s']:.1f}", r["limiters"])
    frame = pl.read_csv(cs)
    assert set(frame["table"]) == {"sustained", "inputs"}
    sus = frame.filter(pl.col("table") == "sustained")
    assert sus["time_ms"].to_list() == [r["time_ms"] for r in doc["tables"]["sustained"]]


def test_one_vocabulary_in_sustained_report_and_json():
    from harness.analysis import summarize_run
    from harness.report import HEADERS, run_tables, sustained_figures, sustained_tables
    from harness.results import read_run

    summary = summarize_run(read_run(REPORT_RUN))
    terminal = {c for t in sustained_tables(list(summary.sustained)) for c in t.columns}
    report = {c for t in run_tables(summary) for c in t.columns}
    keys = set(sustained_figures(list(summary.sustained))[0])
    for key in ("nvml_clock_mhz", "inband_clock_mhz", "inband_to_nvml", "board_power_w", "energy_per_launch_j",
                "power_limited_pct", "limiters", "time_ms"):
        assert HEADERS[key] in terminal and HEADERS[key] in report and key in keys, key
    assert not {"SMI MHz", "gap", "SCLK NVML MHz", "W", "pwr-lim"} & (terminal | report)


def test_list_models_and_kernels_piped_keep_names_whole():
    from harness.capture import MODELS
    from harness.kernels import default_registry

    code, out = piped("list", "models")
    assert code == 0
    for m in MODELS.values():
        line_with(out, m.name, m.hf_id or m.wheel, f"{m.heads_q}/{m.heads_kv}", str(m.max_positions))
    code, out = piped("list", "kernels")
    assert code == 0
    for k in default_registry():
        line_with(out, k.name, k.description)
    if "available (cpu)" in out:  # this machine's own device (a CPU-only machine here)
        assert re.search(r"sdpa-cpu .*│ yes", line_with(out, "sdpa-cpu "))


def test_doctor_does_not_call_a_reading_without_a_clock_ok():
    from harness.doctor import _reading_check
    from harness.telemetry import Sample

    blank = Sample(t_ns=0, sm_clock_mhz=None, power_w=None)
    check = _reading_check("host", blank)
    assert check.status == "warn" and "clock not read" in check.detail and "None" not in check.detail
    full = _reading_check("nvml", Sample(t_ns=0, sm_clock_mhz=1980.0, power_w=690.4))
    assert full.status == "ok" and full.detail.startswith("clock 1980 MHz, power 690 W")


def test_lists_take_commas_and_repeats_alike():
    from harness.cli.common_args import split_ints, split_list

    assert split_list(["a,b", "c"]) == split_list(["a", "b", "c"]) == ["a", "b", "c"]
    assert split_ints(["3,15"]) == split_ints(["3", "15"]) == [3, 15]
    code, out = piped("sustained", "--device", "cpu", "--model", "smollm2-135m", "--layer", "3,x")
    assert code == 2 and "'x' is not a layer index" in out


def test_report_and_compare_without_polars_say_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)
    for args in (["report", str(REPORT_RUN)], ["compare", str(RUN_A), str(RUN_B)]):
        code, out = piped(*args)
        assert code == 2, out
        assert "polars" in out and "pip install 'polars>=1.0'" in " ".join(out.split()) and "Traceback" not in out


def test_commits_md_and_its_old_name_summary(tmp_path):
    code, out = piped("commits", "-k", "x", "--md", str(tmp_path / "a.md"), "--summary", str(tmp_path / "b.md"), "A", "B")
    assert code == 2 and "--summary is the old name of --md" in out
    code, out = piped("commits", "--help")
    assert "--md" in out and "--summary" not in out  # hidden alias


def test_line_observer_prints_one_line_per_measurement_with_an_eta():
    from rich.console import Console

    from harness.report import LineObserver, run_observer

    now = [100.0]
    console = Console(file=io.StringIO(), width=10_000)
    obs = LineObserver(console, get_time=lambda: now[0])
    assert isinstance(run_observer(console), LineObserver)  # not a terminal

    class Result:
        run_id, path, status = "r1", "/results/r1", "complete"

    obs.on_run_start(Result, total=4)
    now[0] += 30
    obs.on_measurement_end({"kernel": "k", "input_label": "gaussian:1", "repeat": 0, "status": "ok",
                            "time_ns": 3_963_000.0, "sm_clock_mhz": 1650.0, "inband_clock_mhz": 1486.2, "power_w": 692.4,
                            "settled_after_s": 4.7, "power_limited_frac": 1.0, "reason_names": "sw_power_cap:1.0"})
    now[0] += 30
    obs.on_measurement_end({"kernel": "k", "input_label": "gaussian:1", "repeat": 1, "status": "gate_failed",
                            "time_ns": None, "error": "max |diff| 0.5"})
    lines = console.file.getvalue().splitlines()
    assert lines[0] == "run r1 -> /results/r1: 4 measurement(s)"
    assert lines[1] == ("[1/4, 0:00:30 elapsed, ETA 0:01:30] k on gaussian:1 repeat 1: 3.9630 ms/launch, NVML 1650 MHz, "
                        "in-band 1486 MHz, 692 W, limiter power cap 100%, settled after 4.7 s (ok)")
    assert lines[2] == "[2/4, 0:01:00 elapsed, ETA 0:01:00] k on gaussian:1 repeat 2: not timed (gate_failed): max |diff| 0.5"


def test_version_names_the_package_and_commit():
    from harness import __version__

    code, out = piped("--version")
    assert code == 0 and out.startswith(f"bench {__version__} (git ")


def test_an_internal_error_exits_3_with_the_traceback_in_a_file(tmp_path, monkeypatch, capsys):
    from harness import cli
    from harness.errors import ExitCode

    def broken(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("harness.cli.analysis.build_report", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", str(REPORT_RUN)])
    assert exit_.value.code == ExitCode.INTERNAL == 3
    err = capsys.readouterr().err
    (trace,) = tmp_path.glob("bench-internal-error-*.txt")
    assert f"traceback in {trace}" in err and len(err.strip().splitlines()) == 1
    assert "ZeroDivisionError: a bug" in trace.read_text() and "Traceback" not in err


KERNEL_FILE = textwrap.dedent(f"""
    import torch
    from harness.kernels import KernelRegistry

    registry = KernelRegistry()

    @registry.kernel("{LONG_KERNEL}", dtypes={{"float32"}}, devices={{"cpu"}})
    def long_named(inputs):
        q, k, v = inputs.q, inputs.k, inputs.v
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
""")


def test_sustained_piped_logs_each_measurement_and_keeps_names_whole(tmp_path):
    """A real pipe (a child process) in a GitHub Actions log, no COLUMNS, a long kernel name and input label
    (compare and report above are piped without GITHUB_ACTIONS: the same path)."""
    (tmp_path / "long_kernels.py").write_text(KERNEL_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "GITHUB_ACTIONS")}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]), OMP_NUM_THREADS="1", GITHUB_ACTIONS="true")
    proc = forked_run(
        [sys.executable, "-m", "harness.cli", "sustained", "--device", "cpu", "--seq-len", "32", "--heads", "2",
         "--head-dim", "8", "--dtype", "fp32", "-k", "sdpa-cpu,long_kernels:long_named", "-i", LONG_INPUT,
         "--quick", "--repeats", "1", "--window-s", "0.05", "--idle-s", "0", "--chunk-s", "0.02",
         "--no-gate", "--results", str(tmp_path / "res"), "--json", str(tmp_path / "s.json")],
        env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    doc = json.loads((tmp_path / "s.json").read_text())
    validate(doc)
    rows = doc["tables"]["sustained"]
    assert {r["kernel"] for r in rows} == {"sdpa-cpu", LONG_KERNEL} and {r["input"] for r in rows} == {LONG_INPUT}
    assert doc["runs"][0]["run_id"] in out and doc["runs"][0]["status"] == "complete"
    log = [ln for ln in out.splitlines() if re.match(r"\[\d+/2, \d:\d\d:\d\d elapsed, ETA \d:\d\d:\d\d\] ", ln)]
    assert len(log) == 2, out  # one line per finished measurement, with the ETA
    for r in rows:
        line_with("\n".join(log), f"{r['kernel']} on {LONG_INPUT} repeat 1:", "ms/launch", "NVML", "in-band", "W",
                  "limiter")
        line_with(out, LONG_INPUT, f" {r['kernel']} ", f"{r['time_ms']:.4f}", f"{r['duty_cycle']:.4f}")
    assert "━" in out and "\x1b[" not in out  # tables, no terminal control codes in the log
