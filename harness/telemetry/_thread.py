"""The sampler thread: polls a Sampler at a fixed period and keeps every Sample in one time base
(the package's docstring has a runnable example)."""

from __future__ import annotations

import bisect
import threading
import time
from typing import Callable

from harness.errors import ConfigError
from harness.telemetry._sample import Sample, Sampler

__all__ = ["SamplerThread"]

_STOP_TIMEOUT_S = 10.0


class SamplerThread:
    """Calls `sampler.read()` every `period_s` and `sampler.drain()` every `drain_period_s` on a daemon thread.

    Deadlines are absolute (tick n is due at start + n * period), so the period does not drift with
    the time each read takes. A late thread skips the ticks it missed instead of reading in a burst:
    a burst would put several samples at nearly the same instant and none in the gap. A read that
    raises becomes a Sample with `error` set, and polling carries on.

    The thread does not open or close the sampler: whoever created it does, so `describe()` can be
    stored with the run before sampling starts.

    For tests, inject `clock` (integer ns) and `sleep` (seconds); or skip the thread and call `tick()`.
    """

    def __init__(
        self,
        sampler: Sampler,
        *,
        period_s: float = 0.010,
        drain_period_s: float = 0.1,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        if not period_s > 0 or not drain_period_s > 0:
            raise ConfigError(
                f"The telemetry periods must be positive (period_s={period_s}, drain_period_s={drain_period_s})."
            )
        self.sampler = sampler
        self.period_ns = max(1, round(period_s * 1e9))
        self.drain_period_ns = max(1, round(drain_period_s * 1e9))
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        self._last_poll: Sample | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._abandoned = False
        self._start_ns: int | None = None
        self._poll_n = 0  # index of the next poll tick
        self._drain_n = 0
        self._skipped = 0

    # -- one iteration ---------------------------------------------------------------------------

    def tick(self) -> float:
        """Do whatever is due now (a read, a drain, or both); return seconds until the next deadline."""
        now = self._clock()
        if self._start_ns is None:
            self._start_ns = now
        start = self._start_ns
        if now >= start + self._poll_n * self.period_ns:
            self._poll(now)
            # Next tick is the first one after the read finished; the ones in between are skipped.
            following = (self._clock() - start) // self.period_ns + 1
            self._skipped += max(0, following - self._poll_n - 1)
            self._poll_n = max(following, self._poll_n + 1)
        now = self._clock()
        if now >= start + self._drain_n * self.drain_period_ns:
            self._drain(now)
            self._drain_n = max((self._clock() - start) // self.drain_period_ns + 1, self._drain_n + 1)
        due = min(start + self._poll_n * self.period_ns, start + self._drain_n * self.drain_period_ns)
        return max(0.0, (due - self._clock()) / 1e9)

    def _poll(self, now: int) -> None:
        try:
            sample = self.sampler.read()
        except Exception as e:
            sample = Sample(t_ns=now, source="poll", error=f"{type(e).__name__}: {e}")
        with self._lock:
            if self._abandoned:
                return
            self._samples.append(sample)
            self._last_poll = sample

    def _drain(self, now: int) -> None:
        try:
            got = list(self.sampler.drain())
        except Exception as e:
            got = [Sample(t_ns=now, source="drain", error=f"{type(e).__name__}: {e}")]
        with self._lock:
            if not self._abandoned:
                self._samples.extend(got)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        sleep = self._sleep if self._sleep is not None else self._stop_event.wait
        while True:  # at least one tick, however soon stop() comes
            wait = self.tick()
            if self._stop_event.is_set():
                break
            if wait > 0:
                sleep(wait)
        # Collect what the driver buffered up to the stop, from this same thread (some backends
        # misbehave when read from two threads).
        self._drain(self._clock())

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("SamplerThread.start() called twice; create a new SamplerThread per run.")
        self._thread = threading.Thread(target=self._run, name=f"telemetry-{self.sampler.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and join the thread (idempotent). A read stuck for over 10 s is abandoned, with an error sample."""
        thread = self._thread
        if thread is None:
            return
        self._stop_event.set()
        if thread is threading.current_thread():
            return
        thread.join(_STOP_TIMEOUT_S)
        if thread.is_alive():
            with self._lock:
                if not self._abandoned:
                    self._samples.append(
                        Sample(
                            t_ns=self._clock(),
                            source="poll",
                            error=f"the {self.sampler.name} sampler did not return within {_STOP_TIMEOUT_S:.0f} s "
                            "of stop(); its thread was abandoned",
                        )
                    )
                    self._abandoned = True

    def __enter__(self) -> SamplerThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- results ---------------------------------------------------------------------------------

    def mark(self) -> int:
        """The clock's now, in the samples' time base: the runner marks window edges with it."""
        return self._clock()

    @property
    def skipped_ticks(self) -> int:
        """Poll ticks skipped because a read (or the thread's wake-up) was late."""
        return self._skipped

    def samples(self) -> list[Sample]:
        """Every sample so far, sorted by t_ns (buffered readings arrive late, so append order is not time order)."""
        with self._lock:
            out = list(self._samples)
        out.sort(key=lambda s: s.t_ns)
        return out

    def samples_between(self, t0_ns: int, t1_ns: int) -> list[Sample]:
        """Samples with t0_ns <= t_ns < t1_ns: half-open, so adjacent windows share no sample."""
        ordered = self.samples()
        lo = bisect.bisect_left(ordered, t0_ns, key=lambda s: s.t_ns)
        hi = bisect.bisect_left(ordered, t1_ns, key=lambda s: s.t_ns)
        return ordered[lo:hi]

    def last_poll(self) -> Sample | None:
        """The newest poll sample (possibly an error sample), for a live display; None before the first."""
        with self._lock:
            return self._last_poll
