"""NVML GPU Performance Monitoring (Hopper and newer): SM, tensor and FP32 utilisation between two samples.

GPM metrics are differences between two device snapshots, so one snapshot is always kept: each
interval's metrics come from (previous, new), and the previous one is freed afterwards. NVML wants the
two at least 100 ms apart; shorter intervals are not attempted.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.telemetry._sample import Sample

__all__ = ["GpmReader", "GPM_MIN_INTERVAL_NS"]

GPM_MIN_INTERVAL_NS = 100_000_000

# (Sample field, pynvml constant name)
_METRICS = (
    ("sm_util_pct", "NVML_GPM_METRIC_SM_UTIL"),
    ("tensor_util_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("fp32_util_pct", "NVML_GPM_METRIC_FP32_UTIL"),
)


class GpmReader:
    """Owns the one retained GPM snapshot of a device. Not thread-safe: the sampler thread is its only user."""

    def __init__(
        self, nvml: Any, handle: Any, *, clock: Callable[[], int], describe_error: Callable[[BaseException], str]
    ) -> None:
        self._nvml = nvml
        self._handle = handle
        self._clock = clock
        self._describe_error = describe_error
        self._prev: Any = None
        self._prev_t = 0
        self.unsupported_metrics: dict[str, str] = {}

    def start(self) -> None:
        """Take the first snapshot; raises NVMLError when GPM cannot be used."""
        self._prev = self._take()
        self._prev_t = self._clock()

    def _take(self) -> Any:
        nvml = self._nvml
        sample = nvml.nvmlGpmSampleAlloc()
        try:
            nvml.nvmlGpmSampleGet(self._handle, sample)
        except BaseException:
            nvml.nvmlGpmSampleFree(sample)
            raise
        return sample

    def poll(self) -> list[Sample]:
        """One Sample(source="gpm") when ≥100 ms have passed since the retained snapshot, else []."""
        if self._prev is None or self._clock() - self._prev_t < GPM_MIN_INTERVAL_NS:
            return []
        nvml = self._nvml
        try:
            new = self._take()
        except nvml.NVMLError as e:
            # Keep the old snapshot: the next attempt then covers a longer interval, which is still valid.
            return [Sample(t_ns=self._clock(), source="gpm", error=f"GPM sample: {self._describe_error(e)}")]
        t = self._clock()
        try:
            values = self._metrics(self._prev, new)
        except nvml.NVMLError as e:
            values = {"error": f"GPM metrics: {self._describe_error(e)}"}
        # Whatever happened, the new snapshot becomes the baseline so a bad pair is never retried.
        nvml.nvmlGpmSampleFree(self._prev)
        self._prev, self._prev_t = new, t
        return [Sample(t_ns=t, source="gpm", **values)]

    def _metrics(self, older: Any, newer: Any) -> dict[str, float | None]:
        nvml = self._nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(_METRICS)
        request.sample1 = older
        request.sample2 = newer
        for i, (_, const) in enumerate(_METRICS):
            request.metrics[i].metricId = getattr(nvml, const)
        nvml.nvmlGpmMetricsGet(request)
        out: dict[str, float | None] = {}
        for i, (field, const) in enumerate(_METRICS):
            metric = request.metrics[i]
            ret = int(metric.nvmlReturn)
            if ret == nvml.NVML_SUCCESS:
                out[field] = float(metric.value)
            else:
                out[field] = None
                self.unsupported_metrics.setdefault(const, _return_name(nvml, ret))
        return out

    def close(self) -> None:
        if self._prev is not None:
            try:
                self._nvml.nvmlGpmSampleFree(self._prev)
            finally:
                self._prev = None


def _return_name(nvml: Any, ret: int) -> str:
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_") and getattr(nvml, name) == ret:
            return name
    return f"NVML return code {ret}"
