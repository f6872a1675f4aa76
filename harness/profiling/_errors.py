"""Errors of the profilers: each a one-paragraph `HarnessError`, so the CLI prints it and exits 2."""

from __future__ import annotations

from harness.errors import HarnessError

__all__ = ["CountersUnavailable", "NothingProfiled", "ProfilerError", "ProfilerMissing", "TraceFormatError"]


class ProfilerError(HarnessError):
    """A profiler (ncu, rocprofv3, Proton) could not be run or gave nothing usable."""


class ProfilerMissing(ProfilerError):
    """The profiler's executable or Python module is not installed here."""


class CountersUnavailable(ProfilerError):
    """The profiler ran but may not read the GPU's hardware counters (permissions, sandboxed runtime)."""


class NothingProfiled(ProfilerError):
    """The profiler ran, but no kernel (or none matching the filter) was profiled or traced."""


class TraceFormatError(ProfilerError):
    """A profiler's output file does not have the documented format."""
