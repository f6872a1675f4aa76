"""Run by tests/kernels/test_decode_kernels.py in a process of its own (TRITON_INTERPRET=1 must be set before
triton is first imported): triton-splitkv through the correctness gate on every shape kind, one JSON line per
case. Importing this module does nothing."""

from __future__ import annotations

CASES = {
    "decode q1": dict(seq_len=1),
    "decode q3 causal": dict(),
    "decode q3 not causal": dict(causal=False),
    "decode window 5": dict(window=5),
    "window not causal": dict(seq_len=7, window=3, causal=False),
    "self-attention (q = kv)": dict(seq_len=11),
    "paged 4": dict(page_size=4),
    "paged 3 window 4": dict(page_size=3, window=4),
    "varlen decode": dict(batch=3, seq_len=2, kv_lens=(5, 1, 11)),
    "varlen paged": dict(batch=3, seq_len=1, kv_lens=(9, 4, 11), page_size=4),
    "varlen paged window": dict(batch=3, seq_len=3, kv_lens=(9, 2, 11), page_size=2, window=3),
    # several splits merged (block_n 16, at most 8 splits): GQA 8/1 with 4 queries fills half a tile
    "splits paged 16": dict(seq_len=1, seq_len_kv=70, page_size=16, config=dict(block_n=16, max_splits=8)),
    "splits GQA 8/1 window": dict(seq_len=4, seq_len_kv=70, heads_q=8, heads_kv=1, window=20,
                                  config=dict(block_n=16, max_splits=8)),
    "splits varlen paged 8": dict(batch=3, seq_len=2, seq_len_kv=90, kv_lens=(90, 3, 47), page_size=8,
                                  config=dict(block_n=16, max_splits=8)),
    # the grid with the KV heads fastest (a paged candidate)
    "heads first paged 4": dict(batch=3, seq_len=2, seq_len_kv=90, kv_lens=(90, 3, 47), page_size=4,
                                config=dict(block_n=16, max_splits=8, heads_first=True)),
    "heads first dense GQA 8/1": dict(seq_len=4, seq_len_kv=70, heads_q=8, heads_kv=1, window=20,
                                      config=dict(block_n=16, max_splits=8, heads_first=True)),
}


def main() -> None:
    import json
    import os

    os.environ["TRITON_INTERPRET"] = "1"
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import default_registry
    from kernels_under_test import _triton_decode
    from tests.kernels.shape_gate import gate_shape

    kernel = default_registry().get("triton-splitkv")
    for i, (name, case) in enumerate(CASES.items()):
        case = dict(case)
        config = case.pop("config", None)
        shape = AttentionShape(**{**dict(batch=2, heads_q=4, heads_kv=2, seq_len=3, seq_len_kv=11, head_dim_qk=16),
                                  **case})
        x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1"), device="cpu")
        launch = _triton_decode.prepare(x, config=config)
        try:
            r = gate_shape(kernel, x, launch, closure_checks=i == 0)
            print(json.dumps({"case": name, "passed": r.passed, "max_abs_diff": r.max_abs_diff}), flush=True)
        except Exception as exc:  # a failing gate is this case's line, not the end of the others
            print(json.dumps({"case": name, "passed": False, "error": str(exc)}), flush=True)


if __name__ == "__main__":
    main()
