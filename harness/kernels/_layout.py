"""The layout hint of a failed gate: a plain callable whose output is right for the other layout (harness.kernels._gate)."""

from __future__ import annotations

from harness.kernels._reference import reference_attention

__all__ = ["layout_hint"]

# Positions the layout check recomputes: a handful is enough to tell a swapped layout from a wrong result.
_LAYOUT_PROBES = 8


def layout_hint(kernel, inputs, out, compare) -> str:
    """A sentence when a plain callable's output is right for the other layout, else "".

    A function given [B, H, S, d] that reads it as [B, S, H, d] (or the reverse, declared bshd but written
    for SDPA's layout) computes attention across the heads axis at each position, in either case. That is
    checked against fp64 attention over the heads axis at a few positions only: cheap next to the gate's
    own reference. Dense self-attention with Hq = Hkv only: there the swapped call is itself well-formed."""
    import torch

    declared = kernel.extra.get("layout")
    s = inputs.shape
    if (declared not in ("bhsd", "bshd") or kernel.extra.get("quant") is not None or s.features()
            or s.heads_q != s.heads_kv or not isinstance(out, torch.Tensor) or out.shape != inputs.q.shape[:3] + (
                inputs.v.shape[-1],)):
        return ""
    at = torch.linspace(0, s.seq_len - 1, min(_LAYOUT_PROBES, s.seq_len), device=out.device).round().long().unique()
    across = [t[:, :, at].transpose(1, 2) for t in (inputs.q, inputs.k, inputs.v)]  # heads as the sequence
    alt = reference_attention(*across, scale=inputs.scale, causal=s.causal)
    if not compare(out[:, :, at].transpose(1, 2), alt).passed:
        return ""
    other = "bshd" if declared == "bhsd" else "bhsd"
    fix = ("name it `module:fn@bshd`, pass --layout bshd, or declare `@harness.kernels.convention(layout=\"bshd\")`"
           if other == "bshd" else "drop @bshd / --layout bshd / convention(layout=\"bshd\")")
    return (f" Its output is right for the other layout: at {len(at)} positions it matches attention over the heads "
            f"axis, which is what a function written for {'(B, S, H, d)' if other == 'bshd' else '(B, H, S, d)'} "
            f"computes when handed {'(B, H, S, d)' if other == 'bshd' else '(B, S, H, d)'}. It would pass as layout "
            f"{other}: {fix}.")
