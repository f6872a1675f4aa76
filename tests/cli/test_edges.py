"""The edges of issue 31's adversarial pass: a reader that goes away, an ASCII terminal, a file where a folder
belongs, an empty kernel name, an infinite idle, one file for two exports, a copied part, messages that named
internal fields, SIGHUP's exit status. Each test fails on the code before issue 31."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ExitCode, ResultsWarning
from harness.results import expand_run, read_run

ROOT = Path(__file__).resolve().parents[2]
REPORT_RUN = ROOT / "tests" / "fixtures" / "h200" / "20261130-043801-smollm2-217172"
SMALL = ["--device", "cpu", "--quick", "--telemetry", "none", "--heads", "2", "--seq-len", "64", "--head-dim", "16",
         "-i", "gaussian:1", "--dtype", "float32", "--idle-s", "0", "--window-s", "0.2", "-k", "sdpa-cpu"]


def bench(*args, env=None):
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    return res.exit_code, " ".join(res.output.split())


def _python_bench(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, **kw)


@pytest.mark.slow
def test_a_reader_that_goes_away_stops_the_printing_not_the_run(tmp_path):
    """`bench sustained ... | head -1` ended the run `failed` with exit 1, keeping 1 of 3 measurements."""
    proc = _python_bench("sustained", *SMALL, "--repeats", "3", "--warmin-cap-s", "0.3", "--results", str(tmp_path),
                         stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    first = proc.stdout.readline()  # what `head -1` reads, before it exits and closes the pipe
    proc.stdout.close()
    assert proc.wait(timeout=300) == 0 and first.startswith("run ")
    (run_dir,) = tmp_path.iterdir()
    run = read_run(run_dir)
    assert run.info["status"] == "complete"
    assert sorted(run.measurements["repeat"].to_list()) == [0, 1, 2]


def test_an_ascii_only_stream_gets_escapes_not_an_internal_error():
    """PYTHONIOENCODING=ascii: `bench report` exited 3 on the 'max °C' header."""
    proc = _python_bench("report", str(REPORT_RUN), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={"PYTHONIOENCODING": "ascii", "COLUMNS": "200"})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "max \\xb0C" in out and "internal error" not in err


def test_a_folder_where_a_file_belongs_and_a_file_where_a_folder_belongs_are_bad_input(tmp_path):
    """report --html DIR, capture --captures FILE and slurm --out FILE exited 3 (an internal error)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    code, out = bench("report", str(REPORT_RUN), "--html", str(tmp_path))
    assert code == 2 and f"--html {tmp_path} is a folder" in out, out
    code, out = bench("capture", "--captures", str(a_file), "--random-weights", "--seq-len", "16")
    assert code == 2 and f"--captures {a_file} is a file" in out, out
    code, out = bench("capture", "--captures", str(a_file), "--list")
    assert code == 2 and "is a file" in out, out
    code, out = bench("slurm", "--out", str(a_file), "--tasks", "1", "--", "--device", "cpu", "-k", "sdpa-cpu")
    assert code == 2 and f"--out {a_file} is a file" in out, out
    assert list(tmp_path.iterdir()) == [a_file]  # nothing written


def test_options_that_name_nothing_or_infinity_are_refused(tmp_path):
    """`-k ''` ran the default kernels; `--idle-s inf` was accepted."""
    code, out = bench("sustained", *SMALL, "-k", "", "--results", str(tmp_path))
    assert code == 2 and "'' names nothing" in out and "--kernel" in out, out
    code, out = bench("sustained", *SMALL, "--idle-s", "inf", "--results", str(tmp_path))
    assert code == 2 and "--idle-s inf: must be a finite number" in out, out
    code, out = bench("sustained", *SMALL, "--window-s", "nan", "--results", str(tmp_path))
    assert code == 2 and "--window-s nan" in out, out
    assert list(tmp_path.iterdir()) == []


def test_one_file_for_both_exports_is_refused(tmp_path):
    """`--json X --csv X` wrote one over the other."""
    same = tmp_path / "figures.out"
    code, out = bench("sustained", *SMALL, "--json", str(same), "--csv", str(same), "--results", str(tmp_path / "r"))
    assert code == 2 and "--json and --csv both name" in out, out
    assert not same.exists() and not (tmp_path / "r").exists()


def test_messages_name_the_flags_not_the_fields(tmp_path):
    """--warmin-cap-s below the warm-in minimum said 'warmin_cap_s (0.5) is below warmin_min_s'; capture's
    --seq-len 0 said 'seq_len must be a positive integer'."""
    code, out = bench("sustained", *SMALL, "--warmin-cap-s", "0.05", "--results", str(tmp_path))
    assert code == 2 and "--warmin-cap-s 0.05 is below the warm-in's minimum of 0.1 s (with --quick)" in out, out
    assert "warmin_cap_s" not in out and "warmin_min_s" not in out
    code, out = bench("sustained", *SMALL, "--chunk-s", "0.5", "--results", str(tmp_path))
    assert code == 2 and "--chunk-s 0.5: the settle rule fits a trend" in out and "settle_trend_window_s" not in out
    code, out = bench("capture", "--seq-len", "0", "--captures", str(tmp_path / "c"), "--random-weights")
    assert code == 2 and "--seq-len 0: must be a positive integer" in out and "seq_len" not in out, out


def test_a_copied_part_under_a_store_name_is_not_another_repeat(tmp_path):
    """A part copied as `part-00007.parquet` (a name the store could have written) counted as another repeat."""
    src = ROOT / "tests" / "fixtures" / "compare" / "20261130-043508-issue2-b7147a-A"
    run_dir = tmp_path / src.name
    shutil.copytree(src, run_dir)
    expand_run(run_dir)  # its parts, as a run killed before it ended keeps them (the fixture is compacted)
    before = read_run(run_dir)
    for table in ("measurements", "chunks", "samples", "probes"):
        first = sorted((run_dir / table).glob("part-*.parquet"))[0]
        shutil.copy(first, run_dir / table / "part-09999.parquet")
    with pytest.warns(ResultsWarning, match=r"part-09999.parquet: its measurement\(s\) .* are already in part-"):
        after = read_run(run_dir)
    assert after.measurements.height == before.measurements.height and after.chunks.height == before.chunks.height
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_run(src)  # the untouched run reads without a warning


def test_sighup_has_its_exit_status_in_the_readme_table():
    """The README's exit table listed 130 and 143 but not SIGHUP's 129, which a hung-up run exits with."""
    assert int(ExitCode.SIGHUP) == 129
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    listed = {int(n) for row in table.splitlines() for n in re.findall(r"\b(\d{1,3})\b", row.split("|")[1])}
    assert {int(c) for c in ExitCode} <= listed, sorted({int(c) for c in ExitCode} - listed)
