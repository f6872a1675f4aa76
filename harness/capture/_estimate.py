"""What a capture will cost before anything is loaded: memory on the forward device, and time.

Memory: every parameter in the forward dtype (the whole model is loaded, even though the pass stops
after the last requested layer), plus the activations of one decoder layer at B x S tokens, plus a
fixed allowance for the runtime (CUDA context and workspaces). Time: the FLOPs of the layers that run
(2 x active parameters x tokens, plus causal attention) at the matrix-product rate measured on the
device in a fraction of a second, the load (disk or random initialisation) and the fp32 self-check.
These are estimates, stated with what they assume; the capture records what it actually used.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from harness.capture._models import architecture_config, read_config, resolve_model
from harness.errors import CaptureError

__all__ = ["CaptureEstimate", "estimate_capture", "check_fits", "device_free_bytes", "matmul_rate"]

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
RUNTIME_ALLOWANCE = {"cpu": 1 << 30, "gpu": 2 << 30}  # interpreter + torch on a CPU; context + cuBLAS/cuDNN on a GPU
ACTIVATION_MARGIN = 1.5  # allocator fragmentation and temporaries the per-layer count leaves out
FORWARD_EFFICIENCY = 0.5  # a forward pass reaches about half the rate of one large matrix product
DISK_BYTES_PER_S = 1e9  # reading safetensors weights; a local NVMe reads faster
# transformers dequantizes a GGUF file tensor by tensor in numpy: SmolLM2-135M's Q4_1 file (0.54 GB in fp32) took
# 3.4 s (its one parse 1 s, the tokenizer 1.2 s, the weights 1.2 s) on this project's shared 2-core CPU machine,
# with capture._model_io.parse_gguf_once (before it, a parse per reader and per call: 11 s; earlier, 132 s).
GGUF_BYTES_PER_S = 1.5e8


@dataclass(frozen=True, kw_only=True)
class CaptureEstimate:
    """The expected cost of one capture (bytes and seconds), and what the device has free."""

    model: str
    device: str
    dtype: str
    params: int
    weight_bytes: int
    activation_bytes: int
    runtime_bytes: int
    available_bytes: int | None
    flops: float
    flops_per_s: float
    load_s: float
    forward_s: float
    check_s: float
    random_weights: bool
    rate_measured: bool = True  # flops_per_s was timed on the device (else given or assumed)

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes + self.runtime_bytes

    @property
    def total_s(self) -> float:
        return self.load_s + self.forward_s + self.check_s

    @property
    def fits(self) -> bool:
        return self.available_bytes is None or self.total_bytes <= self.available_bytes

    def describe(self) -> str:
        """One line: what the capture will take, for printing before it starts."""
        free = f", {_gb(self.available_bytes)} free" if self.available_bytes is not None else ""
        init = "random init" if self.random_weights else "load"
        return (
            f"capture {self.model} on {self.device} in {self.dtype}: about {_gb(self.total_bytes)} of memory "
            f"(weights {_gb(self.weight_bytes)} for {self.params / 1e9:.2f} B parameters, activations "
            f"{_gb(self.activation_bytes)}, runtime {_gb(self.runtime_bytes)}{free}) and about "
            f"{_duration(self.total_s)} ({init} {_duration(self.load_s)}, forward {_duration(self.forward_s)} "
            f"for {self.flops / 1e12:.1f} TFLOP at {self.flops_per_s / 1e9:,.0f} GFLOP/s "
            f"{'measured here' if self.rate_measured else 'assumed'}, "
            f"self-check {_duration(self.check_s)})"
        )


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.1f} GB"


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s" if s >= 1 else f"{s:.1f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def device_free_bytes(device: str) -> int | None:
    """Free memory where the forward pass runs: the GPU's free memory, or the host's available memory."""
    if device == "cpu":
        try:
            import psutil

            return int(psutil.virtual_memory().available)
        except ImportError:
            return None
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return int(free)


@functools.lru_cache(maxsize=8)
def matmul_rate(device: str, dtype: str) -> float:
    """FLOP/s of a square matrix product on `device` in `dtype`, timed for about 0.2 s."""
    import torch

    n = 1024 if device == "cpu" else 8192
    dt = getattr(torch, dtype)
    a = torch.randn(n, n, device=device).to(dt)
    b = torch.randn(n, n, device=device).to(dt)
    sync = (lambda: torch.cuda.synchronize(torch.device(device))) if device != "cpu" else (lambda: None)
    torch.matmul(a, b)
    sync()
    reps, t0 = 0, time.perf_counter()
    while True:
        torch.matmul(a, b)
        reps += 1
        sync()
        if time.perf_counter() - t0 > 0.2:
            break
    return 2 * n**3 * reps / (time.perf_counter() - t0)


def _counts(spec, config, layers: tuple[int, ...]) -> tuple[int, int, dict]:
    """(total parameters, active parameters of the layers that run, config values) from a meta-device build:
    exact for any architecture transformers knows, and it allocates nothing."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    experts = getattr(config, "n_routed_experts", None) or getattr(config, "num_experts", None)
    top_k = getattr(config, "num_experts_per_tok", None) or 1
    decoder = getattr(model, "base_model", model)
    active = 0
    for index in range(max(layers) + 1):
        for name, p in decoder.layers[index].named_parameters():
            routed = experts and ".experts." in f".{name}" and p.shape[0] == experts
            active += p.numel() * (top_k / experts if routed else 1)
    return total, int(active), {k: getattr(config, k, None) for k in ("hidden_size", "intermediate_size",
                                                                      "moe_intermediate_size", "n_shared_experts")}


