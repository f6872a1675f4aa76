from __future__ import annotations

import pytest

from harness.telemetry import (
    NVML_REASONS,
    POWER_REASONS,
    THERMAL_REASONS,
    decode_nvml_reasons,
    is_power_limited,
    is_thermal_limited,
)
from harness.telemetry._reasons import join_reason_names


def test_table_matches_the_documented_bits():
    assert NVML_REASONS == {
        0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
        0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clock",
    }


@pytest.mark.parametrize(
    "mask, names",
    [(0, ()), (0x1, ("gpu_idle",)), (0x4, ("sw_power_cap",)), (0x24, ("sw_power_cap", "sw_thermal")),
     (0x1FF, tuple(NVML_REASONS.values())), (0x400 | 0x4, ("sw_power_cap", "unknown_0x400"))],
)
def test_decode(mask, names):
    assert decode_nvml_reasons(mask) == names
    assert join_reason_names(mask) == "|".join(names)


def test_negative_mask_is_rejected():
    with pytest.raises(ValueError):
        decode_nvml_reasons(-1)


def test_classification():
    assert POWER_REASONS == {"sw_power_cap", "hw_power_brake"}
    assert THERMAL_REASONS == {"sw_thermal", "hw_thermal"}
    assert is_power_limited(0x4) and is_power_limited(0x80) and not is_power_limited(0x20 | 0x1)
    assert is_thermal_limited(0x20) and is_thermal_limited(0x40) and not is_thermal_limited(0x4)
    # HW slowdown alone names no cause, so it counts as neither.
    assert not is_power_limited(0x8) and not is_thermal_limited(0x8)
    assert not is_power_limited(0x1) and not is_thermal_limited(0x1)
