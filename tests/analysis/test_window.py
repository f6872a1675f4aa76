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


# Scenarios with non-uniform samples: each figure is checked against a value computed by hand from the
# samples inside [t0, t1], and the samples outside carry values that would move every figure.

def _chunk(i, start_ms, end_ms, device_ms, launches):
    return Chunk(index=i, phase="window", t_start_ns=start_ms * MS, t_end_ns=end_ms * MS, device_ns=device_ms * MS,
                 launches=launches)


WINDOW = [_chunk(0, 1000, 1400, 400, 40), _chunk(1, 1400, 2000, 300, 60)]  # [1 s, 2 s], 70 % busy


def _summary(samples, probes=(), flops=1e9, sm_count=100, window=WINDOW):
    return summarize_window(window_chunks=window, samples=samples, probes=list(probes), flops_per_launch=flops,
                            sm_count=sm_count)


def _outside():
    # Just before the window start and just after its end: extreme values that no window figure may see.
    return [Sample(t_ns=t, sm_clock_mhz=100.0, power_w=5000.0, temp_c=120.0, energy_j=e, power_limited_ns=0,
                   thermal_limited_ns=0, reasons=0x40, reason_names="hw_thermal", sm_util_pct=1.0)
            for t, e in ((1000 * MS - 1, 0.0), (2000 * MS + 1, 1e6))]


def test_samples_straddling_both_edges_are_excluded_and_the_edges_included():
    inside = [Sample(t_ns=1000 * MS, sm_clock_mhz=1500.0, power_w=600.0, temp_c=60.0),  # exactly at t0
              Sample(t_ns=1300 * MS, sm_clock_mhz=1600.0, power_w=650.0, temp_c=70.0),
              Sample(t_ns=2000 * MS, sm_clock_mhz=1700.0, power_w=700.0, temp_c=65.0)]  # exactly at t1
    s = _summary(_outside() + inside)
    assert s["samples_in_window"] == 3
    assert s["sm_clock_mhz"] == 1600.0
    assert s["power_w"] == pytest.approx(650.0)
    assert s["temp_max_c"] == 70.0  # the maximum, not the first, last or minimum
    assert s["reasons_mask"] is None and s["reason_names"] == ""
    assert s["thermal_limited_frac"] is None and s["power_limited_frac"] is None


def test_chunk_figures_time_duty_cycle_tflops_and_cycles():
    probes = [ProbeReading(t_ns=1500 * MS, clock_mhz=1200.0, clock_min_mhz=1100.0, clock_max_mhz=1300.0, blocks=4,
                           span_ns=1000)]
    s = _summary([Sample(t_ns=1500 * MS, sm_clock_mhz=1500.0, power_w=500.0)], probes, flops=2e9, sm_count=50)
    assert (s["window_start_ns"], s["window_end_ns"], s["window_launches"]) == (1000 * MS, 2000 * MS, 100)
    assert s["window_s"] == pytest.approx(1.0)
    assert s["time_ns"] == pytest.approx(7 * MS)  # 700 ms of device time over 100 launches
    assert s["duty_cycle"] == pytest.approx(0.7)
    assert s["chunk_time_cv"] == pytest.approx(0.5 * 2 ** 0.5 * 5 / 7.5, rel=1e-6)  # 10 ms and 5 ms per launch
    assert s["tflops"] == pytest.approx(2e9 / (7 * MS) * 1e-3)
    assert s["inband_to_nvml"] == pytest.approx(1200.0 / 1500.0)  # in-band over NVML, not inverted
    assert s["cycles_per_launch"] == pytest.approx(7 * MS * 1.2)
    assert s["cycles_per_launch_nvml"] == pytest.approx(7 * MS * 1.5)
    assert s["flop_per_cycle_per_sm"] == pytest.approx(2e9 / (7 * MS * 1.2) / 50)
    assert s["probes_in_window"] == 1
    assert s["energy_per_launch_from_power_j"] == pytest.approx(500.0 * 0.7 / 100)
    assert s["tflop_per_j"] == pytest.approx(s["tflops"] / 500.0)
    assert _summary([Sample(t_ns=1500 * MS, sm_clock_mhz=1500.0)], probes, sm_count=None)["flop_per_cycle_per_sm"] is None
    # a model's forward has no one attention shape's FLOPs: its FLOP figures are None, its time and cycles are not
    forward = _summary([Sample(t_ns=1500 * MS, sm_clock_mhz=1500.0, power_w=500.0)], probes, flops=None)
    assert forward["tflops"] is forward["tflop_per_j"] is forward["flop_per_cycle_per_sm"] is None
    assert forward["cycles_per_launch"] == s["cycles_per_launch"] and forward["time_ns"] == s["time_ns"]