def estimate_capture(config, *, available_bytes: int | None = None, flops_per_s: float | None = None,
                     measure: bool = True) -> CaptureEstimate:
    """The expected memory and time of `capture(config)`, computed before any weight is read.

    `available_bytes` / `flops_per_s` replace what the device reports and measures (tests; planning
    for another machine). `measure=False` leaves free memory unknown and assumes 50 GFLOP/s (CPU) or
    500 TFLOP/s (GPU) instead of timing a matrix product.

    >>> from harness.capture import CaptureConfig, estimate_capture
    >>> e = estimate_capture(CaptureConfig(model="mistral-7b", layers=(16,), seq_len=8192), measure=False)
    >>> round(e.weight_bytes / 1e9, 1), e.device, e.dtype
    (29.0, 'cpu', 'float32')
    """
    spec = resolve_model(config.model)
    arch = architecture_config(spec) if spec.architecture else read_config(spec.path) if spec.path else None
    if arch is None:
        raise CaptureError(f"No architecture is known for {spec.name}; cannot estimate its capture.")
    total, active, dims = _counts(spec, arch, config.layers)
    width = _BYTES[config.dtype]
    tokens = config.batch * config.seq_len
    gpu = config.device != "cpu"
    inner = max(dims["intermediate_size"] or 0,
                (dims["moe_intermediate_size"] or 0) * ((getattr(arch, "num_experts_per_tok", 0) or 0)
                                                        + (dims["n_shared_experts"] or 0)))
    per_token = 6 * dims["hidden_size"] + 3 * inner + 4 * spec.heads_q * max(spec.head_dim_qk, spec.head_dim_v)
    activation = int(ACTIVATION_MARGIN * tokens * per_token * width)
    attention = config.batch * spec.heads_q * config.seq_len**2 * (spec.head_dim_qk + spec.head_dim_v)  # causal
    flops = 2.0 * active * tokens + attention * (max(config.layers) + 1)
    rate_measured = flops_per_s is None and measure
    if flops_per_s is None:
        flops_per_s = matmul_rate(config.device, config.dtype) if measure else (5e14 if gpu else 5e10)
    if available_bytes is None and measure:
        available_bytes = device_free_bytes(config.device)
    random = bool(getattr(config, "random_weights", False))
    # Random init draws every parameter (~1 ns an element on a GPU, ~10 ns on a CPU core); loading reads the file.
    gguf = (spec.wheel_file or "").endswith(".gguf") or (spec.path is not None and spec.path.suffix == ".gguf")
    if config.weights is not None:
        gguf = str(config.weights).endswith(".gguf")
    rate = GGUF_BYTES_PER_S if gguf else DISK_BYTES_PER_S
    # A checkpoint's files hold bf16 (2 bytes a parameter); a GGUF is dequantized into 4-byte floats.
    load_s = total * (1e-9 if gpu else 1e-8) if random else total * (4 if gguf else 2) / rate
    check_flops = 2.0 * attention * len(config.layers)  # fp32 recompute of scores and output
    check_rate = flops_per_s * (0.05 if gpu else 0.5)  # fp32 without tensor cores; bf16 rate on a GPU
    return CaptureEstimate(
        model=spec.name, device=config.device, dtype=config.dtype, params=total, weight_bytes=total * width,
        activation_bytes=activation, runtime_bytes=RUNTIME_ALLOWANCE["gpu" if gpu else "cpu"],
        available_bytes=available_bytes, flops=flops, flops_per_s=flops_per_s, load_s=load_s,
        forward_s=flops / (flops_per_s * FORWARD_EFFICIENCY), check_s=check_flops / check_rate,
        random_weights=random, rate_measured=rate_measured,
    )


def check_fits(estimate: CaptureEstimate) -> None:
    """Refuse, with the numbers, a capture whose estimate exceeds the device's free memory."""
    if estimate.fits:
        return
    where = "the GPU" if estimate.device != "cpu" else "this machine"
    half = (" In bfloat16 the weights take half (--capture-dtype bfloat16)." if estimate.dtype == "float32" else "")
    gpu = " Capture on a GPU (--capture-device cuda:0) if this machine has one." if estimate.device == "cpu" else ""
    raise CaptureError(
        f"Capturing {estimate.model} on {estimate.device} in {estimate.dtype} needs about "
        f"{_gb(estimate.total_bytes)} (weights {_gb(estimate.weight_bytes)} for {estimate.params:,} parameters, "
        f"activations of one layer at the requested batch x seq-len {_gb(estimate.activation_bytes)}, runtime "
        f"{_gb(estimate.runtime_bytes)}), but {where} has {_gb(estimate.available_bytes)} free. Nothing was "
        f"loaded.{half}{gpu} Or use a shorter --seq-len / fewer windows, or a machine with more memory."
    )
