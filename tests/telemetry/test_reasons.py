"""The reason sets as one: NVML bits, names, masks and the analysis's sets agree everywhere."""

from __future__ import annotations

import pytest

from harness.telemetry import (
    AMD_POWER_REASONS,
    AMD_THERMAL_REASONS,
    NVML_REASONS,
    POWER_REASONS,
    THERMAL_REASONS,
    decode_nvml_reasons,
    is_power_limited,
    is_thermal_limited,
)
from harness.telemetry._reasons import join_reason_names


@pytest.mark.parametrize("bit", list(NVML_REASONS))
def test_each_bit_alone_classifies_by_its_name(bit):
    name = NVML_REASONS[bit]
    assert decode_nvml_reasons(bit) == (name,)
    assert is_power_limited(bit) == (name in POWER_REASONS)
    assert is_thermal_limited(bit) == (name in THERMAL_REASONS)
    # Other bits never hide a limit, nor make one up.
    others = sum(b for b in NVML_REASONS if NVML_REASONS[b] not in POWER_REASONS | THERMAL_REASONS)
    assert is_power_limited(bit | others) == (name in POWER_REASONS)
    assert is_thermal_limited(bit | others) == (name in THERMAL_REASONS)


def test_the_sets_are_disjoint_and_name_known_bits():
    assert POWER_REASONS <= set(NVML_REASONS.values()) and THERMAL_REASONS <= set(NVML_REASONS.values())
    assert not POWER_REASONS & THERMAL_REASONS
    assert not AMD_POWER_REASONS & AMD_THERMAL_REASONS
    assert not (POWER_REASONS | THERMAL_REASONS) & (AMD_POWER_REASONS | AMD_THERMAL_REASONS)


def test_the_analysis_uses_these_sets():
    from harness.analysis import POWER_REASONS as A_POWER, THERMAL_REASONS as A_THERMAL

    assert A_POWER == POWER_REASONS | AMD_POWER_REASONS
    assert A_THERMAL == THERMAL_REASONS | AMD_THERMAL_REASONS


def test_decoding_is_lowest_bit_first_and_covers_high_unknown_bits():
    assert decode_nvml_reasons(0x80 | 0x4 | 0x1) == ("gpu_idle", "sw_power_cap", "hw_power_brake")
    assert decode_nvml_reasons(1 << 40) == ("unknown_0x10000000000",)
    assert decode_nvml_reasons(0x100) == ("display_clock",)  # the highest known bit (bit <= mask)
    assert join_reason_names(0) == "" and join_reason_names(0x24) == "sw_power_cap|sw_thermal"
    with pytest.raises(ValueError, match=r"^a clock-event reason mask is never negative \(got -4\)$"):
        decode_nvml_reasons(-4)
