"""`bench sustained --history DIR` appends its run as a night (pyarrow only, through the store)."""

from __future__ import annotations

from typer.testing import CliRunner

from harness.cli import app
from harness.history import night_files, read_history

SMALL = ["--device", "cpu", "--quick", "--repeats", "2", "--seq-len", "64", "--heads", "2", "--head-dim", "16",
         "--dtype", "fp32", "-i", "gaussian:1", "-k", "sdpa-cpu", "--window-s", "0.1", "--idle-s", "0",
         "--warmin-cap-s", "0.5", "--chunk-s", "0.05"]


def test_sustained_appends_its_run_as_a_night(tmp_path):
    res = CliRunner().invoke(app, ["sustained", *SMALL, "--results", str(tmp_path / "r"), "--history",
                                   str(tmp_path / "h"), "--night", "2026-12-04"])
    assert res.exit_code == 0, res.output
    (night,) = night_files(tmp_path / "h")
    assert night.name.startswith("night-2026-12-04-") and f"history: {night}" in " ".join(res.output.split())
    (row,) = read_history(tmp_path / "h").table.to_pylist()
    assert row["series"] == "sdpa-cpu | gaussian:1 | B1 H2/2 S64 d16 causal | fp32" and row["repeats"] == 2
    assert row["device_kind"] == "cpu" and row["night"] == "2026-12-04" and row["status"] == "timed"
    bad = CliRunner().invoke(app, ["sustained", *SMALL, "--results", str(tmp_path / "r"), "--night", "x"])
    assert bad.exit_code == 2 and "--night labels the night in --history" in bad.output
