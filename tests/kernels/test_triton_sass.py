"""The Triton kernels compiled ahead of time for Hopper (sm_90) on any machine, no GPU needed.

The products must be wgmma (HGMMA for BF16, QGMMA for FP8, never the older HMMA), lean P must not
call MUFU.EX2 per element (only the per-row rescale does), and no table config may spill. The compile
runs in a subprocess because this process's triton may be in interpreter mode (test_triton_kernels).

No loop may read, at its head, a register that nothing writes before the loop. That is how the NaN of
triton-fp8-exact on the H200 looked in the SASS of ptxas 12.8 (triton 3.6): it moved the row sum's
reads of half the P codes (16-bit registers, see _triton_common._e4m3_codes) one trip early, so the sum
read the previous block's P and, on the first trip, uninitialized registers (garbage bytes that,
sign-extended and shifted into an fp32 exponent, can be huge, -inf or NaN). ptxas 13.4 (triton 3.9)
segfaulted on the same PTX instead. The interpreter cannot show this; the SASS can.
"""

from __future__ import annotations

import re

import pytest

from tests.kernels.sm90_compile import compile_report

triton = pytest.importorskip("triton", reason="triton is not installed: pip install triton")
pytestmark = pytest.mark.slow  # the module fixture compiles the kernels ahead of time for sm_90 (~13 s)


