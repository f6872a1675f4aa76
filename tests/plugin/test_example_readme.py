"""examples/kernel_repo/README.md's commands, run as written on the CPU, in a copy of the example that is a
folder of a larger git repository (as it is inside the harness's own repository)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.forked_run import run as forked_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kernel_repo"


def readme_commands() -> list[str]:
    text = (EXAMPLE / "README.md").read_text()
    (block,) = re.findall(r"```\n(.*?)```", text, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_the_readme_commands_are_the_ones_this_test_runs():
    commands = readme_commands()
    assert all(c.split()[0] in ("python", "bench") for c in commands), commands
    assert any(c.startswith("python -m pytest tests") for c in commands) and not any(c.startswith("pytest") for c in commands)
    assert any(c.startswith("bench commits --repo . ") for c in commands)


@pytest.mark.slow
def test_readme_commands_run_as_written(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    top = tmp_path / "big"
    here = top / "examples" / "kernel_repo"
    shutil.copytree(EXAMPLE, here, ignore=shutil.ignore_patterns("__pycache__", ".benchmarks", ".bench-results",
                                                                 "results", ".pytest_cache"))
    (top / "pyproject.toml").write_text("this is not TOML: the example's own pyproject must be the one read\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "one")
    (here / "example_kernels" / "plain.py").write_text((here / "example_kernels" / "plain.py").read_text() + "\n# two\n")
    git(top, "commit", "-q", "-am", "two")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
    run = {"python": [sys.executable], "bench": [sys.executable, "-m", "harness"]}

    def run_all(commands: list[str]) -> list[str]:
        outputs = []
        for command in commands:
            argv = shlex.split(command)
            done = forked_run(run[argv[0]] + argv[1:], cwd=here, env=env, timeout=300)
            outputs.append((command, done.returncode, done.stdout + done.stderr))
        return outputs

    # The pytest sessions depend on each other (the second compares with what the first saved), the `bench`
    # commands on nothing of theirs: the two chains run side by side (each waits on its idle phases and children).
    commands = readme_commands()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        bench = pool.submit(run_all, [c for c in commands if c.startswith("bench ")])
        done = run_all([c for c in commands if not c.startswith("bench ")]) + bench.result()
    for command, code, out in done:
        assert code == 0, f"{command}\n{out[-3000:]}"
    assert [c for c, _, _ in done] == sorted(commands, key=lambda c: c.startswith("bench "))
    pytest_out, compared_out, compare_out, sustained_out, commits_out = (out for _, _, out in done)
    assert "= sustained =" in pytest_out and "test_plain_function: " in pytest_out
    assert "Comparing against benchmarks from" in compared_out  # --benchmark-compare works unchanged
    # ... and the harness judges each test's repeats against the saved ones (A/A here: nothing slower)
    assert "PASS: nothing slower beyond the 100 % (--sustained-compare-fail 100%) threshold (2 compared" in compared_out
    assert "the saved benchmarks and this session ran the same commit" in compared_out  # an A/A check, said so
    assert "test_example_attention" in compare_out and "test_plain_function" in compare_out
    for kernel in ("example_kernels/plain.py:attention", "example_kernels.plain:attention_bshd@bshd", "example-attention"):
        assert f"│ {kernel} " in sustained_out, sustained_out
    assert "HEAD (" in commits_out and "vs HEAD~1 (" in commits_out
    assert len(list((here / ".bench-results").iterdir())) == 4  # two pytest sessions of two tests, kept

    # The saved JSON carries the clock and cycles beside pytest-benchmark's own statistics.
    (saved,) = (here / ".benchmarks").glob("*/0001_*.json")
    data = json.loads(saved.read_text())
    assert data["machine_info"]["harness_device"]  # the device model, so a change of GPU shows on compare
    for bench in data["benchmarks"]:
        extra = bench["extra_info"]
        for key in ("clock_mhz", "sm_clock_mhz", "inband_clock_mhz", "clock_source", "cycles_per_launch", "power_w",
                    "limiter", "settled_after_s", "harness_run_dir"):
            assert key in extra, key
        assert extra["clock_source"] == "none" and extra["clock_mhz"] is None  # no clock telemetry on this CPU
        assert extra["kernel"] in ("example-attention", "example_kernels.plain:attention") and extra["device"] == "cpu"
        stats = bench["stats"]
        assert stats["rounds"] >= 2 and stats["iterations"] == 1
        assert 1e-6 < stats["median"] < 0.1  # seconds per launch
        assert abs(stats["median"] * 1e9 - extra["time_ns"]) / extra["time_ns"] < 0.5
        assert bench["options"]["timer"].startswith("harness sustained protocol")

    # A saved run 100x faster than tonight, saved at another commit (of the same commit it would be an A/A check,
    # which never fails): --benchmark-compare-fail must flag the regression and fail.
    data["commit_info"] = {**data["commit_info"], "id": "0" * 40}
    for bench in data["benchmarks"]:
        for key in ("min", "max", "mean", "median", "q1", "q3", "ld15iqr", "hd15iqr", "stddev", "iqr"):
            bench["stats"][key] *= 0.01
        for row in bench["extra_info"]["repeats_rows"]:  # what --sustained-compare-fail judges: the repeats
            row["time_ns"] *= 0.01
    (saved.parent / "0002_fast.json").write_text(json.dumps(data))
    first = shlex.split(readme_commands()[0])
    # (0.1 s windows and one of the two tests: a run 100x slower than the saved one is as plain in them as in
    # --quick's 0.2 s, and the other saved test, not run, is left out of both comparisons)
    strict = forked_run([sys.executable, *first[1:first.index("--benchmark-autosave")], "--benchmark-compare=0002",
                         "--benchmark-compare-fail=median:50%", "--sustained-compare-fail=50%",
                         "--sustained-window-s", "0.1", "-k", "test_plain_function"], cwd=here, env=env, timeout=300)
    out = strict.stdout + strict.stderr
    assert strict.returncode != 0 and "Performance has regressed" in out
    # The harness's own verdict on the repeats, beside pytest-benchmark's: the same interval as `bench compare`.
    assert "FAIL: 1 slower beyond the 50 % (--sustained-compare-fail 50%) threshold" in out, out[-3000:]
    assert "ratio of geometric means over" in out and "Welch t + between-run interval" in out
