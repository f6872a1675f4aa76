"""Sustained-clock benchmarks of this repository's kernels, run by pytest-benchmark.

    pytest tests --sustained-device cpu --sustained-quick --benchmark-autosave
    pytest tests --sustained-device cpu --sustained-quick --benchmark-compare --benchmark-compare-fail=median:5%

Each test times the kernel until the clock settles, then over a window; pytest-benchmark's statistics are
the window's per-chunk times, and `extra_info` holds the clock, power, cycles and limiter.
"""

import pytest
from example_kernels import registry

from harness.inputs import AttentionShape, InputSpec

SHAPE = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=128, head_dim_qk=32)


@pytest.mark.parametrize("source", ["gaussian:0.1", "gaussian:1"])
def test_example_attention(sustained, source):
    sustained(registry.get("example-attention"), InputSpec(shape=SHAPE, dtype="float32", source=source))
