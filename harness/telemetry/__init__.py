"""Telemetry: what the device's clock, power and limiters did while a kernel ran.

A `Sampler` backend (NVML, amdsmi, host sysfs, a replayed recording, or none) is chosen by name with
`create_sampler`, opened by its owner, and polled by a `SamplerThread` that keeps every `Sample` in
the host's `time.monotonic_ns()` time base, so the runner can cut out a measurement window with
`mark()` and `samples_between()`. Importing this package touches no vendor library: `pynvml` is
imported inside `NvmlSampler.open()`, `amdsmi` inside `AmdsmiSampler.open()` (the AMD path has not run
on AMD hardware here).

>>> from harness.telemetry import SamplerThread, create_sampler
>>> sampler = create_sampler("host", pci_bus_id=None)
>>> sampler.open()
>>> with SamplerThread(sampler, period_s=0.01) as th:
...     t0 = th.mark()
...     t1 = th.mark()
>>> sampler.close()
>>> th.samples()[0].source
'poll'
>>> sorted(sampler.describe())
['CPU frequency', 'package energy', 'package power', 'temperature']
"""

from harness.telemetry._amdsmi import (
    AMD_POWER_REASONS,
    AMD_REASONS,
    AMD_THERMAL_REASONS,
    AmdsmiSampler,
    decode_amd_reasons,
)
from harness.telemetry._amdsmi_device import (
    CACHE_VAR,
    amdsmi_gpu_processes,
    amdsmi_versions,
    close_amdsmi,
    import_amdsmi,
    open_amdsmi_device,
)
from harness.telemetry._amdsmi_partition import amdsmi_partition_bdf
from harness.telemetry._amdsmi_values import as_number
from harness.telemetry._factory import SAMPLER_NAMES, NullSampler, create_sampler
from harness.telemetry._host import HostSampler
from harness.telemetry._nvml import NvmlSampler
from harness.telemetry._nvml_device import nvml_compute_processes
from harness.telemetry._reasons import (
    NVML_REASONS,
    POWER_REASONS,
    THERMAL_REASONS,
    decode_nvml_reasons,
    is_power_limited,
    is_thermal_limited,
)
from harness.telemetry._replay import ReplaySampler, read_samples, write_samples
from harness.telemetry._sample import SAMPLE_FIELDS, Sample, Sampler
from harness.telemetry._thread import SamplerThread
from harness.telemetry._vendor import normalize_pci_bus_id

__all__ = [
    "CACHE_VAR",
    "amdsmi_partition_bdf",
    "amdsmi_versions",
    "as_number",
    "close_amdsmi",
    "import_amdsmi",
    "open_amdsmi_device",
    "AMD_POWER_REASONS",
    "AMD_REASONS",
    "AMD_THERMAL_REASONS",
    "amdsmi_gpu_processes",
    "AmdsmiSampler",
    "create_sampler",
    "decode_amd_reasons",
    "decode_nvml_reasons",
    "HostSampler",
    "is_power_limited",
    "is_thermal_limited",
    "normalize_pci_bus_id",
    "NullSampler",
    "nvml_compute_processes",
    "NVML_REASONS",
    "NvmlSampler",
    "POWER_REASONS",
    "read_samples",
    "ReplaySampler",
    "Sample",
    "SAMPLE_FIELDS",
    "Sampler",
    "SAMPLER_NAMES",
    "SamplerThread",
    "THERMAL_REASONS",
    "write_samples",
]
