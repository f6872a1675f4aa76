"""How long `bench report RUN --html F --md F` takes on this machine's CPU (budget: 3 s for the issue2 run).

Two figures: a fresh Python process doing what the command does (interpreter start and every import
included: what a user waits for), and the same work repeated in one process after a first run (the
report code alone). Nothing here needs a GPU.

    python benchmarks/report_speed.py [RUN_DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "h200" / "20261130-043508-issue2-b7147a"
BUDGET_S = 3.0

_CHILD = """
import sys
from harness.report import build_report, write_report
from harness.results import read_run
write_report(build_report(read_run(sys.argv[1])), html=sys.argv[2] + "/r.html", md=sys.argv[2] + "/r.md")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from harness.report import build_report, write_report
    from harness.results import read_run

    with tempfile.TemporaryDirectory() as out:
        cold = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", _CHILD, str(args.run), out], check=True)
            cold.append(time.perf_counter() - t0)
        warm = []
        for i in range(args.repeats + 1):
            t0 = time.perf_counter()
            rep = build_report(read_run(args.run))
            write_report(rep, html=Path(out) / "w.html", md=Path(out) / "w.md")
            if i:  # the first pass pays the imports; the cold figure above already counts them
                warm.append(time.perf_counter() - t0)
        size = (Path(out) / "w.html").stat().st_size
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"report of {args.run.name}: {len(rep.figures)} figures, HTML {size / 1e6:.2f} MB")
    print(f"fresh process (interpreter and imports included): median {c:.2f} s of {args.repeats} "
          f"({', '.join(f'{x:.2f}' for x in cold)})")
    print(f"in process after a first run: median {w:.2f} s ({', '.join(f'{x:.2f}' for x in warm)})")
    print(f"budget {BUDGET_S:g} s: {'met' if c <= BUDGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
