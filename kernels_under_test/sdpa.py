"""PyTorch scaled_dot_product_attention, one kernel per backend.

`sdpa-flash`, `sdpa-cudnn`, `sdpa-efficient` and `sdpa-math` pin one CUDA backend each (so a change of
PyTorch's automatic choice can never silently change what is measured); `sdpa-cpu` is the CPU path.
GQA is passed through with `enable_gqa=True`, so no repeated K/V copy is timed.
"""

from __future__ import annotations

from harness.kernels import KernelRegistry

__all__ = ["registry"]

registry = KernelRegistry()

_BACKENDS = {
    "sdpa-flash": ("FLASH_ATTENTION", "FlashAttention-2 backend of torch SDPA"),
    "sdpa-cudnn": ("CUDNN_ATTENTION", "cuDNN fused attention backend of torch SDPA"),
    "sdpa-efficient": ("EFFICIENT_ATTENTION", "memory-efficient (xformers-style) backend of torch SDPA"),
    "sdpa-math": ("MATH", "unfused math backend of torch SDPA (materialises the score matrix)"),
}


def _cuda_available(device_kind: str) -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "no CUDA or ROCm GPU visible to PyTorch"
    return None


def _cudnn_available(device_kind: str) -> str | None:
    import torch

    reason = _cuda_available(device_kind)
    if reason:
        return reason
    if not torch.backends.cudnn.is_available():
        return "PyTorch was built without cuDNN"
    return None


def _make(backend_name: str):
    def prepare(inputs):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        q, k, v = inputs.q, inputs.k, inputs.v
        gqa = q.shape[1] != k.shape[1]
        causal, scale = inputs.shape.causal, inputs.scale

        def launch():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)

        # Fail here, in setup, when the backend rejects the shape, rather than inside a timed loop.
        with torch.no_grad():
            launch()
        return launch

    return prepare


for _name, (_backend, _doc) in _BACKENDS.items():
    registry.kernel(
        _name,
        dtypes={"bfloat16", "float16"} if _backend != "MATH" else {"bfloat16", "float16", "float32"},
        # ROCm builds of PyTorch expose the GPU as torch.cuda and have every backend but cuDNN.
        devices={"cuda"} if _backend == "CUDNN_ATTENTION" else {"cuda", "rocm"},
        availability=_cudnn_available if _backend == "CUDNN_ATTENTION" else _cuda_available,
        description=_doc,
    )(_make(_backend))


@registry.kernel(
    "sdpa-cpu",
    dtypes={"bfloat16", "float32", "float64"},
    devices={"cpu"},
    description="torch SDPA on the CPU (whatever backend PyTorch picks there)",
    tolerance=None,
)
def sdpa_cpu(inputs):
    import torch.nn.functional as F

    q, k, v = inputs.q, inputs.k, inputs.v
    gqa = q.shape[1] != k.shape[1]

    def launch():
        return F.scaled_dot_product_attention(q, k, v, is_causal=inputs.shape.causal, scale=inputs.scale, enable_gqa=gqa)

    return launch
