"""The decode kernels' tuned launch configurations and their setup candidates (triton-splitkv, triton-mla).

Plain data, no triton: the kernels (`_triton_decode`, `_triton_mla`) read them, and `decode` exports them for
tuning sweeps (benchmarks/h200/decode_tune.py) without importing triton.
"""

from __future__ import annotations

__all__ = ["MLA_CANDIDATES", "MLA_CONFIG", "MLA_CONFIG_NARROW", "MLA_CONFIG_NARROW_POINTERS", "MLA_CONFIG_POINTERS",
           "MLA_SPLIT_CHOICES", "SPLITKV_CANDIDATES", "SPLITKV_CANDIDATES_PAGED",
           "SPLITKV_CONFIG", "SPLITKV_CONFIG_PAGED", "SPLITKV_MAX_QUERIES"]

# Queries of one sequence a split-KV program holds (times the GQA group, in one tile): decode and speculative
# decode, not prefill.
SPLITKV_MAX_QUERIES = 16

# Tuned on the H200 (benchmarks/h200/decode_tune.py, 2026-12-05; B16, Hq 32 / Hkv 8, d 128, S_kv 32768, CUDA-graph
# replays): dense 481 us (cuDNN SDPA 476 us on the same cache: 98.9 % of its rate), pages of 16 497 us (95.8 %).
# ctas_per_sm: the programs per SM the splits aim at (3 splits of B16 x Hkv8 here); heads_first: the grid's fastest
# axis the KV heads (a page interleaves the heads of each token, so one row of a page is read by Hkv programs).
# A dense cache ran 480-484 us at every split count tried; a paged one did not: at one allocation the same kernel
# ran 497 or 598-615 us as the split count changed (3 or 4 splits), and the issue-42 acceptance run (another
# allocation and page order) ran the tuned configuration at 604 us, steadily. ncu: the paged kernel waits on its
# loads (48 % of warp time stalled on long scoreboard against 20 % dense: each token's page-table entry is a load on
# the address path of its K/V rows) and reaches 90 % of DRAM peak against 94 % dense. So on a GPU the split count
# (and, paged, the block and grid order) is chosen per input at setup among SPLITKV_CANDIDATES, by timing each on the
# input itself (`fastest`; untimed, as a factory's setup is). Measured and dropped: one page-table load per page of a block
# (tl.reshape of the offsets: 2.1x slower), evict-first loads (no change), 2 or 8 warps, BLOCK_N 16 x 5 stages.
SPLITKV_CONFIG = dict(block_n=64, num_warps=4, num_stages=2, max_splits=64, ctas_per_sm=2, heads_first=False)
SPLITKV_CONFIG_PAGED = dict(SPLITKV_CONFIG, block_n=128, num_stages=3)
SPLITKV_CANDIDATES = (SPLITKV_CONFIG, dict(SPLITKV_CONFIG, ctas_per_sm=4),
                      dict(SPLITKV_CONFIG, block_n=128, num_stages=3))
SPLITKV_CANDIDATES_PAGED = (SPLITKV_CONFIG_PAGED, dict(SPLITKV_CONFIG_PAGED, ctas_per_sm=8),
                            dict(SPLITKV_CONFIG, ctas_per_sm=3), dict(SPLITKV_CONFIG_PAGED, heads_first=True),
                            dict(SPLITKV_CONFIG, ctas_per_sm=3, heads_first=True))

# Tuned on the H200 (benchmarks/h200/decode_tune.py, 2026-12-05; B16, S_kv 16384, pages of 64, CUDA-graph replays).
# 128 heads (two blocks of 64 rows, 8 warps, one program per SM): 322 us, 227 TFLOP/s; ncu: DRAM reads 304 MB (the
# cache once), 255 registers a thread, tensor pipe 38 % active: compute-bound (242 FLOP per cache byte, above the
# H200's ridge), held back by register pressure (the 64 x 512 fp32 accumulator). 4 warps: 918 us (spills); 32-row
# blocks: 517 us; 128-row blocks do not fit shared memory. A TP slice of 16 heads (one 16-row block, memory-bound):
# 112 us, 2.7 TB/s, with two programs per SM.
# The configuration above, kept as the pointer-load baseline (tma=False) that the TMA ones are timed against:
MLA_CONFIG_POINTERS = dict(block_h=64, block_n=64, num_warps=8, num_stages=2, ctas_per_sm=1, max_splits=64, tma=False)
MLA_CONFIG_NARROW_POINTERS = dict(MLA_CONFIG_POINTERS, block_h=16, block_n=32, num_warps=4, ctas_per_sm=2)
# Timed on an H100, not yet on the H200 (docs/experiments/mla-decode-sass.md; benchmarks/h200/mla_tune.py times them
# against the above): at 128 heads the pointer configuration wins (this TMA one 0.49-0.56x), at 16 the TMA one
# (1.06x), which is what prepare()'s per-input choice below picks; the defaults wait on the H200's timing. Compiled for sm_90, the pointer configuration spills inside its loop (255 registers, 248 bytes of stack,
# 44 LDL a trip: the 64-bit addresses of its cp.async copies on top of the 64 x 512 fp32 accumulator); with the
# latent tile through TMA descriptors (tma: where every block is whole, `_triton_mla.tma_fits`) and 16 keys a block,
# 4 stages, nothing spills (246 registers). Narrow: 3 stages (the TMA copies are issued by one thread, so deeper
# pipelining costs no registers). Where TMA does not fit the cache, the same configuration runs with pointer loads.
MLA_CONFIG = dict(MLA_CONFIG_POINTERS, block_n=16, num_stages=4, tma=True)
# fewer than 64 rows of queries:
MLA_CONFIG_NARROW = dict(MLA_CONFIG_NARROW_POINTERS, num_stages=3, tma=True)
# On a GPU, prepare() times each of these at each split choice on the input itself (`fastest`, untimed setup), so
# the pointer baseline stays the choice wherever the TMA configuration is not faster.
MLA_CANDIDATES = {"wide": (MLA_CONFIG, MLA_CONFIG_POINTERS), "narrow": (MLA_CONFIG_NARROW, MLA_CONFIG_NARROW_POINTERS)}
# The split count, like triton-splitkv's, is picked per input at setup by timing (the TP slice ran 113-144 us at 2-8
# programs per SM, not in order): the configuration above and these.
MLA_SPLIT_CHOICES = {"wide": (1, 2), "narrow": (2, 4, 6)}
