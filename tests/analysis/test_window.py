import pytest

from harness.analysis import summarize_window
from harness.runner import Chunk, ProbeReading, summarize_probe_blocks
from harness.telemetry import Sample

MS = 1_000_000


def chunks():
    # Two 0.5 s window chunks of 100 launches each, 5 ms per launch, back to back from t = 10 s.
    return [Chunk(index=i, phase="window", t_start_ns=10_000 * MS + i * 500 * MS,
                  t_end_ns=10_000 * MS + (i + 1) * 500 * MS, device_ns=500 * MS, launches=100) for i in range(2)]


def samples():
    out = []
    for i in range(0, 121):  # every 10 ms from 9.9 s to 11.1 s: some fall outside the window
        t = 9_900 * MS + i * 10 * MS
        energy = 700.0 * (t - 9_900 * MS) * 1e-9 if i % 10 == 0 else None  # counter read every 100 ms only
        limited = int((t - 9_900 * MS) * 1.02) if i % 10 == 0 else None  # steps a bit faster than time
        out.append(Sample(t_ns=t, sm_clock_mhz=1700.0 if i % 2 else 1650.0, power_w=700.0, energy_j=energy,
                          power_limited_ns=limited, reasons=0x4, reason_names="sw_power_cap"))
    out.append(Sample(t_ns=10_500 * MS, error="RuntimeError: read failed"))
    return out


def test_window_figures_come_from_window_samples_only():
    probes = [ProbeReading(t_ns=t * MS, clock_mhz=c, clock_min_mhz=c, clock_max_mhz=c, blocks=132, span_ns=200_000)
              for t, c in ((9_950, 1900.0), (10_200, 1500.0), (10_700, 1520.0), (11_050, 1900.0))]
    s = summarize_window(window_chunks=chunks(), samples=samples(), probes=probes, flops_per_launch=1e12, sm_count=132)
    assert s["time_ns"] == pytest.approx(5 * MS)
    assert s["duty_cycle"] == pytest.approx(1.0)
    assert s["sm_clock_mhz"] == pytest.approx(1650.0)  # 51 of the 101 samples within [10 s, 11 s] read 1650
    assert s["inband_clock_mhz"] == pytest.approx(1510.0)  # probes outside the window are ignored
    assert s["cycles_clock"] == "inband"
    assert s["cycles_per_launch"] == pytest.approx(5 * MS * 1510.0 * 1e-3)
    assert s["cycles_per_launch_nvml"] == pytest.approx(5 * MS * 1650.0 * 1e-3)
    # Energy read every 100 ms, scaled to the window: 700 W over 1 s.
    assert s["energy_j"] == pytest.approx(700.0, rel=1e-6)
    assert s["energy_per_launch_j"] == pytest.approx(3.5, rel=1e-6)
    assert s["energy_per_launch_from_power_j"] == pytest.approx(3.5)
    assert s["power_limited_frac"] == 1.0  # 1.02 from a counter that steps ahead: clamped
    assert s["tflops"] == pytest.approx(200.0)
    assert s["tflop_per_j"] == pytest.approx(200.0 / 700.0)
    assert s["flop_per_cycle_per_sm"] == pytest.approx(1e12 / (5 * MS * 1.51) / 132)
    assert s["sample_errors_in_window"] == 1
    assert s["reason_names"] == "sw_power_cap:1.00"


def test_without_probe_cycles_use_nvml_and_say_so():
    s = summarize_window(window_chunks=chunks(), samples=samples(), probes=[], flops_per_launch=1e12, sm_count=132)
    assert s["cycles_clock"] == "nvml" and s["inband_clock_mhz"] is None
    assert s["cycles_per_launch"] == s["cycles_per_launch_nvml"]


def test_probe_blocks_reduce_to_median_clock():
    # Three blocks: 1000 cycles per 1000 ns (1000 MHz), 1500 MHz, 2000 MHz; a broken row is dropped.
    raw = [[0, 1000, 0, 1000, 0], [0, 1000, 0, 1500, 1], [0, 1000, 0, 2000, 2], [5, 5, 0, 0, 3]]
    r = summarize_probe_blocks(raw, offset_ns=100)
    assert r.clock_mhz == pytest.approx(1500.0) and r.blocks == 3
    assert (r.clock_min_mhz, r.clock_max_mhz) == (pytest.approx(1000.0), pytest.approx(2000.0))
    assert r.t_ns == 600
    assert summarize_probe_blocks([[1, 1, 1, 1, 0]], offset_ns=0) is None
