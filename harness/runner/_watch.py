"""The output is checked while it is timed: a kernel that turns wrong after the gate is caught.

The gate judges a kernel's first calls. A kernel may pass them and then return something else (zeros, a
wrong shape, a cached tensor) once the timed launches start; without a check it would be timed, fast, and
reported as complete. So the output of the gate's first call, the one judged against fp64 attention, is kept
as row statistics (per row of dv values: its sum, sum of |x|, sum of squares and max |x|: 4 numbers per row,
1/16 to 1/64 of the output's size), and after every timed window the output of its LAST launch is compared
with them, then poisoned with NaN and recomputed by one more untimed launch (a cached tensor keeps the NaN),
then v is doubled in place for one more launch, whose output must double (a kept copy does not), and put back.

Nothing is added to the timed launches: the launcher keeps a reference to the output of the last launch of
each call (one store per call of `launches_per_call` launches, `runner._launch`), and the statistics are
computed after the window, when the device is idle. `benchmarks/output_watch_cost.py` prints both costs.

A correct kernel may be nondeterministic (split-K reductions, atomics): two of its outputs differ by at most
the sum of their errors against the reference. Each element may therefore move by
e = 2 x (the gate's max |diff|) + 2 x (the output format's unit roundoff) x max |row| + 1e-30,
and a row's sum by dv x e, its sum of squares by e x (2 sum|row| + dv x e). A zeroed, scaled, permuted or
stale output moves them far more. Without the gate (`--no-gate`) nothing was judged and nothing is watched.
"""

from __future__ import annotations

import math

from harness.errors import GateFailure

__all__ = ["OutputChanged", "OutputWatch"]

# Rows of the output converted to fp64 at once while its statistics are taken: bounds the temporary memory
# (128 MiB) on a large capture's output.
_ELEMENTS_PER_STEP = 1 << 24
_ROUNDOFF = {"torch.bfloat16": 2.0**-8, "torch.float16": 2.0**-11, "torch.float32": 2.0**-24,
             "torch.float64": 2.0**-53}


class OutputChanged(GateFailure):
    """A kernel's output after the gate no longer matches the output the gate passed: its row is gate_failed."""


