"""Frozen run settings. Every value here is written into the results with each run.

Defaults are the protocol's (docs/protocol.md): 2 s idle before a kernel (5 s before a
new configuration), warm-in of at least 1 s in 0.5 s chunks until two consecutive chunks agree within
0.3 % and the trailing 2 s trend is flat, a 30 s cap, a 4 s window, 3 repeats with rotated order.

>>> from harness.config import SustainedProtocol
>>> p = SustainedProtocol()
>>> p.window_s, p.repeats
(4.0, 3)
>>> SustainedProtocol.quick().window_s < p.window_s
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from harness.errors import ConfigError
from harness.inputs import InputSpec

__all__ = ["SustainedProtocol", "BurstProtocol", "protocol_from_dict", "RunSettings", "RunWriting", "RunConfig",
           "BurstConfig", "LAUNCH_STRATEGIES", "check_launch", "RESULTS_ROOT", "ISOLATION_MODES", "check_isolation",
           "CPU_THREADS", "with_cpu_threads"]

LAUNCH_STRATEGIES = ("auto", "graph", "loop")


@dataclass(frozen=True, kw_only=True)
class _Protocol:
    """What the run loop (harness.runner._loop) reads from either protocol."""

    repeats: int = 3  # of every kernel x input
    sample_period_s: float = 0.010  # the telemetry thread's poll period
    # The watchdog: a step that takes longer is stopped and recorded as `timeout` for that kernel x input
    # (harness.runner._endings says what it cannot stop).
    launch_timeout_s: float = 60.0
    # The cache state of the timed launches: "warm" (back to back on one copy of the inputs, so a small input is
    # read from L2) or "cold" (launches rotate through copies of the inputs that together exceed twice the L2,
    # nothing flushed inside the timed stream: harness.runner._l2).
    l2: str = "warm"
    # torch's CPU threads in every process that runs kernels (torch.set_num_threads, `--threads`). None: as torch
    # set them. A CPU run resolves None to CPU_THREADS (`with_cpu_threads`), so its times are one core's and calm on
    # a shared machine (torch's default of one thread per core stalled kernels for seconds under load).
    threads: int | None = None
    # What the run loop reads of either protocol: fixed for a burst (kernel order rotated, inputs not interleaved,
    # repeats not adaptive), fields the user sets in SustainedProtocol.
    rotate_order: ClassVar[bool] = True
    interleave_inputs: ClassVar[bool] = False
    until_ci: ClassVar[float | None] = None

    def _check_shared(self) -> None:
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise ConfigError(f"--threads {self.threads!r}: a whole number of CPU threads, at least 1 (default 1 on "
                              f"the CPU; on a GPU torch's own).")
        if self.l2 not in ("warm", "cold"):
            raise ConfigError(f"--l2 {self.l2!r}: warm (launches back to back on one copy of the inputs) or cold "
                              f"(launches rotate through copies that exceed the cache).")

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        """The protocol values a run records (its `protocol_json`)."""
        return dataclasses.asdict(self)

    def to_dict(self) -> dict:
        """A JSON-ready dict, its `kind` named, that `protocol_from_dict` rebuilds an equal protocol from."""
        return {"kind": "sustained", **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class SustainedProtocol(_Protocol):
    """The sustained protocol's settings (times in seconds, tolerances as fractions). The watchdog's step
    is a kernel's first call (in the gate) or one chunk."""

    idle_before_kernel_s: float = 2.0
    idle_before_config_s: float = 5.0
    warmin_min_s: float = 1.0
    chunk_s: float = 0.5
    settle_chunk_tol: float = 0.003  # two consecutive chunks agree within this (the paper's rule) ...
    # ... applied to blocks of this many chunks: the H200 at its power cap cycles with a ~1 s period, so
    # single 0.5 s chunks alternate by ~1 % (sdpa-flash never settled in 12 s with blocks of one).
    settle_block_chunks: int = 2
    settle_trend_window_s: float = 2.0  # ... and the least-squares trend over this trailing window
    settle_trend_tol: float = 0.003  # changes time per launch by less than this across the window
    warmin_cap_s: float = 30.0
    window_s: float = 4.0
    rotate_order: bool = True
    # The inputs a run compares with each other (a capture and its controls: same layer tag, shape and dtype)
    # are timed in turn within every repeat, so their comparison pairs by repeat (runner._loop.comparison_groups).
    interleave_inputs: bool = True
    graph_replay_s: float = 0.025  # launches per CUDA graph chosen so one replay lasts about this long
    max_graph_launches: int = 2000
    probe: bool = True  # in-band clock probe on a side stream during the window (CUDA only)
    probe_period_s: float = 0.1
    probe_spin_us: float = 200.0
    # Adaptive repeats (Stein's two-stage rule, harness.analysis._interval): `repeats` is then the pilot, whose
    # spread sets how many repeats (at most `max_repeats`) the interval needs to be no wider than `until_ci`.
    until_ci: float | None = None
    max_repeats: int | None = None

    def __post_init__(self) -> None:
        self._check_shared()
        positive = ("chunk_s", "window_s", "sample_period_s", "graph_replay_s", "probe_period_s", "probe_spin_us",
                    "launch_timeout_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ConfigError(f"Protocol setting {name} must be > 0, got {getattr(self, name)!r}.")
        for name in ("idle_before_kernel_s", "idle_before_config_s", "warmin_min_s", "settle_chunk_tol", "settle_trend_tol"):
            if getattr(self, name) < 0:
                raise ConfigError(f"Protocol setting {name} must be >= 0, got {getattr(self, name)!r}.")
        if self.settle_block_chunks < 1:
            raise ConfigError(f"Protocol setting settle_block_chunks must be >= 1, got {self.settle_block_chunks}.")
        if self.repeats < 1:
            raise ConfigError(f"Protocol setting repeats must be >= 1, got {self.repeats}.")
        if self.until_ci is not None:
            if not self.until_ci > 0:
                raise ConfigError(f"--until-ci must be above 0, got {self.until_ci!r}.")
            if self.repeats < 2 or self.max_repeats is None or self.max_repeats < self.repeats:
                raise ConfigError(
                    f"Adaptive repeats (--until-ci) start from a pilot of --repeats {self.repeats} (at least 2) and "
                    f"stop at --max-repeats {self.max_repeats} (at least the pilot); give --max-repeats >= --repeats.")
        if self.warmin_cap_s < self.warmin_min_s:
            raise ConfigError(
                f"warmin_cap_s ({self.warmin_cap_s}) is below warmin_min_s ({self.warmin_min_s}): the cap would "
                f"stop the warm-in before its minimum. Raise the cap or lower the minimum."
            )
        if self.settle_trend_window_s < 2 * self.chunk_s:
            raise ConfigError(
                f"settle_trend_window_s ({self.settle_trend_window_s}) must span at least two chunks "
                f"({2 * self.chunk_s} s) to fit a trend."
            )

    @classmethod
    def quick(cls, **overrides) -> "SustainedProtocol":
        """A short protocol for CPU dry runs and CI smoke tests. Its numbers are not sustained figures.

        It checks that every stage runs (idle, warm-in, window, repeats, telemetry, the report), not a clock: a
        0.2 s window of a CPU kernel is hundreds of launches, and the warm-in's trend needs its two chunks. (It was
        0.4 s windows after at least 0.3 s of warm-in, which put 0.6 s or more on every kernel, input and repeat
        of a smoke test while judging nothing more; a 1.5x slowdown is as plain in 0.2 s as in 0.4 s.) The warm-in
        is capped at 0.5 s (it was 2 s): no GPU's clock settles in a quick run either way (attention's settles over
        2-9 s), and on the CPU a quick warm-in that settles does so in 0.2-0.5 s, while a third of them never did and
        burned the whole 2 s (33 warm-ins of the CPU suite, 2026-12-05: 17 settled by 0.51 s, 5 at 0.95-2.0 s, 11
        capped)."""
        base = dict(
            idle_before_kernel_s=0.1, idle_before_config_s=0.2, warmin_min_s=0.1, chunk_s=0.1,
            settle_chunk_tol=0.05, settle_trend_window_s=0.2, settle_trend_tol=0.05, settle_block_chunks=1, warmin_cap_s=0.5,
            window_s=0.2, repeats=2, probe=False,
        )
        base.update(overrides)
        return cls(**base)


@dataclass(frozen=True, kw_only=True)
class BurstProtocol(_Protocol):
    """The burst protocol's settings: warm-up launches, then timed ones (harness.runner.run_burst). The
    watchdog's step is one measurement, its warm-up and timed launches."""

    warmup_launches: int = 500
    timed_launches: int = 100
    idle_s: float = 2.0  # before each measurement, as in the sustained protocol: every burst starts rested
    launch_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        self._check_shared()
        if self.warmup_launches < 0 or self.timed_launches < 1 or self.repeats < 1:
            raise ConfigError("Burst protocol: warm-up launches >= 0, timed launches >= 1 and repeats >= 1.")
        if self.idle_s < 0 or not self.sample_period_s > 0:
            raise ConfigError("Burst protocol: idle_s >= 0 and sample_period_s > 0.")
        if not self.launch_timeout_s > 0:
            raise ConfigError(f"Burst protocol: launch_timeout_s must be > 0, got {self.launch_timeout_s!r}.")

    def as_dict(self) -> dict:
        return {"kind": "burst", **super().as_dict()}

    def to_dict(self) -> dict:
        return self.as_dict()


ISOLATION_MODES = ("auto", "process", "none")


def check_isolation(mode: str) -> None:
    if mode not in ISOLATION_MODES:
        raise ConfigError(f"--isolation {mode!r}: one of {', '.join(ISOLATION_MODES)} (auto: a user's kernel in a "
                          f"process of its own, the bundled ones in the run's; process: every kernel in its own; "
                          f"none: every kernel in the run's process).")


def check_launch(launch: str, device: str) -> None:
    """`--launch` against the device, before anything runs: graphs are CUDA's (and HIP's), so `--launch graph`
    on the CPU would otherwise fail once per kernel after the gate."""
    if launch not in LAUNCH_STRATEGIES:
        raise ConfigError(f"--launch {launch!r} is not one of {', '.join(LAUNCH_STRATEGIES)}.")
    if launch == "graph" and str(device).partition(":")[0] == "cpu":
        raise ConfigError("--launch graph replays CUDA graphs, which --device cpu does not have. Use --launch loop "
                          "(or auto, which loops on the CPU and uses a graph where one captures).")


# torch's CPU threads of a CPU run unless --threads says otherwise (the `threads` protocol value).
CPU_THREADS = 1


def with_cpu_threads(protocol, device: str):
    """`protocol` with its `threads` resolved: CPU_THREADS on the CPU where none was given; unchanged elsewhere."""
    if protocol.threads is None and str(device).partition(":")[0] == "cpu":
        return protocol.replace(threads=CPU_THREADS)
    return protocol


# Where runs are recorded unless told otherwise: `results/` of the working directory (harness.suite re-exports it).
RESULTS_ROOT = Path("results")


def protocol_from_dict(d: dict) -> "SustainedProtocol | BurstProtocol":
    """The protocol `to_dict` wrote: its `kind` names the class (sustained when absent, as in older rows)."""
    kinds = {"sustained": SustainedProtocol, "burst": BurstProtocol}
    kind = d.get("kind", "sustained")
    if kind not in kinds:
        raise ConfigError(f"A protocol of kind {kind!r}: one of {', '.join(kinds)}.")
    return kinds[kind](**{k: v for k, v in d.items() if k != "kind"})


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """The settings every config that times kernels shares (RunConfig, BurstConfig, harness.commits.CommitsConfig,
    harness.runner.InModelConfig): declared once, checked once. No field has a default device: harness.suite
    decides it (DEFAULT_DEVICE) and builds every config."""

    device: str
    telemetry: str = "auto"  # "auto" = the device's own backend (nvml on CUDA, host on CPU), never a fallback
    results_dir: Path = RESULTS_ROOT
    launch: str = "auto"  # LAUNCH_STRATEGIES
    gate: bool = True
    allow_busy: bool = False

    def __post_init__(self) -> None:
        # Resolved once, at the start: a kernel that changes the working directory cannot move the results.
        object.__setattr__(self, "results_dir", Path(self.results_dir).absolute())
        check_launch(self.launch, self.device)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def settings(self) -> dict:
        """The shared fields by name: what a config hands on to the RunConfig it runs (commits, in-model)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(RunSettings)}

    def _settings_dict(self) -> dict:
        """The shared fields, JSON-ready (what `from_dict` of every subclass reads back)."""
        return self.settings() | {"results_dir": str(self.results_dir)}


@dataclass(frozen=True, kw_only=True)
class RunWriting(RunSettings):
    """What a config that writes a run of its own adds: its name, notes, and where its kernels run."""

    run_name: str | None = None
    notes: str = ""
    # Where kernels run: "auto" (a user's kernel in a process of its own, the bundled ones in the run's),
    # "process" (every kernel in its own), "none" (all in the run's process). docs/kernels.md: Isolation.
    isolation: str = "auto"

    def __post_init__(self) -> None:
        check_isolation(self.isolation)
        super().__post_init__()


def _inputs_from(d: dict) -> tuple[InputSpec, ...]:
    return tuple(InputSpec.from_dict(i) for i in d["inputs"])


@dataclass(frozen=True, kw_only=True)
class RunConfig(RunWriting):
    """One `bench sustained` invocation: which kernels on which inputs, where, and how (built by harness.suite)."""

    kernels: tuple[str, ...]
    inputs: tuple[InputSpec, ...]
    protocol: SustainedProtocol = field(default_factory=SustainedProtocol)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "protocol", with_cpu_threads(self.protocol, self.device))
        if not self.kernels:
            raise ConfigError("No kernels given: name at least one with --kernel (see `bench list kernels`).")
        if not self.inputs:
            raise ConfigError("No inputs given: name at least one input source with --input (e.g. gaussian:0.1).")
        if len(set(self.kernels)) != len(self.kernels):
            raise ConfigError(f"Kernel list {list(self.kernels)} names a kernel twice.")

    def to_dict(self) -> dict:
        """A JSON-ready dict from which `from_dict` rebuilds an equal RunConfig (across processes)."""
        return {**self._settings_dict(), "run_name": self.run_name, "notes": self.notes, "isolation": self.isolation,
                "kernels": list(self.kernels), "inputs": [i.to_dict() for i in self.inputs],
                "protocol": self.protocol.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        return cls(**{**d, "kernels": tuple(d["kernels"]), "inputs": _inputs_from(d),
                      "protocol": protocol_from_dict(d["protocol"]), "results_dir": Path(d["results_dir"])})


@dataclass(frozen=True, kw_only=True)
class BurstConfig(RunWriting):
    """One `bench burst` invocation (harness.runner.run_burst); `into` appends to an existing run directory."""

    kernels: tuple[str, ...]
    inputs: tuple[InputSpec, ...]
    protocol: BurstProtocol = field(default_factory=BurstProtocol)
    into: Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "protocol", with_cpu_threads(self.protocol, self.device))
        if self.into is not None:
            object.__setattr__(self, "into", Path(self.into).absolute())
        if not self.kernels or not self.inputs:
            raise ConfigError("bench burst needs at least one --kernel and one --input.")

    def to_dict(self) -> dict:
        return {**self._settings_dict(), "run_name": self.run_name, "notes": self.notes, "isolation": self.isolation,
                "kernels": list(self.kernels), "inputs": [i.to_dict() for i in self.inputs],
                "protocol": self.protocol.to_dict(), "into": None if self.into is None else str(self.into)}

    @classmethod
    def from_dict(cls, d: dict) -> "BurstConfig":
        return cls(**{**d, "kernels": tuple(d["kernels"]), "inputs": _inputs_from(d),
                      "protocol": protocol_from_dict(d["protocol"]), "results_dir": Path(d["results_dir"]),
                      "into": None if d.get("into") is None else Path(d["into"])})
