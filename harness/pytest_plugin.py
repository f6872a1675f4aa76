"""pytest plugin: the `sustained` fixture, sustained-clock kernel timing on top of pytest-benchmark.

    def test_fa(sustained):
        sustained(my_attn, inputs=spec)   # a plain attention function, a Kernel or a kernel name;
                                          # an InputSpec or AttentionInputs; layout="bshd", gqa="expand"

The fixture runs the harness's sustained protocol (idle, warm-in until the clock settles, timed
windows, repeats) through `run_sustained`, then hands pytest-benchmark the windows' per-chunk times:
each round is one window chunk and its value the device time per launch over that chunk. So
`--benchmark-autosave`, `--benchmark-compare` and `--benchmark-compare-fail=median:5%` work unchanged,
and `extra_info` carries what pytest-benchmark cannot see: clock (NVML and in-band), power, cycles
per launch, limiter, settled-after, and the results run the figures came from.

How the times get in: pytest-benchmark times a callable itself (`benchmark(fn)`, `benchmark.pedantic`)
with a host timer, which would time the launches' host side, not the kernel, and not at a settled
clock. Its fixture records statistics through `_make_stats(iterations)`, which creates the
`Metadata` (stats + options), registers it with the session and sets `benchmark.stats`; every
`stats.update(seconds)` adds one round. That is the path pytest-benchmark's own modes take, so saved
JSON, comparisons and `--benchmark-compare-fail` see ordinary rounds. It is a private method; the
alternatives (a replaying fake `timer` passed to `pedantic`, or assembling `Metadata` by hand) lean
on private behaviour as much and are harder to read. The fixture also sets the fixture's mode, so a
second use in one test fails as pytest-benchmark's own modes do. Because these are private, the supported
pytest-benchmark range is pinned in pyproject.toml (`PYTEST_BENCHMARK_RANGE`) and checked when the
fixture is first used.

Each test's figures are also printed in a "sustained" section of the terminal summary (ms, clocks,
cycles, power, limiter), and each run is kept under --sustained-results (default `.bench-results` in
the rootdir, not pytest's temporary directory), so the figures can be re-read with `bench report`.
pytest-benchmark options that time its own loop (--benchmark-min-time, -max-time, -min-rounds, -timer,
-warmup, -disable-gc, -calibration-precision, -cprofile...) do not apply to the sustained protocol; when
given, a warning says they are ignored and which `--sustained-*` option to use instead.

`--sustained-compare-fail=PCT` (with `--benchmark-compare`) judges each test's repeats (`extra_info["repeats_rows"]`)
by the harness's own interval, as `bench compare` does, where `--benchmark-compare-fail` judges window chunks
that share a clock; a test `slower` beyond PCT makes the session exit 1 (`harness.report.saved_comparison`).

Options: --sustained-device, --sustained-quick, --sustained-telemetry, --sustained-results,
--sustained-repeats, --sustained-window-s, --sustained-no-gate, --sustained-allow-busy, --sustained-compare-fail,
--sustained-unresolved.
Importing this module imports pytest only; torch and the harness load when a test uses the fixture.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import warnings
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path

import pytest

from harness.devices import open_device
from harness.errors import ConfigError, HarnessError
from harness.inputs import AttentionInputs, InputSpec, register_source
from harness.kernels import Kernel, KernelRegistry, adapt_callable, default_registry, spec_with_options
from harness.report import fixture_extra_info, saved_commit_text, saved_comparison, summary_line
from harness.results import read_rows
from harness.runner import check_kernel, run_sustained
from harness.suite import (
    machine_device,
    run_device,
    sustained_config,
    sustained_protocol,
    unresolved_policy,
    verdict_rule,
)

__all__ = ["SustainedResult", "sustained", "pytest_addoption", "pytest_terminal_summary", "pytest_sessionfinish",
           "STATS_NOTE",
           "IGNORED_BENCHMARK_OPTIONS", "RESULTS_DEFAULT", "PYTEST_BENCHMARK_RANGE", "IgnoredOptionWarning"]

STATS_NOTE = ("rounds are the timed windows' chunks of every repeat; each value is the device time per launch over "
              "that chunk, in seconds, measured at a settled clock by the harness's sustained protocol")
_given = itertools.count()
_DEVICES = pytest.StashKey[set]()  # GPU models the fixture measured on in this session
_LINES = pytest.StashKey[list]()  # (nodeid, extra_info) of every sustained test, for the terminal summary
_WARNED = pytest.StashKey[bool]()
_VERDICTS = pytest.StashKey[list]()  # the sentences, then the gate line, of --sustained-compare-fail
RESULTS_DEFAULT = ".bench-results"
PYTEST_BENCHMARK_RANGE = (">=5.2", "<5.3")  # keep in step with pyproject.toml: the private API used is checked there
IGNORED_BENCHMARK_OPTIONS = {
    "--benchmark-min-time": "the sustained protocol's chunk size (--sustained-quick for short runs)",
    "--benchmark-max-time": "--sustained-window-s",
    "--benchmark-min-rounds": "--sustained-repeats (rounds are window chunks)",
    "--benchmark-timer": "nothing: device time comes from the harness's events",
    "--benchmark-calibration-precision": "nothing: launches per chunk are sized by the protocol",
    "--benchmark-warmup": "nothing: warm-in runs until the clock settles",
    "--benchmark-warmup-iterations": "nothing: warm-in runs until the clock settles",
    "--benchmark-disable-gc": "nothing: launches are captured in a CUDA graph",
    "--benchmark-cprofile": "nothing: `bench trace` profiles kernels",
    "--benchmark-cprofile-loops": "nothing", "--benchmark-cprofile-top": "nothing",
    "--benchmark-cprofile-dump": "nothing",
}


class IgnoredOptionWarning(UserWarning):
    """A pytest-benchmark option that the sustained fixture does not use was given."""


def pytest_addoption(parser) -> None:
    group = parser.getgroup("sustained", "sustained-clock kernel benchmarks (harness `sustained` fixture)")
    group.addoption("--sustained-device", default=None, help="cpu, cuda:N, rocm:N or cuda:/rocm:<PCI bus id> "
                    "(default: this machine's own, harness.suite.machine_device: cuda:0 where PyTorch sees a CUDA "
                    "GPU, rocm:0 on its ROCm build, else cpu)")
    group.addoption("--sustained-quick", action="store_true", help="short protocol for dry runs (not sustained figures)")
    group.addoption("--sustained-telemetry", default="auto", help="auto, nvml, host or none")
    group.addoption("--sustained-results", default=None, help=f"keep each test's results run here (default: "
                    f"{RESULTS_DEFAULT} in the rootdir; runs persist between sessions)")
    group.addoption("--sustained-repeats", type=int, default=None, help="repeats per test (default: the protocol's)")
    group.addoption("--sustained-window-s", type=float, default=None, help="timed window per repeat, seconds")
    group.addoption("--sustained-no-gate", action="store_true", help="skip the correctness gate before timing")
    group.addoption("--sustained-allow-busy", action="store_true", help="time even if other processes use the GPU "
                    "(recorded)")
    group.addoption("--sustained-compare-fail", default=None, metavar="PCT",
                    help="with --benchmark-compare: exit 1 when a test is slower than the saved one beyond PCT (e.g. "
                         "2%), judged on its repeats by the harness's interval (not pytest-benchmark's chunk stats)")
    group.addoption("--sustained-unresolved", default=None, choices=("fail", "pass"),
                    help="what --sustained-compare-fail does with a test it could not judge at its threshold: fail "
                         "(the default: the session exits 1) or pass")


def _device(config) -> str:
    """--sustained-device (checked, a ConfigError naming the flag), else this machine's own device: the suite's."""
    spec = config.getoption("sustained_device")
    return run_device(spec, flag="--sustained-device") if spec else machine_device()


def _protocol(config):
    """The protocol of the session's options, built by the suite as `bench sustained` builds its own (values refused
    by their flags, --sustained-repeats / --sustained-window-s)."""
    return sustained_protocol(quick=config.getoption("sustained_quick"), repeats=config.getoption("sustained_repeats"),
                              window_s=config.getoption("sustained_window_s"), flag_prefix="--sustained-")


@dataclass(frozen=True, kw_only=True)
class SustainedResult:
    """What one `sustained(...)` call measured: the results run, its timed rows and the extra_info given."""

    run_dir: Path | None
    rows: tuple[dict, ...] = ()
    chunk_times_s: tuple[float, ...] = ()
    extra_info: dict = field(default_factory=dict)


def _kernel_and_registry(kernel, *, layout: str | None = None, gqa: str | None = None):
    if isinstance(kernel, str):
        registry = default_registry()
        return registry.get(spec_with_options(kernel, layout=layout, gqa=gqa)), registry
    if isinstance(kernel, Kernel):
        if layout or gqa:
            raise TypeError("sustained(kernel, layout=/gqa=): a Kernel declares its own layout; pass a plain function")
    elif callable(kernel) and not isinstance(kernel, type):
        kernel = adapt_callable(kernel, options={k: v for k, v in dict(layout=layout, gqa=gqa).items() if v})
    else:
        raise TypeError(f"sustained(kernel, inputs): kernel must be an attention function, a harness.kernels.Kernel "
                        f"or a kernel name, not {type(kernel).__name__}")
    registry = KernelRegistry()
    registry.add(kernel)
    return kernel, registry


def _input_spec(inputs):
    """An InputSpec as given, or one whose source hands back the given AttentionInputs (moved to the device)."""
    if isinstance(inputs, InputSpec):
        return inputs
    if isinstance(inputs, AttentionInputs):
        prefix = f"pytest-given-{next(_given)}"
        given = inputs

        def load(spec, device):
            return replace(given, q=given.q.to(device), k=given.k.to(device), v=given.v.to(device))

        register_source(prefix, load)
        return InputSpec(shape=inputs.shape, dtype=inputs.dtype, source=f"{prefix}:{inputs.source}",
                         seed=inputs.seed or 0, scale=inputs.scale, name=f"given:{inputs.source}")
    raise TypeError(f"sustained(kernel, inputs): inputs must be a harness.inputs.InputSpec or AttentionInputs, "
                    f"not {type(inputs).__name__}")


def _window_chunk_times(run_dir: Path, ids: set[str]) -> list[float]:
    """Per-launch seconds of every window chunk of the timed measurements, in order (pyarrow only)."""
    rows = read_rows(run_dir, "chunks")
    rows = [r for r in rows if r["phase"] == "window" and r["measurement_id"] in ids and r["time_ns"]]
    rows.sort(key=lambda r: (r["measurement_id"], r["chunk_index"]))
    return [r["time_ns"] * 1e-9 for r in rows]


class _Sustained:
    """The callable the fixture returns; one use per test, like pytest-benchmark's own fixture."""

    def __init__(self, benchmark, request, results_root: Path) -> None:
        self._benchmark, self._request, self._root = benchmark, request, results_root

    def __call__(self, kernel, inputs, *, protocol=None, launch: str = "auto", layout: str | None = None,
                 gqa: str | None = None) -> SustainedResult:
        bench, config = self._benchmark, self._request.config
        if bench._mode:
            raise pytest.UsageError(f"The benchmark fixture of this test was already used in {bench._mode} mode; "
                                    f"call sustained(...) once per test (parametrize for several inputs).")
        _warn_ignored_options(config)
        try:
            _check_benchmark_version()
            k, registry = _kernel_and_registry(kernel, layout=layout, gqa=gqa)
            device = _device(config)
        except HarnessError as exc:  # an unknown name lists the known ones; a misfit names the signature
            _fail(bench, f"sustained: {exc}")
        spec = _input_spec(inputs)
        if bench.disabled:  # --benchmark-disable, or xdist: once, untimed, as pytest-benchmark does, but gated
            bench._mode = "sustained(...)"
            try:
                check_kernel(k, spec, device=device, gate=not config.getoption("sustained_no_gate"))
            except HarnessError as exc:
                _fail(bench, f"sustained (benchmarks disabled, the gate still runs): {exc}")
            return SustainedResult(run_dir=None)
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self._request.node.name).strip("-")[:60] or "test"
        bench._mode = "sustained(...)"
        try:
            proto = protocol or _protocol(config)
            run = sustained_config(kernels=(k.name,), inputs=(spec,), device=device, protocol=proto,
                                   telemetry=config.getoption("sustained_telemetry"), results_dir=self._root,
                                   run_name=name, launch=launch, gate=not config.getoption("sustained_no_gate"),
                                   allow_busy=config.getoption("sustained_allow_busy"),
                                   notes=f"pytest {self._request.node.nodeid}")
            result = run_sustained(run, registry=registry, command=f"pytest {self._request.node.nodeid}")
        except HarnessError as exc:  # a message the user can act on; a traceback into the runner would hide it
            _fail(bench, f"sustained: {exc}")
        rows = [r for r in result.measurements if r.get("status") in ("ok", "unsettled") and r.get("time_ns")]
        if not rows:
            why = "; ".join(r.get("error") or r.get("status", "?") for r in result.measurements) or "no measurement"
            _fail(bench, f"sustained: kernel {k.name!r} on {spec.label} was not timed: {why}")
        times = _window_chunk_times(result.path, {r["measurement_id"] for r in rows})
        stats = bench._make_stats(1)  # one launch per value: the chunk times are already per launch
        # The fixture's host timer timed nothing here; say what did, in the saved JSON's options.
        stats.options = {**stats.options, "timer": "harness sustained protocol: device time per launch per window chunk"}
        for t in times:
            stats.update(t)
        extra = fixture_extra_info(rows, result.info, spec, k, result.path, proto,
                                   config.getoption("sustained_quick"), stats_note=STATS_NOTE)
        bench.extra_info.update(extra)
        config.stash.setdefault(_DEVICES, set()).add(str(result.info.get("device_name")))
        config.stash.setdefault(_LINES, []).append((self._request.node.nodeid, extra))
        return SustainedResult(run_dir=result.path, rows=tuple(rows), chunk_times_s=tuple(times), extra_info=extra)


