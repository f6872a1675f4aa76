"""Attention inputs: their shape, where they come from, and the tensors themselves.

An `InputSpec` is data (shape, dtype, source, seed; the shape may be a serving workload: decode against a KV
cache, a sliding window, a paged cache, sequences of different lengths, see `AttentionShape`); `make_inputs` turns it into `AttentionInputs`
on a device. Synthetic sources live here; a spec of captured activations names its own loader
(`harness.capture:source_loader`), so neither this package nor the runner needs to know where q, k, v
came from.

>>> from harness.inputs import AttentionShape, InputSpec, make_inputs
>>> spec = InputSpec(shape=AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=16, head_dim_qk=8),
...                  dtype="float32", source="gaussian:0.1", seed=0)
>>> x = make_inputs(spec, device="cpu")
>>> tuple(x.q.shape), tuple(x.k.shape)
((1, 4, 16, 8), (1, 2, 16, 8))
"""

from harness.inputs._fingerprint import changed, fingerprint, restore
from harness.inputs._shape import DTYPES, FEATURES, AttentionShape, torch_dtype
from harness.inputs._spec import AttentionInputs, InputSpec, check_finite, check_source, make_inputs, register_source
from harness.inputs._synthetic import SYNTHETIC_SOURCES, synthesize
from harness.inputs._workload import (
                                     INDEX_TENSORS,
                                     VARLEN_FORMS,
                                     Sequence,
                                     paged_cache,
                                     sequences,
                                     valid_rms,
                                     varlen_lengths,
)

__all__ = [
    "AttentionShape",
    "AttentionInputs",
    "InputSpec",
    "DTYPES",
    "FEATURES",
    "INDEX_TENSORS",
    "paged_cache",
    "Sequence",
    "sequences",
    "valid_rms",
    "VARLEN_FORMS",
    "varlen_lengths",
    "SYNTHETIC_SOURCES",
    "changed",
    "check_finite",
    "fingerprint",
    "check_source",
    "make_inputs",
    "register_source",
    "restore",
    "synthesize",
    "torch_dtype",
]