SCRIPT = r"""
import itertools, json, re, sys
from kernels_under_test import _triton_common as tc, triton_bf16, triton_fp8
from kernels_under_test._triton_aot import compile_for, disassemble
from kernels_under_test._triton_fp8_pipe import stage_acc_in_mma, stage_pipelined

tool = sys.argv[1]
out = {}
EXACT = dict(tau=0.125, sigma=6, v_transposed=True)
LEAN = dict(EXACT, beta=0.35)
PIPE, ACC = dict(bulk=stage_pipelined), dict(bulk=stage_acc_in_mma)
for (name, mode, table, extra, over), d in itertools.product((
    ("bf16", tc.MODE_BF16, triton_bf16.CONFIGS, dict(tau=0.5), dict(pack_p=False)),
    ("bf16-pack", tc.MODE_BF16, triton_bf16.CONFIGS, dict(tau=0.5), dict(pack_p=True)),
    ("exact", tc.MODE_EXACT, triton_fp8.CONFIGS, EXACT, {}),
    ("lean", tc.MODE_LEAN, triton_fp8.CONFIGS, LEAN, {}),
    ("exact-pipe", tc.MODE_EXACT, triton_fp8.CONFIGS, dict(EXACT, **PIPE), {}),
    ("lean-pipe", tc.MODE_LEAN, triton_fp8.CONFIGS, dict(LEAN, **PIPE), {}),
    ("exact-accmma", tc.MODE_EXACT, triton_fp8.CONFIGS, dict(EXACT, **ACC), {}),
    ("lean-accmma", tc.MODE_LEAN, triton_fp8.CONFIGS, dict(LEAN, **ACC), {}),
), (128, 64)):
    if d != 128:
        if name.endswith(("-pipe", "-accmma")):
            continue  # the variants' loops at d=128 only: each compile costs seconds of CI
        name = f"{name}-d{d}"
    try:
        config = tc.Config(**{**table[(d, d)], **over})
        cc = compile_for(mode=mode, dqk=d, dv=d, causal=True, config=config, **extra)
    except Exception as exc:
        out[name] = dict(error=f"{type(exc).__name__}: {str(exc)[:300]}")
        continue
    sass, usage = disassemble(cc, tool)
    count = lambda op: len(re.findall(r"\b" + re.escape(op) + r"\b", sass))
    out[name] = dict(
        hgmma=count("HGMMA"), qgmma=count("QGMMA"), hmma=count("HMMA"), ex2=count("MUFU.EX2"), f2f=count("F2F"),
        stack=int(re.search(r"STACK:(\d+)", usage).group(1)), shared=cc.metadata.shared, sass=sass,
    )
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sm90():
    return compile_report(SCRIPT)


@pytest.fixture(scope="module")
def sass(sm90):
    def get(mode):
        entry = sm90[mode]
        # A ptxas segfault (error code -11) is a failure too: triton 3.9's ptxas crashed on the exact-P
        # PTX before _e4m3_codes packed the codes in 32-bit registers (see the module docstring).
        assert "error" not in entry, entry["error"]
        return entry

    return get


@pytest.mark.parametrize("mode", ["bf16", "bf16-pack"])
def test_bf16_uses_hgmma(sass, mode):
    bf16 = sass(mode)
    assert bf16["hgmma"] > 0 and bf16["hmma"] == 0 and bf16["qgmma"] == 0


def test_packed_p_has_no_per_element_conversion(sass):
    # p -> bf16 one element at a time is an F2F each, on the unit MUFU.EX2 uses; pack_p converts pairs
    # (F2FP.BF16.F32.PACK_AB), so the F2F disappear.
    assert sass("bf16")["f2f"] >= 64 and sass("bf16-pack")["f2f"] == 0


@pytest.mark.parametrize("mode", ["exact", "lean", "exact-pipe", "lean-pipe", "exact-accmma", "lean-accmma"])
def test_fp8_uses_qgmma_for_both_products(sass, mode):
    fp8 = sass(mode)
    assert fp8["qgmma"] > 0 and fp8["hgmma"] == 0 and fp8["hmma"] == 0


@pytest.mark.parametrize("mode", ["lean", "lean-pipe", "lean-accmma"])
def test_lean_p_has_no_per_element_exp2(sass, mode):
    # exact: one EX2 per score element (64 per thread per block here); lean: only the per-row alpha.
    assert sass(mode)["ex2"] <= 8


@pytest.mark.parametrize("p", ["exact", "lean"])
def test_accumulating_pv_in_the_wgmma_drops_the_accumulator_ffma(sass, p):
    # `_stage` updates acc as acc * alpha + PV * d: an FFMA per accumulator element and block (64 per
    # thread at d=128, 64 rows, 4 warps); the acc-in-mma loop hands acc * g to the wgmma as its C operand.
    ffma = {mode: len(re.findall(r"\bFFMA\b", sass(mode)["sass"])) for mode in (p, f"{p}-accmma")}
    assert ffma[p] - ffma[f"{p}-accmma"] >= 48, ffma


@pytest.mark.parametrize("mode", ["bf16", "bf16-pack", "exact", "lean", "exact-pipe", "lean-pipe", "exact-accmma",
                                  "lean-accmma"])
def test_table_configs_do_not_spill_and_fit_shared_memory(sass, mode):
    entry = sass(mode)
    assert entry["stack"] == 0
    assert entry["shared"] <= 232448  # 227 KiB: the most one Hopper block can opt in to


_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Za-z0-9_.]+)\s*([^;]*);")
_REG = re.compile(r"\bR(\d+)\b")
_NO_DEST = {"ST", "STG", "STS", "STL", "RED", "BRA", "BAR", "EXIT", "WARPGROUP", "SYNCS", "UTMA", "MEMBAR", "FENCE",
            "CCTL", "ERRBAR", "NOP", "RET", "CALL", "WARPSYNC", "BSYNC", "BSSY", "ELECT", "R2UR"}


def _registers(sass):
    """(address, text, registers written, registers read) per instruction; general registers only."""
    out = []
    for m in _INSN.finditer(sass):
        op, ops = m.group(2), [a.strip() for a in m.group(3).split(",") if a.strip()]
        base = op.split(".")[0]
        if base == "SHFL" and ops and not _REG.search(ops[0]):
            ops = ops[1:]  # SHFL writes a predicate, then the register
        writes, reads = set(), set()
        if ops and base not in _NO_DEST:
            width = 4 if ".128" in op else 2 if (".64" in op or op.startswith(("IMAD.WIDE", "CS2R"))) else 1
            shape = re.search(r"64x(\d+)x", op)
            if base in ("HGMMA", "QGMMA") and shape:
                width = int(shape.group(1)) // 2  # m64nNk: N/2 fp32 accumulators per thread
            writes = {int(r) + i for r in _REG.findall(ops[0]) for i in range(width)}
            ops = ops[1:]
        for a in ops:
            reads |= {int(r) for r in _REG.findall(a)}
        if base in ("HGMMA", "QGMMA"):  # A from registers (4 of them); the accumulator unless it starts at RZ
            reads = {int(_REG.findall(ops[0])[0]) + i for i in range(4)} if ops and _REG.fullmatch(ops[0]) else set()
            if "RZ" not in ops:
                reads |= writes
        out.append((int(m.group(1), 16), m.group(0), writes, reads))
    return out


def loop_head_reads_of_unwritten_registers(sass):
    """Reads, in a loop body, of a register the body has not yet written and nothing before the loop
    writes: on the first trip such a register holds garbage. Loops are the ranges of backward branches."""
    insns = _registers(sass)
    found = []
    for addr, text, _, _ in insns:
        jump = re.search(r"\bBRA\s+(?:`\(\S+\)\s*)?0x([0-9a-f]+)", text)
        if not jump or int(jump.group(1), 16) >= addr:
            continue
        head = int(jump.group(1), 16)
        before = set().union(*(w for a, _, w, _ in insns if a < head))
        written, seen = set(), set()
        for a, t, w, r in insns:
            if head <= a <= addr:
                new = r - written - before - seen
                found += [f"R{x} at {t.strip()}" for x in sorted(new)]
                seen |= new
                written |= w
    return found


def test_the_loop_check_finds_a_register_read_before_any_write():
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LOP3.LUT R8, R9, 0xffff, RZ, 0xc0, !PT ;
        /*0020*/                   FADD R2, R1, R8 ;
        /*0030*/                   PRMT R9, R3, 0x7610, R9 ;
        /*0040*/              @!P0 BRA 0x10 ;
    """
    # R9 carries a value around the back edge that nothing set before the loop; R3 is never written
    assert [f.split()[0] for f in loop_head_reads_of_unwritten_registers(sass)] == ["R9", "R3"]


@pytest.mark.parametrize("mode", ["bf16", "bf16-pack", "exact", "lean", "bf16-d64", "bf16-pack-d64", "exact-d64",
                                  "lean-d64", "exact-pipe", "lean-pipe", "exact-accmma",
                                  "lean-accmma"])
def test_no_loop_reads_registers_nothing_wrote(sass, mode):
    found = loop_head_reads_of_unwritten_registers(sass(mode)["sass"])
    assert not found, f"{len(found)} reads of registers no instruction before the loop wrote, e.g. {found[:4]}"