def _fail(bench, text: str):
    bench.has_error = True
    pytest.fail(text, pytrace=False)


@pytest.fixture
def sustained(benchmark, request):
    """`sustained(kernel, inputs)`: time a kernel at sustained clocks and report it through pytest-benchmark."""
    option = request.config.getoption("sustained_results")
    root = Path(option) if option else request.config.rootpath / RESULTS_DEFAULT
    return _Sustained(benchmark, request, root)


def _check_benchmark_version() -> None:
    have = version("pytest-benchmark")
    parts = tuple(int(p) for p in have.split(".")[:2] if p.isdigit())
    low, high = (tuple(int(p) for p in b.lstrip("<>=").split(".")) for b in PYTEST_BENCHMARK_RANGE)
    if not (low <= parts < high):
        raise ConfigError(
            f"The sustained fixture records its rounds through pytest-benchmark internals checked with "
            f"pytest-benchmark {','.join(PYTEST_BENCHMARK_RANGE)}; this environment has {have}. Install a version "
            f"in that range (pip install 'pytest-benchmark{','.join(PYTEST_BENCHMARK_RANGE)}')."
        )


def _given_options(config) -> list[str]:
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    try:
        args += list(config.getini("addopts"))
    except (ValueError, KeyError):
        pass
    return [a.split("=", 1)[0] for a in args if isinstance(a, str) and a.startswith("--benchmark-")]


