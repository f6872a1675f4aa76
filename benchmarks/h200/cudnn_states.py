"""Where the two states of cuDNN SDPA's sustained time come from (H200 fixture 20261203-131342-commits-*: the
base revision's repeats sit at 3.874 or 3.897 ms, 0.6 % apart, inside one worker process, at one in-band clock).

One process, cuDNN SDPA (causal, B=1, H=32, S=16384, d=128, bf16), 5 s of warm-up, then 1 s windows (CUDA events
around back-to-back launches) in three phases of N windows each:
  steady    nothing between windows;
  idle      0.5 s of sleep before each window (the GPU idles, as between two revisions' repeats);
  realloc   q, k, v copied into fresh allocations before each window (another address for every operand).
A phase whose windows take two values while `steady` takes one names the cause. Prints one line per window and a
summary; never changes clocks or GPU modes.

    python benchmarks/h200/cudnn_states.py [N]      # about 3 x N x 1.3 s
"""

import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main(n: int) -> None:
    dev = torch.device("cuda:0")
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = ((0.1 * torch.randn(1, 32, 16384, 128, generator=g)).to(dev, torch.bfloat16) for _ in range(3))

    def call(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def window(q, k, v, seconds=1.0):
        call(q, k, v)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        launches = 0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        while time.perf_counter() - t0 < seconds:
            for _ in range(16):
                call(q, k, v)
            launches += 16
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / launches

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 5.0:
        call(q, k, v)
        torch.cuda.synchronize()
    summary = {}
    for phase in ("steady", "idle", "realloc"):
        times = []
        for i in range(n):
            if phase == "idle":
                time.sleep(0.5)
            if phase == "realloc":
                pad = torch.empty(int(torch.randint(1, 64, (1,), generator=g)) << 20, dtype=torch.uint8, device=dev)
                q, k, v = q.clone(), k.clone(), v.clone()
                del pad
            times.append(window(q, k, v))
            print(f"{phase:8s} {i:3d} {times[-1]:.4f} ms  q@{q.data_ptr() % (1 << 30):#x}", flush=True)
        summary[phase] = times
    for phase, t in summary.items():
        print(f"{phase:8s} n={len(t)} min {min(t):.4f} median {statistics.median(t):.4f} max {max(t):.4f} "
              f"spread {100 * (max(t) / min(t) - 1):.2f} % stdev {100 * statistics.stdev(t) / statistics.mean(t):.3f} %")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
