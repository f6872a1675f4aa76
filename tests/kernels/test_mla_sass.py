"""triton-mla's shipped configurations compiled ahead of time for Hopper (sm_90) on any machine, no GPU needed
(`_triton_aot.compile_mla`): nothing spills, the latent tiles come through TMA (UTMALDG), and the 64-head tile's
products are wgmma (HGMMA). The 16-head (narrow) tile is too short for wgmma (64 rows a warpgroup), so its products
are mma.sync (HMMA): docs/experiments/mla-decode-sass.md. Only the shipped configurations are compiled (~2 s each):
the pointer baselines and the other candidates are in that note, not in CI.
"""

from __future__ import annotations

import pytest

from tests.kernels.sm90_compile import compile_report

triton = pytest.importorskip("triton", reason="triton is not installed: pip install triton")
pytestmark = pytest.mark.slow  # two sm_90 compiles in a subprocess (~4 s)


SCRIPT = r"""
import json, re, sys
from kernels_under_test._decode_configs import MLA_CONFIG, MLA_CONFIG_NARROW
from kernels_under_test._triton_aot import compile_mla, disassemble

tool = sys.argv[1]
out = {}
# DeepSeek's 128 heads and a TP slice of 16, on pages of 64 (the paged tile's address path is the longer one; the
# dense cache's compile is in docs/experiments/mla-decode-sass.md, left out of CI for its ~2 s)
for name, config, heads, page in (("wide", MLA_CONFIG, 128, 64), ("narrow", MLA_CONFIG_NARROW, 16, 64)):
    cc = compile_mla(config, heads_q=heads, page=page)
    sass, usage = disassemble(cc, tool)
    count = lambda op: len(re.findall(r"\b" + re.escape(op) + r"\b", sass))
    out[name] = dict(hgmma=count("HGMMA"), hmma=count("HMMA"), utmaldg=count("UTMALDG"), ldgsts=count("LDGSTS"),
                     local=count("LDL") + count("STL"), stack=int(re.search(r"STACK:(\d+)", usage).group(1)),
                     shared=cc.metadata.shared)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sm90():
    return compile_report(SCRIPT)


@pytest.mark.parametrize("name", ["wide", "narrow"])
def test_shipped_configs_do_not_spill_and_fit_shared_memory(sm90, name):
    entry = sm90[name]
    assert entry["stack"] == 0 and entry["local"] == 0, entry
    assert entry["shared"] <= 232448, entry  # 227 KiB: the most one Hopper block can opt in to


@pytest.mark.parametrize("name", ["wide", "narrow"])
def test_latent_tiles_come_through_tma(sm90, name):
    # every latent tile a bulk tensor copy; the pointer path's per-thread cp.async (LDGSTS) is gone from the loop
    # (a few remain at most: the query's copy to shared memory)
    entry = sm90[name]
    assert entry["utmaldg"] > 0 and entry["ldgsts"] <= 4, entry


def test_64_head_tile_uses_wgmma(sm90):
    entry = sm90["wide"]
    assert entry["hgmma"] > 0 and entry["hmma"] == 0, entry


def test_16_head_tile_is_too_short_for_wgmma(sm90):
    # 16 rows: Triton falls back to mma.sync; a swap of the operands (keys as the 64-row side) would be needed
    assert sm90["narrow"]["hgmma"] == 0 and sm90["narrow"]["hmma"] > 0
