"""Every way a `bench sustained` run ends, on the CPU, and what it leaves on disk (issues 14 and 31).

    PYTHONPATH=$PWD python benchmarks/endings.py [--keep DIR] [--only ENDING ...]

Each ending runs `python -m harness sustained --device cpu` in a process of its own: SIGINT, two SIGINTs
~1 ms apart, SIGTERM, SIGHUP (each sent once the first measurement is on disk), a full disk (a 300 KiB
tmpfs as --results; needs root and a kernel that allows the mount, else skipped with the reason), a hung
kernel, a raising kernel, and a run where every kernel fails. Issue 31's: a kernel (beside sdpa-cpu) that
calls sys.exit(0) or sys.exit(3), raises its own BaseException, calls os._exit(0), crashes (SIGSEGV), hangs
where SIGALRM cannot reach it, writes into its inputs, or changes directory under a relative --results; a
kernel module that calls sys.exit(0) when imported; and a reader that goes away (`| head -1`). The table
gives the exit code, the status row on disk, whether the measurements are readable, and the cause recorded
for each kernel that was not timed. About 4-5 minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = "tests.runner.ending_kernels"
BASE = ["--device", "cpu", "--quick", "--heads", "2", "--seq-len", "256", "--head-dim", "64", "--repeats", "2",
        "-i", "gaussian:0.1", "-i", "gaussian:1", "--idle-s", "0.2", "--window-s", "0.6", "--telemetry", "host"]


HOSTILE = "tests.runner.hostile_kernels"
# Issue 31: each kernel beside sdpa-cpu; the ending is what its own process does to the run.
HOSTILE_ENDINGS = {"sys.exit(0) kernel": "exits_0", "sys.exit(3) kernel": "exits_3",
                   "BaseException kernel": "raises_base_exception", "os._exit kernel": "os_exits",
                   "SIGSEGV kernel": "segfaults", "hang in C kernel": "hangs_in_c", "writes its inputs": "writes_inputs"}


def bench(args: list[str], results: Path, *, cwd: Path = ROOT, results_arg: str | None = None,
          stderr=subprocess.STDOUT) -> subprocess.Popen:
    # One OpenMP thread, as the test suite runs: on a shared 2-CPU machine two threads' spinning barriers stall a
    # 0.1 s CPU chunk past the launch timeout (conftest.py).
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "200",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.Popen([sys.executable, "-m", "harness", "sustained", *BASE, *args, "--results",
                             results_arg or str(results)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr,
                            text=True)


def wait_for_first_part(results: Path, proc: subprocess.Popen, timeout_s: float = 120) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s and proc.poll() is None:
        if any(results.glob("*/measurements/part-*.parquet")):
            return True
        time.sleep(0.02)
    return False


def on_disk(results: Path) -> dict:
    """The run's status row and what of its measurements reads back."""
    import warnings

    from harness.results import read_run

    runs = [p for p in results.glob("*") if p.is_dir() and (p / "runs.parquet").is_file()]
    if not runs:
        return {"status": "(no run)", "detail": "", "readable": "-", "tmp": 0}
    run_dir = runs[0]
    tmp = len([p for p in run_dir.rglob("*") if p.name.endswith(".tmp")])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = read_run(run_dir)
    except Exception as exc:  # the point of the table: say so instead of stopping
        return {"status": "?", "detail": f"unreadable: {exc}", "readable": "no", "tmp": tmp}
    st = run.measurements["status"].to_list()
    timed = sum(s in ("ok", "unsettled") for s in st)
    other = sorted({s for s in st if s not in ("ok", "unsettled")})
    causes = [e for s, e in zip(st, run.measurements["error"].to_list()) if s not in ("ok", "unsettled") and e]
    return {"status": run.info["status"], "detail": run.info.get("status_detail") or "",
            "readable": f"yes: {len(st)} rows, {timed} timed" + (f", {'/'.join(other)}" if other else ""), "tmp": tmp,
            "cause": _cause(causes[0]) if causes else ""}


def _cause(error: str) -> str:
    """The recorded cause without the 'Kernel X on input (shape), stage S:' preamble."""
    text = re.sub(r"^Kernel '[^']*' on \S+ \([^)]*\)(, stage [^:]+:| raised in stage [^:]+:|:) ", "", error)
    text = text.split(". It is not timed")[0].split("; it was stopped")[0]
    return text[:170]


