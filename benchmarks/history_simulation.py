"""Issue 40, acceptance 1: simulated 120-night histories built from recorded H200 repeats, through the history store.

The noise is the fixtures': every timed repeat of cuDNN SDPA at S=16384, H=32, d=128, causal, gaussian:0.1
(`sdpa-cudnn` and the `attn.py:attn` wrapper of the same call, 19 runs of 2026-11-30 to 12-03) for the kernel,
and of `sdpa-flash` (9 runs) for the control, as deviations from their own run's mean, with each run's mean
clock as a session level (harness.history.noise_pool). They are kept, with the names of the runs they came from,
in tests/fixtures/h200/history_pools.json (`--write-pools` makes it again from the runs).

The acceptance history (10 repeats a night): +1 % cycles at night 40 (a code change), a driver update at night 70
that lowers the clock 2 % (a fingerprint change), +0.3 % cycles at night 100; and an A/A history of the same
noise. Each night is written as a file of the history store and read back, then analysed as `bench history` does
(threshold 0.5 %). The table says where the change points are, their attribution and kind, the verdicts, and how
many nights the +0.3 % step took to be found when the history ended each night after it. Then the calibration
over many seeded histories: A/A histories with a change point, nights outside the prediction interval (the level
is 99 %), false `slower` verdicts, and the delay of the +0.3 % step, at 5 and 10 repeats a night.

    python -m benchmarks.history_simulation                 # the acceptance table + calibration (~1-2 min)
    python -m benchmarks.history_simulation --trials 0      # the acceptance table only (~5 s)
    python -m benchmarks.history_simulation --write-pools   # rebuild the pools from the fixture runs

tests/history/test_history_simulation.py asserts the acceptance history's rows.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness.history import (
    History,
    NoisePool,
    SimEvent,
    analyze_history,
    noise_pool,
    read_history,
    simulate_history,
    simulate_verdicts,
)

__all__ = ["EVENTS", "POOLS", "REPEATS", "THRESHOLD", "acceptance", "load_pools", "write_pools", "step_delay"]

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "h200"
POOLS = FIXTURES / "history_pools.json"
EVENTS = (SimEvent(night=40, cycles=1.01), SimEvent(night=70, clock=0.98, driver="590.48.01"),
          SimEvent(night=100, cycles=1.003))
REPEATS = 10  # a night's repeats: the nightly's --max-repeats cap (with 5, see the calibration table)
THRESHOLD = 0.005
SEED = 0


def _cudnn(m: dict) -> bool:
    return (m["kernel"] in ("sdpa-cudnn", "attn.py:attn") and m["seq_len"] == 16384 and m["heads_q"] == 32
            and m["input_label"] == "gaussian:0.1" and m["head_dim_qk"] == 128 and bool(m["causal"]))


def _flash(m: dict) -> bool:
    return m["kernel"] == "sdpa-flash"


def write_pools(path: Path = POOLS) -> dict:
    """Build both pools from the fixture runs and store them (with the runs they came from) as JSON."""
    runs = sorted(p for p in FIXTURES.iterdir() if (p / "runs.parquet").is_file())
    doc = {"about": "harness.history.noise_pool of the H200 fixture runs named here (benchmarks/history_simulation.py "
                    "--write-pools): per repeat (log cycles, log clock, log power) minus its run's mean; sessions: each "
                    "run's mean log clock minus their mean", "pools": {}}
    for role, (name, match) in {"kernel": ("sdpa-cudnn", _cudnn), "control": ("sdpa-flash", _flash)}.items():
        pool = noise_pool(runs, name=name, match=match)
        doc["pools"][role] = {**{k: getattr(pool, k) for k in ("name", "cycles", "clock_mhz", "power_w", "shape")},
                              "deviations": [list(d) for d in pool.deviations], "sessions": list(pool.sessions),
                              "runs": sorted(r.name for r in runs if _matches(r, match))}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def _matches(run: Path, match) -> bool:
    from harness.results import read_rows

    return sum(1 for m in read_rows(run, "measurements") if m.get("cycles_per_launch_inband") and match(m)) >= 2


def load_pools(path: Path = POOLS) -> tuple[NoisePool, NoisePool]:
    doc = json.loads(Path(path).read_text())["pools"]
    make = lambda d: NoisePool(name=d["name"], deviations=tuple(tuple(x) for x in d["deviations"]),
                               sessions=tuple(d["sessions"]), cycles=d["cycles"], clock_mhz=d["clock_mhz"],
                               power_w=d["power_w"], shape=d["shape"])
    return make(doc["kernel"]), make(doc["control"])


def _through_store(rows: list[dict], folder: Path) -> History:
    """One night file per night, written and read back as `bench nightly --history` and `bench history` do."""
    from harness.results import HISTORY_TABLE, write_table_atomic

    by_night: dict[str, list[dict]] = {}
    for r in rows:
        by_night.setdefault(r["night"], []).append(r)
    folder.mkdir(parents=True, exist_ok=True)
    for night, rs in by_night.items():
        write_table_atomic(folder / f"night-{night}-{rs[0]['run_id']}.parquet", HISTORY_TABLE, rs)
    return read_history(folder)


def _prefix(history: History, nights: int) -> History:
    """The history as it stood after its first `nights` nights (labels n001, n002, ...)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    labels = pa.array([f"n{i:03d}" for i in range(1, nights + 1)])
    return History(path=history.path, table=history.table.filter(pc.is_in(history.table["night"], value_set=labels)),
                   files=history.files)


