"""What checking the output while it is timed costs (issue 41, `harness.runner.OutputWatch`), on this machine's CPU.

Two costs, printed as figures:
1. Inside the timed launches: the loop launcher now keeps the output of the last launch of each call (one list
   store per call of n launches). The store itself is timed (timeit, best of 5), and a whole call of the old
   and the new loop with a launch that does almost nothing (so the store is as large a share of a launch as it
   can ever be), interleaved, best of the rounds (the machine is shared: the best is the least disturbed).
2. After each window (untimed): the row statistics of the last output, the comparison with the gated ones, the
   NaN poisoning and one more launch, v doubled in place (and put back) and one more launch. The statistics and comparison are timed on outputs of the CPU dry-run
   shapes and of a full-size capture's shape (B 1, H 32, S 8192, d 128 bf16); the extra launch is one launch of
   the kernel, whatever it costs.

    .venv/bin/python benchmarks/output_watch_cost.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _old_loop(launch, n):
    def enqueue():
        for _ in range(n):
            launch()
    return enqueue


def per_launch_ns(rounds: int, n: int = 2000, calls: int = 50) -> tuple[list[float], list[float]]:
    from harness.devices import open_device
    from harness.runner import build_launcher

    x = torch.zeros(1)

    def launch():
        return x  # as little work as a launch can be: the store is the largest share it can be

    kernel = type("K", (), {"graph_safe": False, "name": "noop"})()
    new = build_launcher(open_device("cpu"), kernel, launch, strategy="loop", target_s=1.0, max_launches=n).enqueue
    old = _old_loop(launch, n)
    olds, news = [], []
    for r in range(rounds):
        for name, fn in ((("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            ns = (time.perf_counter_ns() - t0) / (calls * n)
            (olds if name == "old" else news).append(ns)
    return olds, news


def store_ns() -> tuple[float, float]:
    """(ns of `launch()`, ns of `held[0] = launch()`), best of 5 timeit repeats."""
    import timeit

    x = torch.zeros(1)
    held = [None]

    def launch():
        return x

    env = {"launch": launch, "held": held}
    plain = min(timeit.repeat("launch()", globals=env, number=200_000, repeat=5)) / 200_000
    kept = min(timeit.repeat("held[0] = launch()", globals=env, number=200_000, repeat=5)) / 200_000
    return plain * 1e9, kept * 1e9


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def follow_ms(shape, dtype, rounds: int, device: str = "cpu") -> float:
    """ms to double v in place and put it back exactly (the launch in between is the kernel's own cost)."""
    v = torch.randn(*shape, device=device).to(dtype)
    times = []
    for _ in range(rounds):
        _sync(device)
        t0 = time.perf_counter()
        saved = v.clone()
        v.mul_(2.0)
        v.copy_(saved)
        _sync(device)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def check_ms(shape, dtype, rounds: int, device: str = "cpu") -> tuple[float, float]:
    """(ms for the gated output's statistics, ms for one check of an output) at `shape`."""
    from harness.runner import OutputWatch

    torch.manual_seed(0)
    out = torch.randn(*shape, device=device).to(dtype)
    later = out.clone()
    firsts, checks = [], []
    for _ in range(rounds):
        w = OutputWatch("k")
        _sync(device)
        t0 = time.perf_counter()
        w.first(out)
        _sync(device)
        firsts.append(time.perf_counter() - t0)
        w.arm(type("G", (), {"max_abs_diff": 2e-3})())
        t0 = time.perf_counter()
        w.check(later, during="bench")  # ends in a host read of its verdict: synchronized
        checks.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(firsts), 1e3 * statistics.median(checks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--device", default="cpu", help="where part 2's outputs live (cpu, cuda:0)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    plain, kept = store_ns()
    print(f"1. in the timed launches: launch() {plain:.1f} ns, held[0] = launch() {kept:.1f} ns: the store costs "
          f"{kept - plain:.1f} ns once per call of n launches (n = 2000 here: {(kept - plain) / 2000:.4f} ns a launch)")
    olds, news = per_launch_ns(args.rounds)
    print(f"   whole calls of a no-op launch (n=2000), best of {args.rounds} interleaved rounds: old loop "
          f"{min(olds):.2f} ns a launch, new loop {min(news):.2f} ns a launch ({min(news) - min(olds):+.2f} ns: noise "
          f"of a shared 2-core machine; the code differs by the one store above)")
    print(f"2. after each window (untimed), on {args.device}" + (" (one thread)" if args.device == "cpu" else "") + ":")
    for label, shape, dtype in (
            ("CPU dry run, SmolLM2 S1024 (B1 H9 d64 fp32)", (1, 9, 1024, 64), torch.float32),
            ("CPU default synthetic (B1 H32 S1024 d128 bf16)", (1, 32, 1024, 128), torch.bfloat16),
            ("full-size capture (B1 H32 S8192 d128 bf16)", (1, 32, 8192, 128), torch.bfloat16)):
        first, check = check_ms(shape, dtype, max(3, args.rounds // 2), args.device)
        mib = torch.Size(shape).numel() * torch.finfo(dtype).bits / 8 / 2**20
        follow = follow_ms(shape, dtype, max(3, args.rounds // 2), args.device)
        print(f"   {label}, output {mib:.1f} MiB: gated statistics {first:.2f} ms once per kernel x input; per window "
              f"3 checks of {check:.2f} ms (last output, after NaN, after v x 2), v x 2 and back {follow:.2f} ms, and "
              f"2 launches of the kernel")


if __name__ == "__main__":
    main()