def test_nothing_measured_leaves_figures_empty_not_zero():
    s = _summary([Sample(t_ns=1500 * MS, error="read failed")])
    assert s["cycles_clock"] == "none" and s["cycles_per_launch"] is None and s["sm_clock_mhz"] is None
    assert s["power_w"] is None and s["energy_j"] is None and s["energy_per_launch_j"] is None
    assert s["tflop_per_j"] is None and s["temp_max_c"] is None and s["reason_names"] is None
    assert s["sample_errors_in_window"] == 1 and s["inband_to_nvml"] is None
    with pytest.raises(ValueError, match="^a window needs at least one chunk$"):
        _summary([], window=[])


def test_energy_counter_read_at_uneven_times_is_rescaled_to_the_window():
    # The counter steps at 1.1 s, 1.2 s and 1.8 s (a gap): 400 W between its first and last reading, read
    # over 0.7 s of a 1 s window: the window's energy is 400 J, not the 280 J between the readings.
    reads = [Sample(t_ns=t * MS, energy_j=10.0 + 0.4 * (t - 1100), power_w=400.0, sm_clock_mhz=1500.0)
             for t in (1100, 1200, 1800)]
    between = [Sample(t_ns=t * MS, power_w=400.0, sm_clock_mhz=1500.0) for t in (1150, 1500, 1900)]
    s = _summary(_outside() + reads + between)
    assert s["energy_j"] == pytest.approx(400.0)
    assert s["energy_per_launch_j"] == pytest.approx(4.0)


def test_a_single_energy_reading_or_a_counter_that_did_not_move_gives_no_energy():
    one = _summary([Sample(t_ns=1500 * MS, energy_j=5.0)])
    assert one["energy_j"] is None and one["energy_per_launch_j"] is None
    flat = _summary([Sample(t_ns=t * MS, energy_j=5.0) for t in (1200, 1800)])
    assert flat["energy_j"] == 0.0 and flat["energy_per_launch_j"] is None


def test_limited_time_counters_give_the_fractions_over_their_own_span():
    # power limited 300 of 500 ms between the counter's readings, thermal 100 of 500 ms; failed and
    # non-poll samples do not count.
    ss = [Sample(t_ns=1200 * MS, power_limited_ns=1000 * MS, thermal_limited_ns=50 * MS, reasons=0x4,
                 reason_names="sw_power_cap"),
          Sample(t_ns=1700 * MS, power_limited_ns=1300 * MS, thermal_limited_ns=150 * MS, reasons=0x20,
                 reason_names="sw_thermal"),
          Sample(t_ns=1800 * MS, source="gpm", power_limited_ns=9999 * MS, sm_util_pct=80.0, tensor_util_pct=60.0,
                 fp32_util_pct=5.0),
          Sample(t_ns=1900 * MS, error="x")]
    s = _summary(_outside() + ss)
    assert s["power_limited_frac"] == pytest.approx(0.6)
    assert s["thermal_limited_frac"] == pytest.approx(0.2)
    assert s["reasons_mask"] == 0x24
    assert s["reason_names"] == "sw_power_cap:0.50|sw_thermal:0.50"
    assert (s["sm_util_pct"], s["tensor_util_pct"], s["fp32_util_pct"]) == (80.0, 60.0, 5.0)
    assert s["sample_errors_in_window"] == 1


