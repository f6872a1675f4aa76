"""Issue 30, acceptance 2: A/A on the CPU, N tries each. Counts the differences the harness claims where there
are none to find:

- the README's main job, `bench sustained --model smollm2-135m --device cpu --quick`: captured activations
  against their Gaussian control (on a CPU their times do not depend on the data, so a "slower" or "faster"
  is a false claim); every try's `--json` inputs rows and printed sentences are read back;
- an A/A `bench commits`: one kernel at two commits of a temporary repository whose second commit changes only
  a README (the same code), `--quick --repeats 3 --fail-on-slowdown 5%` (a threshold asked for: CPU timings
  are judged then; without one they get no verdict, "not judged").

    python -m benchmarks.aa_cpu --tries 10          # both; about 8 minutes on the 2-core CPU machine
    python -m benchmarks.aa_cpu --only commits      # one of them

Prints one line per try (verdicts, intervals) and the counts. Writes only under a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
CLAIM = re.compile(r" runs [0-9.]+ % (slower|faster) than on ")
KERNEL = '''import torch.nn.functional as F


def attn(q, k, v, is_causal=True, scale=None):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
'''


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          env={**__import__("os").environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT)}, timeout=1800)


def main_job(tries: int, work: Path) -> int:
    claims = 0
    for i in range(tries):
        out = work / f"main-{i}"
        t0 = time.monotonic()
        done = _bench("sustained", "--model", "smollm2-135m", "--device", "cpu", "--quick", "--results",
                      str(out / "results"), "--captures", str(work / "captures"), "--json", str(out / "figures.json"),
                      cwd=work)
        if done.returncode != 0:
            print(f"main job try {i}: exit {done.returncode}\n{done.stderr[-2000:]}")
            continue
        rows = json.loads((out / "figures.json").read_text())["tables"].get("inputs", [])
        said = [line for line in done.stdout.splitlines() if line.startswith("On ")]
        claimed = [r for r in rows if r["verdict"] in ("slower", "faster")]
        claims += len(claimed)
        assert len(said) == len(rows) and sum(bool(CLAIM.search(s)) for s in said) == len(claimed)
        print(f"main job try {i} ({time.monotonic() - t0:.0f} s): " + "; ".join(
            f"{r['kernel']} {r['input_b']} vs {r['input_a']}: {r['verdict']} {r['time_b_over_a']:.4f} "
            f"[{r['time_b_over_a_low']:.4f}, {r['time_b_over_a_high']:.4f}]" for r in rows), flush=True)
    print(f"README main job: {claims} claimed difference(s) in {tries} tries")
    return claims


def commits(tries: int, work: Path) -> int:
    repo = work / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,  # noqa: E731
                                    env={**__import__("os").environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b",
                                         "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"})
    git("init", "-q", "-b", "main")
    (repo / "attn.py").write_text(KERNEL)
    git("add", "attn.py")
    git("commit", "-q", "-m", "one")
    git("tag", "one")
    (repo / "README").write_text("the same kernel code\n")
    git("add", "README")
    git("commit", "-q", "-m", "two: a README only")
    claims = 0
    for i in range(tries):
        t0 = time.monotonic()
        js = work / f"commits-{i}.json"
        done = _bench("commits", "--repo", str(repo), "--kernel", "attn.py:attn", "--device", "cpu", "--quick",
                      "--repeats", "3", "--seq-len", "256", "--heads", "4", "--head-dim", "32", "--dtype", "fp32",
                      "-i", "gaussian:1", "--results", str(work / "commits-results"), "--json", str(js),
                      "--fail-on-slowdown", "5%", "one", "main", cwd=work)
        if done.returncode not in (0, 1):  # 1: a slowdown verdict, counted below
            print(f"commits try {i}: exit {done.returncode}\n{done.stderr[-2000:]}")
            continue
        (row,) = json.loads(js.read_text())["tables"]["revisions"]
        claims += row["verdict"] in ("slower", "faster")
        print(f"commits try {i} ({time.monotonic() - t0:.0f} s): {row['verdict']} {row['time_b_over_a']:.4f} "
              f"[{row['time_b_over_a_low']:.4f}, {row['time_b_over_a_high']:.4f}] over {row['repeats_a']} pairs",
              flush=True)
    print(f"A/A bench commits: {claims} claimed difference(s) in {tries} tries")
    return claims


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--only", choices=("main-job", "commits"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aa-cpu-") as tmp:
        work = Path(tmp)
        if args.only in (None, "main-job"):
            main_job(args.tries, work)
        if args.only in (None, "commits"):
            commits(args.tries, work)


if __name__ == "__main__":
    main()
