"""Run by tests/kernels/test_mla_kernel.py in a process of its own (TRITON_INTERPRET=1 must be set before triton is
first imported): triton-mla, and mutants of its source, through the correctness gate against the fp64 reference on
MLA shapes (dense, paged, varlen, windowed, several splits), with every load the interpreter makes from the latent
cache counted by address. One JSON line per case. Importing this module does nothing.

A mutant is the kernel's own source with one line replaced (each replacement must match exactly once, so a
refactor of the kernel that drops the line fails the test instead of leaving the mutant a silent copy)."""

from __future__ import annotations

# Small dims for speed (32 latent + 16 RoPE), one case at DeepSeek's own (512 + 64).
BASE = dict(batch=2, heads_q=4, heads_kv=1, seq_len=1, seq_len_kv=40, head_dim_qk=48, head_dim_v=32, latent_kv=True)
SPLITS = dict(block_n=16, max_splits=8, ctas_per_sm=8)  # 4 "SMs" in the interpreter: several splits to merge
CASES = {
    "dense q1": dict(),
    "paged 8": dict(page_size=8),
    "paged 4, splits": dict(page_size=4, config=SPLITS),
    "two queries causal": dict(seq_len=2, config=SPLITS),
    "varlen paged": dict(batch=3, kv_lens=(40, 3, 17), page_size=4, config=SPLITS),
    "varlen dense": dict(batch=3, seq_len=2, kv_lens=(9, 1, 40)),
    "window 7": dict(window=7, config=SPLITS),
    "heads in two blocks": dict(heads_q=8, config=dict(block_h=4, block_n=16)),
    "deepseek dims 576/512": dict(heads_q=16, head_dim_qk=576, head_dim_v=512, seq_len_kv=20, page_size=16),
    # every block whole (lengths and pages multiples of block_n): the latent tiles come through TMA descriptors
    "tma dense": dict(seq_len_kv=48, config=dict(SPLITS, tma=True)),
    "tma paged 32, splits": dict(seq_len_kv=64, page_size=32, config=dict(SPLITS, tma=True)),
    "tma varlen paged": dict(batch=3, seq_len_kv=48, kv_lens=(48, 16, 32), page_size=16, config=dict(SPLITS, tma=True)),
    "tma two queries causal": dict(seq_len=2, seq_len_kv=32, config=dict(SPLITS, tma=True)),
}
# the cases whose every block is whole, so the latent tiles come through TMA (the others keep masked pointer loads)
TMA_CASES = {name for name in CASES if name.startswith("tma ")}

# name -> (the line of _triton_mla.py as written, its mutant)
MUTANTS = {
    "latent read twice": (
        "c = tl.load(rows + offs_c[None, :], mask=t_ok[:, None], other=0.0)  # the latent tile: loaded once",
        "c = tl.load(rows + offs_c[None, :], mask=t_ok[:, None], other=0.0) + 0 * tl.load(rows + offs_c[None, :], "
        "mask=t_ok[:, None], other=0.0)"),
    "latent read twice, tma": (
        "c = KVD.load([row, 0])  # the latent tile: loaded once",
        "c = KVD.load([row, 0]) + 0 * KVD.load([row, 0])"),
    "rope part dropped": (
        "s = tl.dot(q_rope, tl.trans(kr), acc=tl.dot(q_lat, tl.trans(c)))",
        "s = tl.dot(q_lat, tl.trans(c))"),
    "wrong page": (  # the page table's own index taken for the page: the pool read as if never shuffled
        "page = tl.load(PageTable + bb * stride_pt + t // PAGE, mask=t_ok, other=0).to(tl.int64)",
        "page = (bb * stride_pt + t // PAGE).to(tl.int64)"),
    "wrong page, tma": (
        "page = tl.load(PageTable + bb * stride_pt + start // PAGE)",
        "page = bb * stride_pt + start // PAGE"),
    "tma row in page dropped": (  # every block of a page read at the page's first row
        "row = page * (stride_kb // stride_kt) + start % PAGE",
        "row = page * (stride_kb // stride_kt)"),
}
MUTANT_CASES = {"latent read twice": "paged 8", "latent read twice, tma": "tma paged 32, splits",
                "rope part dropped": "dense q1", "wrong page": "paged 4, splits", "wrong page, tma": "tma paged 32, splits",
                "tma row in page dropped": "tma paged 32, splits"}


