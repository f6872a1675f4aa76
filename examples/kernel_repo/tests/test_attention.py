"""Sustained-clock benchmarks of this repository's kernels, run by pytest-benchmark.

    python -m pytest tests --sustained-device cpu --sustained-quick --benchmark-autosave

Each test times the kernel until the clock settles, then over a window; pytest-benchmark's statistics are
the window's per-chunk times, `extra_info` holds the clock, power, cycles and limiter, and the terminal
summary prints them per test. A plain function is passed as it is; a declared kernel by its object or name.
"""

from example_kernels import registry
from example_kernels.plain import attention

from harness.inputs import AttentionShape, InputSpec

SHAPE = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=128, head_dim_qk=32)


def test_example_attention(sustained):
    sustained(registry.get("example-attention"), InputSpec(shape=SHAPE, dtype="float32", source="gaussian:0.1"))


def test_plain_function(sustained):
    sustained(attention, inputs=InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1"))