def row_stats(out):
    """(sum, sum |x|, sum x^2, max |x|) of each row of `out` over its last axis, fp64, on its device."""
    import torch

    rows = out.reshape(-1, out.shape[-1]) if out.dim() else out.reshape(1, 1)
    step = max(1, _ELEMENTS_PER_STEP // max(1, rows.shape[1]))
    parts = []
    for i in range(0, rows.shape[0], step):
        x = rows[i:i + step].to(torch.float64)
        a = x.abs()
        parts.append(torch.stack((x.sum(-1), a.sum(-1), x.pow(2).sum(-1), a.amax(-1) if x.shape[1] else a.sum(-1))))
    return torch.cat(parts, dim=1) if parts else torch.zeros(4, 0, dtype=torch.float64, device=out.device)


class OutputWatch:
    """The gated output's row statistics (`first`), the tolerance once the gate passed (`arm`), and the check of
    an output taken after a timed window (`check`)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.stats = None
        self.shape = self.dtype = self.device = None
        self.max_diff = None  # the gate's max |diff| vs its reference: None until the gate passed

    @property
    def armed(self) -> bool:
        return self.stats is not None and self.max_diff is not None

    def first(self, out) -> None:
        """Keep the statistics of the gate's first output (called before the gate judges it)."""
        if self.stats is None:
            self.shape, self.dtype, self.device = tuple(out.shape), out.dtype, out.device
            self.stats = row_stats(out.detach())

    def arm(self, gate_result) -> None:
        diff = float(getattr(gate_result, "max_abs_diff", math.inf))
        self.max_diff = diff if math.isfinite(diff) else None

    def _refuse(self, text: str, during: str) -> None:
        raise OutputChanged(
            f"{self.who}: its output changed after the gate: {text}, in {during}. The gate passed its first calls; a "
            f"kernel must compute the same attention on every call. It is not timed on this input from this "
            f"repeat on; earlier repeats passed this same check.")

    def check(self, out, *, during: str, scale: float = 1.0) -> None:
        """Raise OutputChanged unless `out` matches the gated output (times `scale`: the output of inputs whose v
        was scaled so) within the tolerance (module docstring)."""
        import torch

        if not self.armed:
            return
        if not isinstance(out, torch.Tensor):
            self._refuse(f"its last launch returned {type(out).__name__}, not a tensor", during)
        if tuple(out.shape) != self.shape or out.dtype != self.dtype:
            self._refuse(f"its last launch returned a {str(out.dtype).replace('torch.', '')} tensor of shape "
                         f"{list(out.shape)}; the gate passed {str(self.dtype).replace('torch.', '')} {list(self.shape)}",
                         during)
        if out.device != self.device:
            self._refuse(f"its last launch returned a tensor on {out.device}; the gate passed one on {self.device}",
                         during)
        now = row_stats(out.detach())
        s1, sa, s2, amax = self.stats
        s1, sa, s2, amax = s1 * scale, sa * scale, s2 * scale * scale, amax * scale
        d = float(self.shape[-1]) if self.shape else 1.0
        e = 2.0 * self.max_diff * scale + 2.0 * _ROUNDOFF.get(str(self.dtype), 2.0**-8) * amax + 1e-30
        dev1, dev2 = (now[0] - s1).abs(), (now[2] - s2).abs()
        lim1, lim2 = d * e, e * (2.0 * sa + d * e)
        bad = ~((dev1 <= lim1) & (dev2 <= lim2))  # NaN and Inf compare False: they are bad rows
        n_bad = int(bad.sum())
        if not n_bad:
            return
        worst = int(torch.argmax(torch.where(bad, dev2 / lim2.clamp_min(1e-300), torch.zeros_like(dev2))
                                 .nan_to_num(nan=float("inf"))))
        nonfinite = int((~torch.isfinite(now[2])).sum())
        where = _row_index(worst, self.shape[:-1])
        ref = "gated" if scale == 1.0 else f"expected, {scale:g} x the gated"
        self._refuse(
            f"the {'last launch' if scale == 1.0 else 'launch'}'s output differs from "
            f"{'the output the gate passed' if scale == 1.0 else f'{scale:g} x the output the gate passed'} in {n_bad} of "
            f"{bad.numel()} rows"
            + (f" ({nonfinite} hold NaN or Inf)" if nonfinite else "")
            + f"; the worst, row {where}: sum {float(now[0][worst]):.6g} ({ref} {float(s1[worst]):.6g}), sum of "
              f"squares {float(now[2][worst]):.6g} ({ref} {float(s2[worst]):.6g}), allowed to move by "
              f"{float(lim1[worst]):.3g} and {float(lim2[worst]):.3g} (twice the gate's max |diff| "
              f"{self.max_diff:.3g} plus the output's rounding)", during)

    def check_fresh(self, again, out, *, during: str) -> None:
        """Overwrite `out` (the last launch's output) with NaN, call `again()` (one more launch, untimed) and
        check what it returns: a kernel that returns a cached tensor keeps the NaN."""
        import torch

        if not self.armed or not isinstance(out, torch.Tensor) or not torch.is_floating_point(out):
            return
        out.fill_(float("nan"))
        self.check(_values(again()), during=f"one more launch after {during}, its previous output overwritten with NaN "
                                  f"(a stale output: the launch closure returns a cached tensor)")


    def check_follows(self, again, inputs, *, during: str) -> None:
        """Scale v by 2 in place, call `again()` (one more launch, untimed) and check that its output is twice the
        gated one (attention is linear in v), then put v back exactly as it was: a kernel that stopped computing
        after the gate and returns a copy of an output it kept fails here. Left out where the check cannot hold:
        FP8 inputs (x2 may saturate e4m3), MLA (v is part of k)."""
        import torch

        v = getattr(inputs, "v", None)
        if (not self.armed or not isinstance(v, torch.Tensor) or not torch.is_floating_point(v) or v.element_size() < 2
                or getattr(inputs.shape, "latent_kv", False)):
            return
        saved = v.clone()
        try:
            v.mul_(2.0)
            self.check(_values(again()), during=f"one more launch after {during} on the same q, k and v scaled by 2 (the output "
                                      f"must double: a kernel that ignores its inputs returns a kept copy)", scale=2.0)
        finally:
            v.copy_(saved)


def _values(out):
    """An output as values (an output that requires grad is judged as its values)."""
    import torch

    return out.detach() if isinstance(out, torch.Tensor) and out.requires_grad else out


def _row_index(flat: int, lead: tuple) -> str:
    """A flat row index as its position in the output's leading axes, e.g. (b 0, h 3, s 17)."""
    names = ("b", "h", "s") if len(lead) == 3 else tuple(f"axis {i}" for i in range(len(lead)))
    at = []
    for size in reversed(lead):
        at.append(flat % max(size, 1))
        flat //= max(size, 1)
    return "(" + ", ".join(f"{n} {i}" for n, i in zip(names, reversed(at))) + ")"