def mount_tmpfs(where: Path) -> str | None:
    """Mount a 300 KiB tmpfs; None when done, else why not."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "not root: cannot mount a tmpfs"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(where)], capture_output=True, text=True)
    return None if r.returncode == 0 else f"mount failed: {r.stderr.strip() or r.returncode}"


def run_ending(name: str, tmp: Path) -> dict:
    results = tmp / re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")
    results.mkdir(parents=True, exist_ok=True)
    kernels = ["-k", "sdpa-cpu"]
    signals: tuple = ()
    if name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signals = (getattr(signal, name),)
    elif name == "SIGINT x2":
        signals = (signal.SIGINT, signal.SIGINT)
    elif name == "disk full":
        why = mount_tmpfs(results)
        if why:
            return {"ending": name, "exit": "skipped", "status": why, "detail": "", "readable": "-", "tmp": 0}
        # Half of it taken by another file, so a loaded machine (fewer samples) still fills it.
        (results / "filler").write_bytes(b"\0" * 64 * 1024)
        kernels += ["--sample-period-ms", "1", "--window-s", "1.5"]
    elif name == "hung kernel":
        kernels += ["-k", f"{KERNELS}:hangs", "--launch-timeout-s", "5"]
    elif name == "raising kernel":
        kernels += ["-k", f"{KERNELS}:raises"]
    elif name == "all kernels fail":
        kernels = ["-k", f"{KERNELS}:raises", "-k", f"{KERNELS}:nan_output"]
    elif name in HOSTILE_ENDINGS:
        kernels += ["-k", f"{HOSTILE}:{HOSTILE_ENDINGS[name]}", "--launch-timeout-s", "5"]
    elif name == "sys.exit at import":
        kernels += ["-k", "tests.runner.exits_at_import:attention"]
    elif name == "chdir, relative --results":
        kernels += ["-k", f"{HOSTILE}:changes_directory", "--isolation", "none"]  # in the run's own process
    t0 = time.monotonic()
    if name == "chdir, relative --results":
        proc = bench(kernels, results, cwd=results, results_arg="r")
        results = results / "r"
    elif name == "| head -1":
        proc = bench(kernels + ["--repeats", "3"], results, stderr=subprocess.DEVNULL)
        first = proc.stdout.readline()  # what head -1 reads before it exits and closes the pipe
        proc.stdout.close()
        rc = proc.wait(timeout=300)
        return {"ending": name, "exit": str(rc), "seconds": f"{time.monotonic() - t0:.1f}", **on_disk(results),
                "last line": first.strip()[:160]}
    else:
        proc = bench(kernels, results)
    if signals and wait_for_first_part(results, proc):
        for i, s in enumerate(signals):
            if i:
                time.sleep(0.001)
            proc.send_signal(s)
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    row = {"ending": name, "exit": str(proc.returncode), "seconds": f"{time.monotonic() - t0:.1f}", **on_disk(results),
           "last line": (out.strip().splitlines() or [""])[-1][:160]}
    if name == "disk full":
        subprocess.run(["umount", str(results)], capture_output=True)
    return row


ENDINGS = ("SIGINT", "SIGINT x2", "SIGTERM", "SIGHUP", "disk full", "hung kernel", "raising kernel", "all kernels fail",
           *HOSTILE_ENDINGS, "sys.exit at import", "chdir, relative --results", "| head -1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", type=Path, help="keep the results here (default: a temporary directory)")
    ap.add_argument("--only", action="append", choices=ENDINGS, help="run only these endings (repeatable)")
    args = ap.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="endings-"))
    rows = [run_ending(name, tmp) for name in (args.only or ENDINGS)]
    cols = ("ending", "exit", "status", "readable", "tmp")
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols) + "  status_detail")
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in cols) + "  " + r.get("detail", ""))
    print("\nthe cause recorded for the first kernel not timed:")
    for r in rows:
        if r.get("cause"):
            print(f"  {r['ending']}: {r['cause']}")
    print("\nlast line printed by each run:")
    for r in rows:
        print(f"  {r['ending']}: {r.get('last line', '')}")
    print(f"\nresults: {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
