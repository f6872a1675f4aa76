"""The in-band clock probe: how many cycles the SMs really count per nanosecond under load.

One single-warp block per SM, on a side stream, reads `%globaltimer` and `%clock64`, spins (with
`nanosleep` so it steals few issue slots from the measured kernel) until `spin_ns` of global time have
passed, and reads both again: clock = delta cycles / delta ns. A host thread launches a probe every
`period_s` while the measured kernel runs. NVML's SM clock is a different view (the clock the driver
requested); on the H200 here the two agreed at rest and differed by ~9 % under tensor-core load.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

__all__ = ["ProbeReading", "InbandProbe", "probe_unavailable_reason", "summarize_probe_blocks"]

_FIELDS = 5  # t0_ns, t1_ns, c0, c1, smid


@dataclass(frozen=True, kw_only=True)
class ProbeReading:
    t_ns: int  # host monotonic time of the probe's midpoint
    clock_mhz: float  # median over blocks of delta cycles / delta ns
    clock_min_mhz: float
    clock_max_mhz: float
    blocks: int
    span_ns: int  # median global-timer span of one block


def probe_unavailable_reason(device) -> str | None:
    if device.kind != "cuda":
        return f"no in-band probe on a {device.kind} device"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the in-band probe is a Triton kernel and triton is not installed (pip install triton)"
    return None


def summarize_probe_blocks(raw, offset_ns: int) -> ProbeReading | None:
    """Reduce one probe's per-block rows [t0, t1, c0, c1, smid] to a reading (pure; tested on CPU)."""
    rows = [r for r in raw if r[1] > r[0] and r[3] > r[2]]
    if not rows:
        return None
    clocks = sorted((r[3] - r[2]) / (r[1] - r[0]) * 1e3 for r in rows)
    spans = sorted(r[1] - r[0] for r in rows)
    mid = len(clocks) // 2
    median = clocks[mid] if len(clocks) % 2 else 0.5 * (clocks[mid - 1] + clocks[mid])
    t_mid = sorted((r[0] + r[1]) // 2 for r in rows)[len(rows) // 2]
    return ProbeReading(
        t_ns=int(t_mid + offset_ns), clock_mhz=median, clock_min_mhz=clocks[0], clock_max_mhz=clocks[-1],
        blocks=len(rows), span_ns=int(spans[len(spans) // 2]),
    )


_KERNEL = None


def _probe_kernel():
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def probe(out_ptr, spin_ns):
            pid = tl.program_id(0)
            t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
            c0 = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
            t1 = t0
            while t1 - t0 < spin_ns:
                t1 = tl.inline_asm_elementwise(
                    "{ nanosleep.u32 256; mov.u64 $0, %globaltimer; }", "=l", [], dtype=tl.int64, is_pure=False, pack=1
                )
            c1 = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
            sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
            base = out_ptr + pid * 5
            tl.store(base + 0, t0)
            tl.store(base + 1, t1)
            tl.store(base + 2, c0)
            tl.store(base + 3, c1)
            tl.store(base + 4, sm.to(tl.int64))

        _KERNEL = probe
    return _KERNEL


class InbandProbe:
    """Launch probes on a side stream every `period_s` from a host thread; read them back at `stop()`."""

    def __init__(self, device, *, period_s: float, spin_us: float, max_probes: int = 4096) -> None:
        import torch

        self._device = device
        self._period_s = period_s
        self._spin_ns = int(spin_us * 1000)
        self._blocks = device.identity().sm_count or 1
        self._buf = torch.zeros((max_probes, self._blocks, _FIELDS), dtype=torch.int64, device=device.torch_device)
        self._stream = torch.cuda.Stream(device=device.torch_device)
        self._count = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._offset_ns = 0
        self._kernel = _probe_kernel()

    def _launch(self) -> None:
        import torch

        if self._count >= self._buf.shape[0]:
            return
        with torch.cuda.stream(self._stream):
            self._kernel[(self._blocks,)](self._buf[self._count], self._spin_ns, num_warps=1)
        self._count += 1

    def calibrate(self) -> None:
        """Compile the probe and map the GPU's global timer onto the host's monotonic clock.

        Run once before the measured kernel starts (an idle GPU runs the probe at once, so the host time
        at completion bounds the mapping error by the synchronize latency).
        """
        self._launch()
        self._stream.synchronize()
        host = time.monotonic_ns()
        t1 = int(self._buf[0, :, 1].max())
        self._offset_ns = host - t1
        self._count = 0

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="inband-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self._launch()
            next_t += self._period_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> list[ProbeReading]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._stream.synchronize()
        raw = self._buf[: self._count].cpu().tolist()
        self._count = 0
        return [r for r in (summarize_probe_blocks(p, self._offset_ns) for p in raw) if r is not None]
