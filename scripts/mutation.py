"""Mutation testing of the measurement core: mutmut per module, with only that module's tests, and the
kill rate per module.

    python scripts/mutation.py                 # every core module (about 30-60 min on 2 shared cores)
    python scripts/mutation.py window gate     # some of them (names below, or the module path)
    python scripts/mutation.py --report        # print the table from the last run's cache only

Why mutmut 2.x and not 3: mutmut 3 maps tests to mutants by first running the whole suite under its
trampolines (~5 min here) and then picks tests per function; it cannot be told "for this module, run
these tests". mutmut 2.5 takes `--paths-to-mutate` one module at a time and a `--runner` command, so each
mutant runs only the targeted pytest command below (a few seconds), and the module's doctests with it.

Each mutant's pytest runs in a process forked from a warm server (`--serve`, started by this script),
which has pytest, numpy, torch, pyarrow, polars and hypothesis imported but never `harness`: the child
imports the mutated module from disk, so a mutant costs its tests' own time, not ~2 s of imports (on 2
shared cores that is the difference between ~20 min and ~2 h). mutmut's `--runner` is a small client
(`--client`) that asks the server to run pytest and exits with its exit code.

mutmut 2 mutates the source files IN PLACE (and restores them): run it in a copy of the tree, or do not
run tests of these modules at the same time. Its results go to `.mutmut-cache` (sqlite) in the working
directory; the table is read from there. Run it under `nice`: `nice -n 10 python scripts/mutation.py`.
Run it before every change to these modules; it is not in `.ci/run` (too slow). The surviving mutants and
why each is equivalent or harmless are in tests/MUTATION.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module -> the tests that guard it (the module's own doctests run too).
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "settle": ("harness/runner/_settle.py", (
        "tests/runner/test_settle.py", "tests/runner/test_settle_scenarios.py", "tests/runner/test_protocol.py")),
    "measure": ("harness/runner/_measure.py", (
        "tests/runner/test_protocol.py", "tests/runner/test_settle_scenarios.py")),
    "window": ("harness/analysis/_window.py", ("tests/analysis/test_window.py",)),
    "decompose": ("harness/analysis/_decompose.py", (
        "tests/analysis/test_analysis_decompose.py", "tests/analysis/test_compare_verdict.py",
        "tests/analysis/test_decompose_properties.py")),
    "compare": ("harness/analysis/_compare.py", (
        # the fast synthetic tests first: with -x most mutants are killed before the real runs are read
        "tests/analysis/test_compare_rows.py", "tests/analysis/test_compare_verdict.py",
        "tests/analysis/test_analysis_compare.py",
        # what issues 39 and 42 added to the module (designs, same-run and same-code notes, the workload in the
        # shape text, gate outcomes) is checked here and against the H200 runs
        "tests/analysis/test_explain.py", "tests/report/test_traffic.py", "tests/analysis/test_in_model_compare.py",
        "tests/analysis/test_gate_outcome.py", "tests/analysis/test_h200_decompositions.py",
        "tests/analysis/test_h200_verdicts.py", "tests/analysis/test_fixture_verdicts_agree.py",
        "tests/analysis/test_h200_hang_power_cap_and_revisions.py", "tests/analysis/test_h200_summma_ring_slots.py")),
    # The verdict procedure (issue 39): the simulation under GPU-like noise first, then the rules' edges.
    "interval": ("harness/analysis/_interval.py", (
        "tests/analysis/test_interval_edges.py", "tests/analysis/test_verdicts_under_gpu_noise.py",
        "tests/analysis/test_gate_outcome.py", "tests/analysis/test_analysis_compare.py",
        "tests/analysis/test_analysis_decompose.py", "tests/analysis/test_compare_verdict.py",
        "tests/analysis/test_decompose_properties.py")),
    "sequential": ("harness/analysis/_sequential.py", (
        "tests/analysis/test_verdicts_under_gpu_noise.py", "tests/analysis/test_decompose_properties.py")),
    "outcome": ("harness/analysis/_outcome.py", (
        "tests/analysis/test_gate_outcome.py", "tests/plugin/test_saved_comparison.py")),
    "gate": ("harness/kernels/_gate.py", (
        "tests/kernels/test_gate_limits.py", "tests/kernels/test_gate_checks.py", "tests/kernels/test_adversarial.py",
        # the declared numerics (issues 32 and 44: max and RMS ratios to a recipe's error bound)
        "tests/kernels/test_gate_declared.py", "tests/numerics/test_recipe_gate.py", "tests/kernels/test_leak.py",
        # the hints on a failure (a serving workload's usual mistakes, the other layout) judge with `compare`
        "tests/kernels/test_workload_hint.py", "tests/kernels/test_decode_layout.py")),
    "reasons": ("harness/telemetry/_reasons.py", (
        "tests/telemetry/test_telemetry_reasons.py", "tests/telemetry/test_reasons.py",
        "tests/analysis/test_window.py")),
    "schema": ("harness/results/_schema.py", ("tests/results/test_schema.py",)),
}

KILLED = ("ok_killed", "bad_timeout", "ok_suspicious")  # a timeout or a crash is a detected mutant too


PYTEST_ARGS = ["-x", "-q", "--no-header", "-p", "no:cacheprovider", "-p", "no:benchmark", "--doctest-modules"]
SOCKET = ROOT / ".mutmut-server.sock"
CHILD_LIMIT_S = 120  # a mutant that loops forever is stopped here (and counts as killed: a timeout)


def runner_command(path: str, tests: tuple[str, ...]) -> str:
    return f"{sys.executable} {Path(__file__).resolve()} --client {path} {' '.join(tests)}"


def serve() -> None:
    """Fork one child per request; the child runs pytest on the files it was sent and exits with its code."""
    import hypothesis  # noqa: F401  (preloaded: the children inherit them imported)
    import numpy  # noqa: F401
    import polars  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import pytest
    import torch

    torch.set_num_threads(1)
    # The children import the tree being mutated, not whatever `harness` the venv maps: run from a copy of the
    # tree with the checkout's venv (an editable install points at the checkout), `python scripts/...` puts
    # scripts/ first on sys.path, and pytest then refuses the copy's module as an "import file mismatch".
    sys.path.insert(0, str(ROOT))
    assert not any(m == "harness" or m.startswith("harness.") for m in sys.modules), "harness must not be preloaded"
    SOCKET.unlink(missing_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(SOCKET))
    srv.listen(1)
    while True:
        conn, _ = srv.accept()
        files = json.loads(conn.recv(65536).decode())
        if files == "stop":
            conn.close()
            break
        pid = os.fork()
        if pid == 0:
            srv.close()
            sys.dont_write_bytecode = True  # and no stale .pyc of a mutant is ever read: see below
            for f in files:
                if f.startswith("harness/"):
                    cache = ROOT / Path(f).parent / "__pycache__"
                    for pyc in cache.glob(Path(f).stem + ".*.pyc"):
                        pyc.unlink(missing_ok=True)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os._exit(int(pytest.main([*PYTEST_ARGS, *files])))
        deadline = time.monotonic() + CHILD_LIMIT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code = 124
                break
            time.sleep(0.01)
        try:
            conn.sendall(str(code).encode())
        except OSError:
            pass  # the client is gone (mutmut killed it at its own timeout): serve the next one
        conn.close()


def client(files: list[str]) -> int:
    """The exit code of pytest on `files`, from the warm server; if the server is gone, from a pytest run
    here (slower, but never a fake result: mutmut counts any non-zero code as a killed mutant, so a
    refused connection must not be one)."""
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(SOCKET))
        s.sendall(json.dumps(files).encode())
        reply = s.recv(64).decode()
    except OSError:
        reply = ""
    if reply:
        return int(reply)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.call([sys.executable, "-m", "pytest", *PYTEST_ARGS, *files], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_module(name: str) -> int:
    path, tests = MODULES[name]
    cmd = [sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", path, "--tests-dir", "tests",
           "--runner", runner_command(path, tests), "--simple-output", "--no-progress",
           # A generous base: on a shared machine a slow run is load, not a hang (a real hang still stops).
           "--test-time-base", "60",
           # mutmut 2.5.1 crashes recording decorator mutants ("Attribute Mutant.line is required").
           "--disable-mutation-types", "decorator"]
    print(f"== {name}: {path}\n   runner: {runner_command(path, tests)}", flush=True)
    return subprocess.call(cmd, cwd=ROOT)


def table(names: list[str]) -> list[tuple[str, int, int, list[int]]]:
    db = ROOT / ".mutmut-cache"
    if not db.exists():
        raise SystemExit("no .mutmut-cache here: run the mutation first (python scripts/mutation.py)")
    con = sqlite3.connect(db)
    rows = []
    for name in names:
        path = MODULES[name][0]
        res = con.execute(
            "SELECT m.id, m.status FROM Mutant m JOIN Line l ON m.line = l.id JOIN SourceFile f ON l.sourcefile = f.id "
            "WHERE f.filename = ?", (path,)).fetchall()
        tested = [(i, s) for i, s in res if s not in ("untested", "skipped")]
        killed = sum(1 for _, s in tested if s in KILLED)
        rows.append((name, len(tested), killed, [i for i, s in tested if s not in KILLED]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"some of: {', '.join(MODULES)} (default: all)")
    ap.add_argument("--report", action="store_true", help="only print the table from .mutmut-cache")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve()
        return 0
    if args.client:
        return client(args.modules)
    by_path = {p: n for n, (p, _) in MODULES.items()}
    names = [by_path.get(m, m) for m in args.modules] or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        ap.error(f"unknown module {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    if not args.report:
        server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], cwd=ROOT)
        try:
            while not SOCKET.exists():
                time.sleep(0.1)
            for n in names:
                run_module(n)
        finally:
            try:
                client_stop = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client_stop.connect(str(SOCKET))
                client_stop.sendall(json.dumps("stop").encode())
            finally:
                server.wait(timeout=10)
                SOCKET.unlink(missing_ok=True)
    print(f"\n{'module':<40} {'mutants':>8} {'killed':>7} {'rate':>7}  survivors (mutmut show ID)")
    worst = 1.0
    for name, total, killed, survivors in table(names):
        rate = killed / total if total else 1.0
        worst = min(worst, rate)
        print(f"{MODULES[name][0]:<40} {total:>8} {killed:>7} {rate:>7.1%}  {' '.join(map(str, survivors))}")
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