class LoadCounter:
    """Every address the interpreter loads from while `on`, patched into its builder (undone by `close`)."""

    def __init__(self):
        from triton.runtime import interpreter as it

        self.it, self.on, self.addresses = it, False, []
        self.orig = it.InterpreterBuilder.create_masked_load
        counter = self

        def create_masked_load(builder, ptrs, mask, other, cache_policy, is_volatile):
            if counter.on:
                counter.addresses.append(ptrs.data[mask.data].astype("uint64").ravel().copy())
            return counter.orig(builder, ptrs, mask, other, cache_policy, is_volatile)

        it.InterpreterBuilder.create_masked_load = create_masked_load

    def close(self):
        self.it.InterpreterBuilder.create_masked_load = self.orig

    def reads_of(self, t, elements):
        """(least, most) times one of `elements` (flat indices into `t`) was loaded, and how many were never."""
        import numpy as np

        loaded = np.concatenate(self.addresses) if self.addresses else np.zeros(0, "uint64")
        base, item = t.data_ptr(), t.element_size()
        inside = loaded[(loaded >= base) & (loaded < base + t.numel() * item)]
        counts = np.bincount(((inside - base) // item).astype("int64"), minlength=t.numel())[elements]
        return int(counts.min()), int(counts.max()), int((counts == 0).sum())


def used_elements(x):
    """Flat indices into the cache k of every element of a token some sequence holds (a pool's spare pages and a
    sequence's unused page tail are not used)."""
    import torch

    s = x.shape
    d = s.head_dim_qk
    idx = []
    for b, n in enumerate(s.kv_lengths()):
        t = torch.arange(n)
        if s.paged:
            slot = x.page_table[b].long()[t // s.page_size] * s.page_size + t % s.page_size
        elif s.packed:
            slot = x.cu_seqlens_kv[b].long() + t
        else:
            slot = b * s.seq_len_kv + t
        idx.append((slot[:, None] * d + torch.arange(d)[None, :]).ravel())
    return torch.cat(idx).numpy()


def mutant_module(name: str, tmp):
    """_triton_mla with MUTANTS[name] applied, imported from a file of its own (Triton reads a kernel's source)."""
    import importlib.util
    from pathlib import Path

    from kernels_under_test import _triton_mla

    src = Path(_triton_mla.__file__).read_text()
    old, new = MUTANTS[name]
    if src.count(old) != 1:
        raise AssertionError(f"mutant {name!r}: the line {old!r} is not in _triton_mla.py exactly once")
    path = Path(tmp) / f"_triton_mla_{name.replace(' ', '_')}.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(module, name: str, case: dict, counter: LoadCounter, *, closure_checks: bool = False) -> dict:
    from harness.inputs import AttentionShape, InputSpec, make_inputs
    from harness.kernels import default_registry
    from tests.kernels.shape_gate import gate_shape

    case = dict(case)
    config = case.pop("config", None)
    shape = AttentionShape(**{**BASE, **case})
    x = make_inputs(InputSpec(shape=shape, dtype="bfloat16", source="gaussian:1"), device="cpu")
    launch = module.prepare(x, config=config)
    counter.addresses, counter.on = [], True
    launch()
    counter.on = False
    least, most, never = counter.reads_of(x.k, used_elements(x))
    line = {"case": name, "reads_min": least, "reads_max": most, "never_read": never, "tma": launch.config["tma"]}
    try:
        r = gate_shape(default_registry().get("triton-mla"), x, launch, closure_checks=closure_checks)
        line.update(passed=r.passed, max_abs_diff=r.max_abs_diff)
    except Exception as exc:  # a failing gate is this case's line, not the end of the others
        line.update(passed=False, error=str(exc)[:300])
    return line


def main() -> None:
    import json
    import os
    import tempfile

    os.environ["TRITON_INTERPRET"] = "1"
    from kernels_under_test import _triton_mla

    counter = LoadCounter()
    try:
        for i, (name, case) in enumerate(CASES.items()):
            print(json.dumps(run_case(_triton_mla, name, case, counter, closure_checks=i == 0)), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for mutant, case_name in MUTANT_CASES.items():
                line = run_case(mutant_module(mutant, tmp), case_name, CASES[case_name], counter)
                print(json.dumps({**line, "mutant": mutant}), flush=True)
    finally:
        counter.close()


if __name__ == "__main__":
    main()
