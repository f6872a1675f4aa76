"""Issue 40, acceptance 2: `bench history` on 1,000 nights x 50 series loads, analyses and writes the dashboard in at
most 10 s on the 2-core CPU machine, and the page stays under 5 MB.

The history is simulated from the recorded H200 repeats (tests/fixtures/h200/history_pools.json, as
benchmarks/history_simulation.py), 50 series (the cuDNN pool under 50 shape labels, 5 of them the control's
pool) over 1,000 nights with a code change in 10 series and a driver update for all, written as 1,000 night files
through the history store. Then the command a user runs, in a process of its own, timed from start to exit:

    bench history DIR --html OUT/ --md OUT/pr.md

    python -m benchmarks.history_speed                    # build the history in a temporary folder, time 3 runs
    python -m benchmarks.history_speed --dir /tmp/h1000   # keep (or reuse) the history there

It prints the load average before and after (other people's work on the machine lengthens the wall time) and the
CPU time the command used (user + system, its own and its threads': what it costs on an idle machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.history import SimEvent, read_noise_pools, simulate_history

POOLS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h200" / "history_pools.json"

NIGHTS, SERIES = 1000, 50


def build(folder: Path, *, nights: int = NIGHTS, series: int = SERIES) -> int:
    """Write the simulated history into `folder` (one file per night); returns the bytes written."""
    from harness.results import HISTORY_TABLE, write_table_atomic

    pools = read_noise_pools(POOLS)
    kernel, control = pools["kernel"], pools["control"]
    by_night: dict[str, list[dict]] = {}
    for i in range(series):
        pool = control if i % 10 == 9 else kernel
        shape = {**pool.shape, "seq_len": 1024 * (1 + i % 16), "seq_len_kv": 1024 * (1 + i % 16), "batch": 1 + i // 16}
        pool = dataclasses.replace(pool, name=f"{pool.name}-{i}", shape=shape)
        events = [SimEvent(night=600, clock=0.98, driver="590.48.01")]
        if i % 5 == 0:
            events.append(SimEvent(night=300 + 7 * i, cycles=1.01))
        for r in simulate_history(pool, nights=nights, repeats=5, events=events, seed=i):
            if i % 10 == 9:
                r["role"] = "control"
            by_night.setdefault(r["night"], []).append(r)
    folder.mkdir(parents=True, exist_ok=True)
    for night, rows in by_night.items():
        write_table_atomic(folder / f"night-{night}-sim.parquet", HISTORY_TABLE, rows)
    return sum(f.stat().st_size for f in folder.iterdir())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="where the history is built (reused when it holds nights)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    folder = args.dir or Path(tmp.name) / "history"
    if not (folder.is_dir() and any(folder.glob("night-*.parquet"))):
        t = time.perf_counter()
        size = build(folder)
        print(f"built {NIGHTS} nights x {SERIES} series in {time.perf_counter() - t:.1f} s: {size / 1e6:.1f} MB on disk "
              f"({size / NIGHTS / 1e3:.1f} kB a night of {SERIES} series)")
    out = Path(tmp.name) / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"load average before: {os.getloadavg()}")
    walls, cpus = [], []
    for _ in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness", "history", str(folder), "--html", str(out), "--md",
                               str(out / "pr.md"), "--format", "compact"], capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode:
            print(proc.stdout[-2000:], proc.stderr[-2000:])
            raise SystemExit(proc.returncode)
    html = out / "index.html"
    print(f"load average after:  {os.getloadavg()}")
    print(f"bench history {NIGHTS} nights x {SERIES} series --html --md: wall {', '.join(f'{w:.2f}' for w in walls)} s "
          f"(best {min(walls):.2f} s; limit 10 s); CPU {', '.join(f'{c:.2f}' for c in cpus)} s; index.html "
          f"{html.stat().st_size / 1e6:.2f} MB (limit 5 MB)")
    print(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
