"""rocprofv3: command builders and parsers on fixture files built from the documented formats.

The fixtures (tests/fixtures/rocprof, see its README) were written by hand from the documented formats;
they have not met an AMD GPU here, and neither has this code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.profiling import (
    NothingProfiled,
    TraceFormatError,
    att_command,
    att_stats_cycles,
    att_wave_cycles,
    instruction_class,
    kernel_trace_command,
    parse_kernel_trace_csv,
    read_att_dir,
)

ROCPROF = Path(__file__).resolve().parents[1] / "fixtures" / "rocprof"


def test_kernel_trace_command_is_an_argument_list_asking_for_csv():
    cmd = kernel_trace_command(target=["python", "-m", "app", "--name", "a b"], out_dir=Path("/tmp/kt"), out_name="run",
                               kernel_regex="_attn_fwd")
    assert cmd == ["rocprofv3", "--kernel-trace", "-f", "csv", "-d", "/tmp/kt", "-o", "run",
                   "--kernel-include-regex", "_attn_fwd", "--", "python", "-m", "app", "--name", "a b"]


def test_att_command_carries_every_documented_option():
    cmd = att_command(target=["./app"], out_dir="att", target_cu=2, simd_select=0xF, shader_engine_mask=0x3,
                      buffer_size=0x6000000, kernel_regex="attn", iteration_range="[2]", activity=8,
                      perfcounters="SQ_WAVES")
    assert cmd == ["rocprofv3", "--att", "--att-target-cu", "2", "--att-simd-select", "0xf",
                   "--att-shader-engine-mask", "0x3", "--att-buffer-size", "0x6000000", "--att-activity", "8",
                   "--att-perfcounters", "SQ_WAVES", "--kernel-include-regex", "attn", "--kernel-iteration-range", "[2]",
                   "-d", "att", "--", "./app"]


@pytest.mark.parametrize("build", [kernel_trace_command, att_command])
def test_builders_refuse_shell_strings(build):
    kw = {"out_name": "x"} if build is kernel_trace_command else {}
    with pytest.raises(ConfigError, match="never shell strings"):
        build(target="./app --flag", out_dir="d", **kw)


def test_att_target_cu_out_of_range():
    with pytest.raises(ConfigError, match="0..15"):
        att_command(target=["./app"], out_dir="d", target_cu=16)


def test_kernel_trace_csv_parses_every_dispatch():
    ks = parse_kernel_trace_csv((ROCPROF / "kernel_trace.csv").read_text())
    assert [k.name for k in ks][1:] == ["_attn_fwd", "_attn_fwd"]
    assert ks[0].name.startswith("void at::native::vectorized_elementwise_kernel<4")  # commas inside quotes
    assert [k.duration_ns for k in ks] == [12_000, 3_880_000, 3_870_000]
    assert ks[1].extra["Grid_Size_Y"] == "32" and ks[1].extra["Dispatch_Id"] == "2"


def test_kernel_trace_with_missing_columns_or_bad_timestamps():
    with pytest.raises(TraceFormatError, match=r"lacks columns \['End_Timestamp'\]"):
        parse_kernel_trace_csv('"Kernel_Name","Start_Timestamp"\n"k",1\n')
    with pytest.raises(TraceFormatError, match="row 2: timestamps"):
        parse_kernel_trace_csv('"Kernel_Name","Start_Timestamp","End_Timestamp"\n"k","x","2"\n')


@pytest.mark.parametrize("mnemonic, cls", [
    ("v_mfma_f32_32x32x16_bf16 v[0:15], ...", "matrix"), ("v_wmma_f32_16x16x16_f16", "matrix"),
    ("v_exp_f32 v1, v2", "transcendental"), ("v_fma_f32", "valu"), ("s_waitcnt vmcnt(0)", "wait"),
    ("s_cbranch_scc1 3", "branch"), ("s_load_dwordx4", "smem"), ("s_add_u32", "salu"), ("ds_read_b128", "lds"),
    ("global_load_dwordx4", "vmem"), ("buffer_store_dword", "vmem"), ("v_nop", "valu"), ("unknown_op", "other"),
])
def test_instruction_classes(mnemonic, cls):
    assert instruction_class(mnemonic) == cls


def test_att_directory_gives_per_class_and_per_category_cycles():
    (d,) = read_att_dir(ROCPROF / "att")
    assert d.name == "ui_output_agent_1_dispatch_3" and d.waves == 2  # code.json and filenames.json skipped
    classes = {c.category: (c.instructions, c.cycles, c.stall_cycles, c.idle_cycles) for c in d.classes}
    assert classes == {
        "matrix": (1024, 131072, 8192, 4096), "transcendental": (2048, 32768, 16384, 1024),
        "vmem": (512, 30720, 12288, 2048), "valu": (3072, 24576, 3072, 1024), "lds": (512, 20480, 4096, 1024),
        "wait": (516, 11140, 10096, 268), "branch": (516, 2064, 0, 128), "smem": (4, 1240, 600, 40),
    }
    assert d.classes[0].category == "matrix"  # ordered by cycles
    cats = {c.category: (c.instructions, c.cycles, c.stall_cycles) for c in d.categories}
    assert cats == {"VALU": (8, 93104, 13280), "VMEM": (2, 15480, 6100), "LDS": (2, 10120, 2024),
                    "SALU": (2, 5060, 4504), "JUMP": (2, 1012, 0), "SMEM": (2, 610, 290)}
    assert d.wave_states == {"EMPTY": 220, "EXEC": 79500, "WAIT": 24200, "STALL": 17800, "IDLE": 3874}


def test_empty_att_directory_says_what_to_check(tmp_path):
    (tmp_path / "results.db").write_text("")  # rocprofv3 ran but traced no dispatch
    with pytest.raises(NothingProfiled) as err:
        read_att_dir(tmp_path)
    text = str(err.value)
    assert "holds no traced dispatch" in text and "--kernel-include-regex" in text and "Trace Decoder" in text
    with pytest.raises(NothingProfiled, match="does not exist"):
        read_att_dir(tmp_path / "missing")


def test_att_stats_with_a_wrong_header_and_a_broken_wave_file(tmp_path):
    with pytest.raises(TraceFormatError, match="lacks columns"):
        att_stats_cycles("Instruction,Hitcount\nv_add,1\n")
    d = tmp_path / "ui_output_agent_0_dispatch_1"
    d.mkdir()
    (d / "se0_sm0_sl0_wv0.json").write_text("{not json")
    with pytest.raises(TraceFormatError, match="is not JSON"):
        read_att_dir(tmp_path)


def test_a_wave_file_in_an_unknown_layout_is_an_error_not_zero_waves(tmp_path):
    """Item 1: wave.cpp nests instructions under "wave"; a wave-named file without them must not read as no waves."""
    d = tmp_path / "ui_output_agent_0_dispatch_1"
    d.mkdir()
    (d / "se0_sm0_sl0_wv0.json").write_text(json.dumps({"name": "SE0", "duration": 10, "wavedata": {}}))
    with pytest.raises(TraceFormatError, match="holds no `wave` object with `instructions`"):
        read_att_dir(tmp_path)
    doc = json.loads((ROCPROF / "att/gpu-host/4242/ui_output_agent_1_dispatch_3/se0_sm0_sl0_wv0.json").read_text())
    assert set(doc) == {"name", "duration", "wave", "num_stitched", "num_insts"}  # the layout wave.cpp writes
    cats, states = att_wave_cycles([doc])
    assert sum(c.instructions for c in cats) == doc["num_insts"] and sum(states.values()) == doc["duration"]
