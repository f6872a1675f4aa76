"""The protocol of a run (the sustained protocol's defaults, or --quick's, with the options on top), the RunConfig of a
sustained run, the BurstConfig of `bench burst`, and `bench commits`'s protocol, input and CommitsConfig."""

from __future__ import annotations

from typing import Sequence

from harness.analysis import MIN_GATE_PILOT
from harness.commits import CommitsConfig
from harness.config import BurstConfig, BurstProtocol, RunConfig, SustainedProtocol
from harness.errors import ConfigError
from harness.inputs import AttentionShape, InputSpec
from harness.suite._checks import positive
from harness.suite._devices import kernel_specs
from harness.suite._inputs import BURST_INPUTS, synthetic_specs

__all__ = ["MAX_REPEATS", "ADAPTIVE_PILOT", "COMMITS_INPUT", "COMMITS_IDLE_S", "PROTOCOL_DEFAULTS", "QUICK_DEFAULTS",
           "BURST_DEFAULTS", "sustained_protocol", "sustained_config", "commits_protocol", "commits_config",
           "burst_protocol", "burst_config", "given_settings"]


# The protocols' own values (harness.config's dataclass fields): what help texts and docs quote, never retyped.
PROTOCOL_DEFAULTS = SustainedProtocol()
QUICK_DEFAULTS = SustainedProtocol.quick()
BURST_DEFAULTS = BurstProtocol()


# `--until-ci`: the cap on repeats, and the pilot whose spread (pilot - 1 df) sets how many: a pilot of 3
# (t 4.30) asks 2.4x the pairs a pilot of 5 (t 2.78) does (H200 fixture 20261203-131342-commits-*).
MAX_REPEATS = 10
ADAPTIVE_PILOT = 5


# One input per `bench commits` run: every revision is timed on it, interleaved.
COMMITS_INPUT = "gaussian:0.1"
# `bench commits` times the revisions back to back, their order alternating: no idle between them, so every window
# starts from the same hot card (an idle gap before a window put cuDNN into its 1 % faster state on the H200,
# docs/experiments/cudnn-two-states.md) and ten pairs fit in about two minutes of GPU time.
COMMITS_IDLE_S = 0.0


def commits_protocol(*, quick: bool, gated: bool, repeats: int | None, until_ci: float | None,
                     max_repeats: int | None, window_s: float | None, idle_s: float | None,
                     warmin_cap_s: float | None = None) -> SustainedProtocol:
    """`bench commits`'s protocol: no idle between revisions (COMMITS_IDLE_S), and under a gate a pilot of at least
    MIN_GATE_PILOT interleaved pairs (--quick too: a gate never judges fewer), refused by flag when asked lower."""
    if gated and repeats is not None and repeats < MIN_GATE_PILOT:
        raise ConfigError(f"--repeats {repeats}: a gate (--fail-on-slowdown) judges a pilot of at least "
                          f"{MIN_GATE_PILOT} interleaved pairs ({MIN_GATE_PILOT - 1} degrees of freedom; fewer "
                          f"leave a 4x slowdown unresolved). Give --repeats {MIN_GATE_PILOT} or more, or leave it "
                          f"out.")
    if gated and repeats is None:
        repeats = MIN_GATE_PILOT
    return sustained_protocol(quick=quick, repeats=repeats, until_ci=until_ci, max_repeats=max_repeats,
                              window_s=window_s, warmin_cap_s=warmin_cap_s,
                              idle_s=COMMITS_IDLE_S if idle_s is None else idle_s)


