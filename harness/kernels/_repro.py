"""Reproducibility: launch one kernel many times on the same inputs and count outputs that differ
bitwise from the first (protocol.md "Reproducibility"). A kernel with a race, or one whose reduction
order depends on scheduling, shows here; an interfering kernel between launches (a BF16 GEMM or another
attention call, on the same stream) changes what runs beside it and when.

Outputs are compared as raw bits (an integer view), not as numbers: 0.0 and -0.0 differ, and a NaN
equals the same NaN. Comparisons are queued on the device and read back once at the end, so the
launches stay back to back.

>>> from harness.inputs import AttentionShape, InputSpec, make_inputs
>>> from kernels_under_test.sdpa import registry
>>> x = make_inputs(InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=32, head_dim_qk=16),
...                 dtype="float32"), device="cpu")
>>> reproducibility(registry.get("sdpa-cpu"), x, launches=5).differing
0
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["ReproReport", "INTERFERERS", "reproducibility"]

INTERFERERS = {
    "gemm": "a BF16 matrix product between launches",
    "attention": "a torch SDPA call on the same inputs between launches",
}


@dataclass(frozen=True, kw_only=True)
class ReproReport:
    kernel: str
    launches: int  # including the first, whose output is the reference
    differing: int  # launches whose output differs bitwise from the first
    first_differing: int | None  # index of the first such launch (the first launch is 0)
    max_abs_diff: float  # largest |difference| from the first output over all launches (0 if none)
    interfere: str | None

    @property
    def reproducible(self) -> bool:
        return self.differing == 0

    def summary(self) -> str:
        with_ = f" with {INTERFERERS[self.interfere]}" if self.interfere else ""
        if self.reproducible:
            return f"{self.kernel}: all {self.launches} outputs bitwise identical{with_}"
        return (
            f"{self.kernel}: {self.differing} of {self.launches - 1} launches differ bitwise from the first{with_} "
            f"(first at launch {self.first_differing}, max |diff| {self.max_abs_diff:.3g})"
        )


def _bits(t):
    import torch

    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[t.element_size()]) if t.is_floating_point() else t


def _interferer(kind: str, inputs):
    import torch

    if kind == "gemm":
        # Big enough to occupy every SM of a large GPU for a while, small on the CPU.
        n = 4096 if inputs.q.is_cuda else 256
        g = torch.Generator().manual_seed(0)
        a = torch.randn((n, n), generator=g).to(device=inputs.q.device, dtype=torch.bfloat16)
        b = torch.randn((n, n), generator=g).to(device=inputs.q.device, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)
    if kind == "attention":
        import torch.nn.functional as F

        q, k, v = inputs.q, inputs.k, inputs.v
        gqa = q.shape[1] != k.shape[1]
        return lambda: F.scaled_dot_product_attention(
            q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale, enable_gqa=gqa
        )
    known = ", ".join(f"{k!r} ({v})" for k, v in INTERFERERS.items())
    raise ConfigError(f"Unknown interfering kernel {kind!r}; use one of {known}, or none.")


def reproducibility(kernel, inputs, *, launches: int = 200, interfere: str | None = None, launch=None) -> ReproReport:
    """Launch `kernel` `launches` times on `inputs` and count outputs bitwise different from the first.

    `launch` may be a closure already prepared (e.g. after the gate); else `kernel.prepare(inputs)`.
    Each output is compared before the next launch can overwrite it (same stream), so a kernel that
    reuses one output buffer is compared correctly.
    """
    import torch

    if launches < 2:
        raise ConfigError(f"Reproducibility needs at least 2 launches to compare, got {launches}.")
    launch = launch or kernel.prepare(inputs)
    between = _interferer(interfere, inputs) if interfere else None
    first = launch().clone()
    first_bits = _bits(first)
    first_f = first.float() if first.is_floating_point() else first.double()
    differs = torch.zeros(launches, dtype=torch.bool, device=first.device)
    max_diff = torch.zeros((), dtype=torch.float64, device=first.device)
    for i in range(1, launches):
        if between is not None:
            between()
        out = launch()
        if out.shape != first.shape or out.dtype != first.dtype:
            raise ConfigError(
                f"Kernel {kernel.name!r} returned {tuple(out.shape)} {out.dtype} at launch {i}, but "
                f"{tuple(first.shape)} {first.dtype} at launch 0: a launch must always return the same kind of output."
            )
        differs[i] = torch.ne(_bits(out), first_bits).any()
        d = (out.float() if out.is_floating_point() else out.double()) - first_f
        max_diff = torch.maximum(max_diff, torch.nan_to_num(d.abs().max().double(), nan=0.0))
    flags = differs.cpu()
    hits = torch.nonzero(flags).flatten().tolist()
    return ReproReport(
        kernel=kernel.name, launches=launches, differing=len(hits), first_differing=hits[0] if hits else None,
        max_abs_diff=float(max_diff), interfere=interfere,
    )
