"""How long a worker process takes to start: from the parent's start call to the child's first line, for a child
that imports torch (as every kernel process, `bench commits` revision and multi-GPU worker does), started the
ordinary way (`subprocess.Popen` of `python -m`) and forked from the preloaded helper (harness/workers/_preload.py,
whose own start is paid once per parent and shown apart).

    python benchmarks/worker_start.py --children 8

Prints one line per way: the median and the range over the children, and the total.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.workers import preloaded_popen

CHILD = "import sys, torch\nprint('up', flush=True)\n"


def _start(argv: list[str], env: dict, *, preloaded: bool) -> float:
    t = time.perf_counter()
    start = preloaded_popen if preloaded else subprocess.Popen
    proc = start(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t
    proc.wait(timeout=120)
    assert line == "up\n", line
    return elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--children", type=int, default=8, help="children started each way, one after another")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "start_child.py").write_text(CHILD)
        env = {**os.environ, "PYTHONPATH": folder}
        argv = [sys.executable, "-m", "start_child"]
        plain = [_start(argv, env, preloaded=False) for _ in range(args.children)]
        first = _start(argv, env, preloaded=True)  # starts the helper, which imports torch once
        forked = [_start(argv, env, preloaded=True) for _ in range(args.children)]
    for name, times in (("python -m (Popen)", plain), ("forked, preloaded", forked)):
        print(f"{name:>18}: median {statistics.median(times) * 1e3:8.1f} ms, range {min(times) * 1e3:.1f}-"
              f"{max(times) * 1e3:.1f} ms, {len(times)} children {sum(times):.2f} s")
    print(f"{'helper start':>18}: {first:.2f} s once per parent process (its first child included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