def sustained_protocol(*, quick: bool = False, repeats: int | None = None, window_s: float | None = None,
                       warmin_cap_s: float | None = None, idle_s: float | None = None, chunk_s: float | None = None,
                       sample_period_ms: float | None = None, probe: bool | None = None,
                       launch_timeout_s: float | None = None, until_ci: float | None = None,
                       max_repeats: int | None = None, l2: str | None = None,
                       threads: int | None = None, flag_prefix: str = "--") -> SustainedProtocol:
    """The protocol's defaults (or `--quick`'s) with the options given on top; 0 and negatives refused by flag.
    `until_ci` (a fraction) makes the repeats adaptive: `repeats` (default ADAPTIVE_PILOT, or --quick's) is the
    pilot, `max_repeats` (default MAX_REPEATS) the cap. `flag_prefix`: how the options are spelled where they were
    typed (the pytest plugin's are `--sustained-repeats`, `--sustained-window-s`)."""
    if max_repeats is not None and until_ci is None:
        raise ConfigError("--max-repeats caps the adaptive repeats of --until-ci; without --until-ci (it is off by "
                          "default, and under --quick) give the number of repeats with --repeats.")
    if until_ci is not None and repeats is None and not quick:
        repeats = ADAPTIVE_PILOT
    checks = (("repeats", repeats, False), ("window-s", window_s, False), ("warmin-cap-s", warmin_cap_s, False),
              ("idle-s", idle_s, True), ("chunk-s", chunk_s, False), ("sample-period-ms", sample_period_ms, False),
              ("launch-timeout-s", launch_timeout_s, False), ("max-repeats", max_repeats, False),
              ("threads", threads, False))  # threads None: 1 on the CPU (config.with_cpu_threads), torch's on a GPU
    for flag, value, zero_ok in checks:
        positive(value, flag_prefix + flag, allow_zero=zero_ok)
    overrides = {k: v for k, v in dict(
        repeats=repeats, window_s=window_s, warmin_cap_s=warmin_cap_s, idle_before_kernel_s=idle_s, chunk_s=chunk_s,
        sample_period_s=None if sample_period_ms is None else sample_period_ms / 1000, probe=probe,
        launch_timeout_s=launch_timeout_s, until_ci=until_ci,
        max_repeats=(max_repeats or MAX_REPEATS) if until_ci is not None else max_repeats, l2=l2, threads=threads,
    ).items() if v is not None}
    # The protocol's own checks name its fields; what the user typed were flags, so these two say so first.
    base = SustainedProtocol.quick() if quick else SustainedProtocol()
    which = " (with --quick)" if quick else ""
    if warmin_cap_s is not None and warmin_cap_s < base.warmin_min_s:
        raise ConfigError(f"--warmin-cap-s {warmin_cap_s:g} is below the warm-in's minimum of {base.warmin_min_s:g} s"
                          f"{which}: the cap would end the warm-in before it may settle. Give --warmin-cap-s "
                          f"{base.warmin_min_s:g} or more.")
    if chunk_s is not None and base.settle_trend_window_s < 2 * chunk_s:
        raise ConfigError(f"--chunk-s {chunk_s:g}: the settle rule fits a trend over the trailing "
                          f"{base.settle_trend_window_s:g} s{which}, which must span two chunks at least. Give --chunk-s "
                          f"{base.settle_trend_window_s / 2:g} or less.")
    return SustainedProtocol.quick(**overrides) if quick else SustainedProtocol(**overrides)


def given_settings(**settings) -> dict:
    """The settings a user gave, those left out (None) dropped, so each takes its one default where it is declared: a
    run's telemetry, results_dir, launch, gate and isolation in harness.config.RunSettings / RunWriting, and likewise
    other configs' fields and library functions' parameters (TraceConfig, SlurmOptions, peak_registry, ...)."""
    return {k: v for k, v in settings.items() if v is not None}


def sustained_config(*, kernels: Sequence[str] = (), inputs: Sequence[InputSpec], device: str,
                     protocol: SustainedProtocol, **settings) -> RunConfig:
    """The RunConfig of a sustained run: the named kernels, or the defaults for the device and the inputs' workload;
    settings left None take their config defaults (`given_settings`)."""
    return RunConfig(kernels=kernel_specs(kernels, device=device, shapes=[i.shape for i in inputs]),
                     inputs=tuple(inputs), device=device, protocol=protocol, **given_settings(**settings))


def commits_config(*, repo, kernel: str, revisions: Sequence[str], source: str | None, shape: AttentionShape,
                   dtype: str, seed: int, device: str, protocol: SustainedProtocol, layout: str | None = None,
                   gqa: str | None = None, **settings):
    """The CommitsConfig of `bench commits` / `bench bisect`: one kernel (with --layout / --gqa applied) on one input
    (`source`, default COMMITS_INPUT) at `shape`, every revision alike."""
    (kernel,) = kernel_specs([kernel], device=device, layout=layout, gqa=gqa)
    (spec,) = synthetic_specs([COMMITS_INPUT if source is None else source], shape=shape, dtype=dtype, seed=seed)
    return CommitsConfig(repo=repo, kernel=kernel, revisions=tuple(revisions), input=spec, device=device,
                         protocol=protocol, **given_settings(**settings))


def burst_protocol(*, warmup: int | None = None, timed: int | None = None, repeats: int | None = None,
                   idle_s: float | None = None, threads: int | None = None) -> BurstProtocol:
    """`bench burst`'s protocol: BurstProtocol's defaults (BURST_DEFAULTS) with the options given on top, refused by
    flag when out of range."""
    for flag, value, zero_ok in (("--warmup", warmup, True), ("--timed", timed, False), ("--repeats", repeats, False),
                                 ("--idle-s", idle_s, True), ("--threads", threads, False)):
        positive(value, flag, allow_zero=zero_ok)
    return BurstProtocol(**{k: v for k, v in dict(warmup_launches=warmup, timed_launches=timed, repeats=repeats,
                                                  idle_s=idle_s, threads=threads).items() if v is not None})


def burst_config(*, kernels: Sequence[str], sources: Sequence[str] | None, shape: AttentionShape, dtype: str, seed: int,
                 device: str, protocol: BurstProtocol, layout: str | None = None, gqa: str | None = None,
                 **settings) -> BurstConfig:
    """The BurstConfig of `bench burst`: the named kernels (or the device's for the workload) on `sources` (default
    BURST_INPUTS) at `shape`."""
    return BurstConfig(kernels=kernel_specs(kernels, device=device, layout=layout, gqa=gqa, shapes=[shape]),
                       inputs=synthetic_specs(BURST_INPUTS if not sources else sources, shape=shape, dtype=dtype,
                                              seed=seed),
                       device=device, protocol=protocol, **given_settings(**settings))