def test_without_counters_mixed_limiter_reasons_estimate_the_power_share_by_name():
    # Five polls: two power cap, one power brake (a power reason too), one thermal only, one idle. Thermal
    # and idle reasons are not power; the estimate is 3 of 5.
    names = ["sw_power_cap", "sw_power_cap|sw_thermal", "hw_power_brake", "sw_thermal", "gpu_idle"]
    masks = [0x4, 0x24, 0x80, 0x20, 0x1]
    ss = [Sample(t_ns=(1100 + 200 * i) * MS, reasons=m, reason_names=n, sm_clock_mhz=1500.0)
          for i, (m, n) in enumerate(zip(masks, names))]
    s = _summary(_outside() + ss)
    assert s["power_limited_frac"] == pytest.approx(0.6)
    assert s["thermal_limited_frac"] is None  # no counter: no thermal estimate is made up
    assert s["reasons_mask"] == 0x4 | 0x20 | 0x80 | 0x1
    assert s["reason_names"].split("|")[0] == "sw_power_cap:0.40"
    assert set(s["reason_names"].split("|")) == {"sw_power_cap:0.40", "sw_thermal:0.40", "hw_power_brake:0.20",
                                                 "gpu_idle:0.20"}


def test_amd_power_reason_counts_as_power():
    ss = [Sample(t_ns=t * MS, reasons=1, reason_names=n) for t, n in ((1200, "ppt_power"), (1800, "socket_thermal"))]
    assert _summary(ss)["power_limited_frac"] == pytest.approx(0.5)


def test_reason_sets_are_the_telemetrys_nvml_and_amd_sets():
    from harness.analysis import POWER_REASONS, THERMAL_REASONS
    from harness.telemetry import (
        AMD_POWER_REASONS,
        AMD_THERMAL_REASONS,
        POWER_REASONS as NVML_POWER,
        THERMAL_REASONS as NVML_THERMAL,
    )

    assert POWER_REASONS == NVML_POWER | AMD_POWER_REASONS
    assert THERMAL_REASONS == NVML_THERMAL | AMD_THERMAL_REASONS
    assert {"sw_power_cap", "hw_power_brake", "ppt_power"} <= POWER_REASONS
    assert not POWER_REASONS & THERMAL_REASONS
    assert "hw_slowdown" not in POWER_REASONS | THERMAL_REASONS


def test_chunk_clock_is_the_median_poll_clock_within_the_chunk():
    from harness.analysis import chunk_clock

    ss = _outside() + [Sample(t_ns=1100 * MS, sm_clock_mhz=1400.0), Sample(t_ns=1200 * MS, sm_clock_mhz=1500.0),
                       Sample(t_ns=1300 * MS, sm_clock_mhz=1900.0), Sample(t_ns=1250 * MS, source="gpm",
                                                                            sm_clock_mhz=10.0),
                       Sample(t_ns=1260 * MS, source="replay", sm_clock_mhz=1450.0)]
    assert chunk_clock(ss, 1000 * MS, 1400 * MS) == pytest.approx(1475.0)
    assert chunk_clock(ss, 1500 * MS, 1600 * MS) is None


def test_probe_blocks_from_recorded_h200_pairs():
    # clock64 / globaltimer pairs as an H200 block records them: 200 us spins at 1980 and 1755 MHz, an even
    # number of blocks (median of the middle two), the reading stamped at the middle block's midpoint.
    raw = [[1_000_000 + i, 1_200_000 + i, 5_000, 5_000 + (396_000 if i % 2 else 351_000), i] for i in range(4)]
    r = summarize_probe_blocks(raw, offset_ns=-1_000_000)
    assert r.clock_mhz == pytest.approx(0.5 * (1755.0 + 1980.0))
    assert (r.clock_min_mhz, r.clock_max_mhz) == (pytest.approx(1755.0), pytest.approx(1980.0))
    assert r.span_ns == 200_000 and r.blocks == 4
    assert r.t_ns == 1_100_002 - 1_000_000
    odd = summarize_probe_blocks(raw[:3], offset_ns=0)
    assert odd.clock_mhz == pytest.approx(1755.0) and odd.t_ns == 1_100_001


def test_a_window_of_three_chunks_spans_the_first_start_to_the_last_end():
    window = [_chunk(0, 1000, 1300, 300, 30), _chunk(1, 1300, 1600, 300, 30), _chunk(2, 1600, 2500, 600, 40)]
    s = _summary([Sample(t_ns=2400 * MS, sm_clock_mhz=1500.0, power_w=500.0)], window=window)
    assert (s["window_start_ns"], s["window_end_ns"]) == (1000 * MS, 2500 * MS)
    assert s["samples_in_window"] == 1 and s["duty_cycle"] == pytest.approx(1200 / 1500)
    assert s["time_ns"] == pytest.approx(1200 * MS / 100)