def step_delay(history: History, *, night: int, ratio: float, most: int = 10, tolerance: int = 1) -> int | None:
    """Nights (counting `night` itself) until a change point found in cycles, moving them the way `ratio` does,
    places the change at `night` (its location interval, widened by `tolerance`, holds it) when the history ends
    that night; None within `most`. A step seen after a few nights is found before its night is pinned down: the
    interval says where it may be, and the commit range spans it."""
    for k in range(night, night + most):
        a = analyze_history(_prefix(history, k), threshold=THRESHOLD)
        kernel = next(s for s in a.series if s.role == "kernel")
        if any(c.lo + 1 - tolerance <= night <= c.hi + 1 + tolerance and "cycles" in c.found_in
               and ((c.ratios["cycles"] or 1.0) - 1) * (ratio - 1) > 0 for c in kernel.change_points):
            return k - night + 1
    return None


def acceptance(*, seed: int = SEED, repeats: int = REPEATS, folder: Path | None = None) -> dict:
    """The acceptance histories analysed: change points, verdict counts and the +0.3 % step's delay."""
    kernel, control = load_pools()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(folder or tmp)
        for name, events in (("events", EVENTS), ("aa", ())):
            rows = simulate_history(kernel, nights=120, repeats=repeats, events=events, control=control, seed=seed)
            history = _through_store(rows, base / name)
            a = analyze_history(history, threshold=THRESHOLD)
            out[name] = {
                "analysis": a,
                "change_points": [(s.role, c.night + 1, c.attribution, c.kind, c.found_in, c.ratios, c.events)
                                  for s in a.series for c in s.change_points],
                "verdicts": simulate_verdicts(rows, threshold=THRESHOLD)["verdicts"],
                "history": history,
            }
        out["delay_0.3"] = step_delay(out["events"]["history"], night=100, ratio=1.003)
    return out


def calibration(*, trials: int, repeats: int, seed: int = 1) -> dict:
    """Over `trials` seeded histories each: A/A histories with any change point (kernel or control), nights
    outside the 99 % interval, false slower verdicts, and the +0.3 % step's delay (in memory, no files)."""
    import pyarrow as pa

    from harness.results import HISTORY_TABLE, table_schema

    kernel, control = load_pools()
    as_history = lambda rows: History(path=Path("."), table=pa.Table.from_pylist(rows, schema=table_schema(HISTORY_TABLE)),
                                      files=())
    aa_cp = outside = judged = slower = 0
    for t in range(trials):
        rows = simulate_history(kernel, nights=120, repeats=repeats, control=control, seed=seed * 100_000 + t)
        a = analyze_history(as_history(rows), threshold=THRESHOLD)
        aa_cp += any(s.change_points for s in a.series)
        v = simulate_verdicts(rows, threshold=THRESHOLD)
        judged, outside = judged + v["judged"], outside + v["cycles outside"]
        slower += v["verdicts"].get("slower", 0)
    delays = []
    for t in range(trials):
        rows = simulate_history(kernel, nights=110, repeats=repeats, control=control, events=EVENTS,
                                seed=seed * 100_000 + 50_000 + t)
        delays.append(step_delay(as_history(rows), night=100, ratio=1.003))
    found = sorted(d for d in delays if d is not None)
    return {"trials": trials, "repeats": repeats, "aa_with_cp": aa_cp, "outside": outside / max(judged, 1),
            "slower": slower, "judged": judged, "within5": sum(1 for d in delays if d is not None and d <= 5) / max(trials, 1),
            "median_delay": found[len(found) // 2] if found else None, "not_found_in_10": sum(d is None for d in delays)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=100, help="seeded histories per calibration cell (0: none)")
    ap.add_argument("--write-pools", action="store_true", help="rebuild tests/fixtures/h200/history_pools.json")
    args = ap.parse_args(argv)
    if args.write_pools:
        write_pools()
        print(f"wrote {POOLS}")
    kernel, control = load_pools()
    print(f"noise: {kernel.describe()}\n       {control.describe()} (control)")
    res = acceptance()
    print(f"\nAcceptance history (seed {SEED}, {REPEATS} repeats a night, threshold {THRESHOLD:.1%}; injected: +1 % "
          f"cycles at 40, driver update -2 % clock at 70, +0.3 % cycles at 100)")
    print(f"{'history':<8} {'series':<8} {'night':>5}  {'found in':<18} {'time':>8} {'cycles':>8} {'clock':>8}  "
          f"{'attribution':<11} {'kind':<11} events")
    for name in ("events", "aa"):
        cps = res[name]["change_points"]
        for role, night, attr, kind, found_in, ratios, events in cps:
            pct = lambda r: f"{(r - 1) * 100:+.2f}%" if r else "-"
            print(f"{name:<8} {role:<8} {night:>5}  {', '.join(found_in):<18} {pct(ratios['time']):>8} "
                  f"{pct(ratios['cycles']):>8} {pct(ratios['clock']):>8}  {attr:<11} {kind:<11} {'; '.join(events)}")
        if not cps:
            print(f"{name:<8} (no change point)")
        print(f"{name:<8} nightly verdicts night by night: {res[name]['verdicts']}")
    print(f"+0.3 % step at night 100: found {res['delay_0.3']} night(s) after it began (counting night 100)")
    if args.trials:
        print(f"\nCalibration over {args.trials} seeded histories a cell (level 99 %, penalty as shipped):")
        print(f"{'repeats':>7} {'A/A with a CP':>14} {'outside PI':>10} {'false slower':>12} {'0.3 % in <=5':>12} "
              f"{'median delay':>12} {'not in 10':>9}")
        for repeats in (5, REPEATS):
            c = calibration(trials=args.trials, repeats=repeats)
            print(f"{repeats:>7} {c['aa_with_cp']:>10}/{c['trials']:<3} {c['outside']:>9.2%} {c['slower']:>7}/"
                  f"{c['judged']:<5}{c['within5']:>11.0%} {str(c['median_delay']):>12} {c['not_found_in_10']:>9}")


if __name__ == "__main__":
    main()
