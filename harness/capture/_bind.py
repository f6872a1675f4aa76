"""One kernel in every attention layer of a model (`bench in-model`): prepared once per layer, gated per layer,
launched once per attention call.

`bind(forward, kernel)` gives each layer buffers of its own, of that layer's shape and in bf16, filled with the
reference pass's q, k, v; prepares the kernel on them (`kernel.prepare`: its setup is never inside a forward) and
puts each layer through the correctness gate (`harness.kernels.gate`: the numerics every timed kernel is judged
by). A kernel that fails on any layer is refused for the whole model, naming the layer. In the forward, each call
copies the model's q, k, v into the layer's buffers (contiguous, as kernels take them; outside the attention
bracket and the same for every kernel; a decode step's kernel reads a bf16 KV cache in place) and calls the
layer's launch closure.

A kernel that quantizes or copies its inputs in prepare() (`reads_inputs_at_launch` False: the FP8 kernels) would
attend over the first call's q, k, v in every later call. Its launch closure may carry `refresh()`, which redoes
that work from inputs.q/k/v into the same buffers without launching; in the model it runs before each launch,
inside the attention bracket (it is work the kernel's path adds per call). One without it is refused, saying so;
`refresh` is checked to make the output follow new inputs before anything is timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.capture._forward import KERNEL_DTYPE, ModelForward
from harness.errors import GateFailure, KernelError
from harness.inputs import AttentionInputs, torch_dtype
from harness.kernels import gate as run_gate

__all__ = ["BoundForward", "MarkedForward", "bind"]


@dataclass(eq=False)
class _Slot:
    layer: int
    inputs: Any  # AttentionInputs the launch reads
    launch: Callable[[], Any]
    refresh: Callable[[], None] | None
    shares_kv: bool  # k, v are the decode cache's own tensors


@dataclass(frozen=True, kw_only=True)
class MarkedForward:
    """One forward with marks around every attention call: its total, and per call (layer, ns copying q, k, v into
    the layer's buffers, ns in the kernel: refresh and launch, ns of that in refresh(): 0 for a kernel without one)."""

    total_ns: int
    calls: tuple[tuple[int, int, int, int], ...]


@dataclass(kw_only=True, eq=False)
class BoundForward:
    """The model's forward with one kernel in every attention layer (`bind`)."""

    forward: ModelForward
    kernel: Any
    slots: dict[int, _Slot] = field(default_factory=dict)
    gates: dict[int, Any] = field(default_factory=dict)  # layer -> GateResult (None without the gate)

    def run(self):
        """One forward pass (or decode step) with the kernel in every layer; the last position's logits."""
        swap = self.forward.swap
        swap.bound = self
        try:
            return self.forward.run()
        finally:
            swap.bound = None

    def timed(self, device) -> int:
        """One forward between two device marks, ns (no marks inside)."""
        start = device.mark()
        self.run()
        end = device.mark()
        device.wait(end)
        return device.elapsed_ns(start, end)

    def marked(self, device) -> MarkedForward:
        """One forward with device marks around each attention call (CUDA events on a GPU; host timestamps on the
        CPU, whose torch calls return when done): before the copy, before the kernel, after it, and between the
        kernel's refresh() and its launch when it has a refresh()."""
        swap = self.forward.swap
        marks: list = []
        swap.marks, swap.mark = marks, device.mark
        try:
            start = device.mark()
            self.run()
            end = device.mark()
        finally:
            swap.marks = swap.mark = None
        device.wait(end)
        ns = device.elapsed_ns
        return MarkedForward(total_ns=ns(start, end),
                             calls=tuple((layer, ns(a, b), ns(b, c), ns(b, r) if r is not None else 0)
                                         for layer, a, b, r, c in marks))


def _inputs(forward: ModelForward, layer: int, *, kv=None):
    q, k, v, scale = forward.calibration[layer]
    k, v = kv if kv is not None else (k.clone(), v.clone())
    return AttentionInputs(q=q.clone(), k=k, v=v, shape=forward.shape(), dtype=KERNEL_DTYPE, scale=scale,
                           source=f"{forward.spec.name} layer {layer}" + (" (random weights)" * forward.random_weights))


def bind(forward: ModelForward, kernel, *, gate: bool = True, on_layer: Callable[[int], None] | None = None,
         sync: Callable[[Any], None] | None = None) -> BoundForward:
    """Prepare `kernel` on every layer's reference q, k, v and gate it there (see the module doc). Raises
    GateFailure (the layer named) or KernelError; nothing of the kernel runs inside a forward before this returns."""
    def gate_one(inputs, launch, **kw):
        return run_gate(kernel, inputs, launch, **kw) if sync is None else run_gate(kernel, inputs, launch, sync=sync,
                                                                                      **kw)

    refreshed = not kernel.extra.get("reads_inputs_at_launch", True)
    bound = BoundForward(forward=forward, kernel=kernel)
    for layer in forward.layers:
        if on_layer is not None:
            on_layer(layer)
        x = _inputs(forward, layer)
        launch = kernel.prepare(x)
        refresh = getattr(launch, "refresh", None) if refreshed else None
        if refreshed and not callable(refresh):
            raise KernelError(
                f"Kernel {kernel.name!r} quantizes or copies q, k, v in prepare() (it declares reads_inputs_at_launch "
                f"False) and its launch closure has no refresh(): inside a model every call has new q, k, v, so its "
                f"launch would attend over the first call's. Give the closure a refresh() that redoes that work from "
                f"inputs.q/k/v into the same buffers without launching (kernels_under_test/triton_fp8.py shows one). "
                f"It is not timed in the model.")
        _check_output(kernel, x, launch, layer=layer, model=forward.spec.name)
        try:
            bound.gates[layer] = gate_one(x, launch) if gate else None
            if gate and refresh is not None:
                _check_refresh(kernel, x, launch, refresh, gate_one)
        except GateFailure as exc:
            failure = GateFailure(f"{exc} In the model every layer is gated before anything is timed, so {kernel.name!r} "
                                  f"is not timed in {forward.spec.name} at all.")
            failure.gate = getattr(exc, "gate", None)
            raise failure from None
        kv = forward.cache_kv(layer)
        if kv is not None:  # decode: a launch of its own on the cache's tensors, the same values the gate judged
            x = _inputs(forward, layer, kv=kv)
            launch = kernel.prepare(x)
            refresh = getattr(launch, "refresh", None) if refreshed else None
        bound.slots[layer] = _Slot(layer=layer, inputs=x, launch=launch, refresh=refresh, shares_kv=kv is not None)
    return bound


def _check_output(kernel, x, launch, *, layer: int, model: str) -> None:
    """One launch's output is the layer's attention output as the model needs it: a tensor [B, Hq, S_q, dv] on the
    inputs' device in the kernel's output dtype (bf16 unless it declares another), as a timed kernel's must be."""
    import torch

    out = launch()
    want, dtype = tuple(x.shape.out_shape()), torch_dtype(kernel.output_dtype or KERNEL_DTYPE)
    got = (type(out).__name__ if not isinstance(out, torch.Tensor) else
           f"{str(out.dtype).replace('torch.', '')} {list(out.shape)} on {out.device}")
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want or out.dtype != dtype or out.device != x.q.device:
        raise KernelError(f"in layer {layer} of {model} its launch returned {got}; the attention output there is "
                          f"{str(dtype).replace('torch.', '')} {list(want)} on {x.q.device}. Return the output in that "
                          f"shape and dtype (a registered kernel that writes another dtype declares output_dtype)")


def _check_refresh(kernel, x, launch, refresh, gate_one) -> None:
    """refresh() must make the launch follow q changed in place: q halved (exact in bf16 and, away from the
    subnormals, in e4m3 too), refresh, launch, judged against attention on the new q; then q and the kernel's
    buffers are put back."""
    x.q.mul_(0.5)
    try:
        refresh()
        gate_one(x, lambda: launch(), check_fresh=False)
    except GateFailure as exc:
        raise GateFailure(f"Kernel {kernel.name!r}: after q was changed in place and refresh() called, its launch did "
                          f"not follow the new q ({exc}). refresh() must redo prepare()'s work on the current "
                          f"inputs. It is not timed.") from None
    finally:
        x.q.mul_(2.0)
        refresh()