def test_counters_are_differenced_between_their_first_and_last_readings_not_the_second():
    # The power rises within the window: 100 W between the first two readings, 400 W after. The energy
    # and limited-time counters are taken first to last (250 J over 0.7 s), not first to second.
    reads = [Sample(t_ns=t * MS, energy_j=e, power_limited_ns=pl * MS, thermal_limited_ns=th * MS, sm_clock_mhz=1500.0)
             for t, e, pl, th in ((1100, 10.0, 0, 0), (1200, 20.0, 0, 100), (1800, 260.0, 600, 100))]
    s = _summary(_outside() + reads)
    assert s["energy_j"] == pytest.approx(250.0 / 0.7)
    assert s["power_limited_frac"] == pytest.approx(600 / 700)
    assert s["thermal_limited_frac"] == pytest.approx(100 / 700)


def test_every_figure_is_a_measurements_column_and_the_chiplet_figures_are_there():
    from harness.results._schema import V2_CHIPLET_COLUMNS, columns

    s = _summary([Sample(t_ns=1500 * MS, sm_clock_mhz=1500.0, chiplet_clocks_mhz=(1500.0, 1450.0))])
    assert set(s) <= set(columns("measurements"))  # stored as they are named, none dropped on write
    assert set(V2_CHIPLET_COLUMNS) <= set(s) and s["chiplet_count"] == 2 and s["slowest_chiplet"] == 1


def test_probes_exactly_at_the_window_edges_count():
    probes = [ProbeReading(t_ns=t * MS, clock_mhz=c, clock_min_mhz=c, clock_max_mhz=c, blocks=4, span_ns=1000)
              for t, c in ((999, 100.0), (1000, 1400.0), (2000, 1600.0), (2001, 3000.0))]
    s = _summary([Sample(t_ns=1500 * MS, sm_clock_mhz=1500.0)], probes)
    assert s["probes_in_window"] == 2 and s["inband_clock_mhz"] == pytest.approx(1500.0)
    assert s["cycles_per_launch_inband"] == pytest.approx(7 * MS * 1.5)


def test_counters_read_twice_at_one_instant_give_no_rate():
    # A duplicated reading: no time between them, so no fraction or rescaling can be formed (and none raises).
    same = [Sample(t_ns=1500 * MS, energy_j=5.0, power_limited_ns=10, thermal_limited_ns=10) for _ in range(2)]
    s = _summary(same)
    assert s["energy_j"] == 0.0 and s["energy_per_launch_j"] is None
    assert s["power_limited_frac"] is None and s["thermal_limited_frac"] is None


def test_thermal_counter_stepping_ahead_is_clamped_too():
    ss = [Sample(t_ns=t * MS, thermal_limited_ns=th * MS) for t, th in ((1200, 0), (1700, 510))]
    assert _summary(ss)["thermal_limited_frac"] == 1.0


def test_a_small_energy_is_reported():
    ss = [Sample(t_ns=t * MS, energy_j=e) for t, e in ((1000, 1.0), (2000, 1.5))]  # 0.5 J over the window
    s = _summary(ss)
    assert s["energy_j"] == pytest.approx(0.5) and s["energy_per_launch_j"] == pytest.approx(0.005)


def test_utilisation_comes_from_good_gpm_samples_only():
    ss = [Sample(t_ns=1200 * MS, sm_clock_mhz=1500.0, sm_util_pct=5.0, tensor_util_pct=5.0, fp32_util_pct=5.0),
          Sample(t_ns=1300 * MS, source="gpm", sm_util_pct=80.0, tensor_util_pct=60.0, fp32_util_pct=7.0),
          Sample(t_ns=1400 * MS, source="gpm", error="x", sm_util_pct=1.0, tensor_util_pct=1.0, fp32_util_pct=1.0)]
    s = _summary(ss)
    assert (s["sm_util_pct"], s["tensor_util_pct"], s["fp32_util_pct"]) == (80.0, 60.0, 7.0)


def test_a_window_without_host_time_has_no_duty_cycle():
    s = _summary([], window=[_chunk(0, 1000, 1000, 5, 10)])
    assert s["duty_cycle"] is None and s["time_ns"] == pytest.approx(0.5 * MS)