def _warn_ignored_options(config) -> None:
    if config.stash.get(_WARNED, False):
        return
    config.stash[_WARNED] = True
    ignored = sorted({a for a in _given_options(config) if a in IGNORED_BENCHMARK_OPTIONS})
    if ignored:
        instead = "; ".join(f"{a}: {IGNORED_BENCHMARK_OPTIONS[a]}" for a in ignored)
        warnings.warn(IgnoredOptionWarning(
            f"The sustained fixture ignores {', '.join(ignored)}: they set pytest-benchmark's own timing loop, which "
            f"the sustained protocol replaces. Use instead: {instead}."), stacklevel=3)


def pytest_sessionfinish(session, exitstatus) -> None:
    config = session.config
    text = config.getoption("sustained_compare_fail", None)
    lines = config.stash.get(_LINES, [])
    if text is None or not lines:
        return
    if not config.getoption("benchmark_compare", None):
        raise pytest.UsageError("--sustained-compare-fail needs --benchmark-compare (the saved benchmarks to judge "
                                "this session's against).")
    rule, threshold = verdict_rule(text, flag="--sustained-compare-fail")
    policy = unresolved_policy(config.getoption("sustained_unresolved", None), flag="--sustained-unresolved")
    session_ = getattr(config, "_benchmarksession", None)
    mapping = getattr(session_, "compared_mapping", None) or {}
    saved = {name: bench for benches in mapping.values() for name, bench in benches.items()}
    root = getattr(getattr(session_, "storage", None), "path", None)
    sentences, line, failed = saved_comparison(lines, saved, rule=rule, threshold=threshold, unresolved=policy,
                                               same_code=_same_commit(config, mapping, root))
    config.stash[_VERDICTS] = [*sentences, line]
    if failed and session.exitstatus == 0:  # a slowdown (or nothing compared) fails the session, as a test would
        session.exitstatus = 1


def _same_commit(config, mapping: dict, root) -> str:
    """`saved_commit_text` of this session's commit against the saved files' (`compared_mapping`'s keys, relative
    to pytest-benchmark's storage folder `root`); pytest-benchmark saves each session's commit_info in its file."""
    try:
        now = config.hook.pytest_benchmark_generate_commit_info(config=config) or {}
        saved = [json.loads((Path(p) if root is None or Path(p).is_absolute() else Path(root) / p).read_text(
            encoding="utf-8")).get("commit_info") or {} for p in mapping]
    except (OSError, ValueError, AttributeError):  # no git, an unreadable file: not knowing is "not the same"
        return ""
    return saved_commit_text(now, saved)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's summary, which raises on its own regressions
def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = config.stash.get(_LINES, [])
    if not lines:
        return
    terminalreporter.section("sustained")
    for nodeid, extra in lines:
        terminalreporter.write_line(summary_line(nodeid, extra))
    for line in config.stash.get(_VERDICTS, []):
        terminalreporter.write_line(line)


def _device_name(config) -> str:
    names = config.stash.get(_DEVICES, None)
    if names:
        return ", ".join(sorted(names))
    try:
        return open_device(_device(config)).identity().name
    except Exception as exc:  # machine_info is descriptive; an unopenable device is named, not fatal
        return f"{config.getoption('sustained_device') or 'default device'} ({type(exc).__name__})"


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info) -> None:
    # pytest-benchmark warns when machine_info differs between saved runs; naming the GPU model makes a
    # comparison across GPUs visible there (the host CPU alone says nothing about it).
    # Called only when benchmarks are saved or compared, so opening the device here costs nothing otherwise.
    machine_info["harness_device"] = _device_name(config)


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark) -> None:
    saved = (compared_benchmark.get("machine_info") or {}).get("harness_device")
    now = machine_info.get("harness_device")
    if saved and now and saved != now:
        benchmarksession.logger.warning(
            f"The saved benchmarks ran on {saved} and these on {now}: the comparison is across machines, so its "
            f"differences include the hardware, not only the code.")
