"""Corrections to Triton's CPU interpreter (TRITON_INTERPRET=1) for what the bundled kernels use.

The interpreter (triton 3.6 to 3.9) runs every dtype these kernels use, but three of its conversions are
wrong and it runs no inline PTX:
- tl.dot on bf16 multiplies the raw bit patterns (bf16 is stored as uint16): `bench error` printed a rel.
  RMS error of 2.1e9 for triton-bf16;
- fp32 -> fp8e4nv rounding loses the carry into the next binade (7.99 -> 4.0) and flushes subnormals;
- fp32 -> bf16 truncates instead of rounding to nearest even;
- inline PTX raises NotImplementedError: triton-fp8-exact forms its e4m3 codes by cvt.rn.satfinite
  (`_triton_common._e4m3_codes`), and pack_p rounds p by cvt.rn.{bf16,f16}x2.f32 (`_round_pairs`).
The corrections use torch's conversions, which round to nearest even like the GPU, and emulate those
PTX blocks element by element. `attention_launch` applies them whenever it builds a launch in the
interpreter; nothing is patched at import or on a GPU.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

__all__ = ["fix_interpreter", "interpreting"]

_MARK = "_harness_conversions_fixed"


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1): tests only, slow."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def fix_interpreter(set_attr=setattr) -> None:
    """Patch the interpreter's builder once per process (`set_attr`: a MonkeyPatch's setattr undoes it)."""
    import numpy as np  # noqa: PLC0415 - the registry imports this module for `interpreting`: no numpy there
    import torch
    import triton.language as tl
    from triton.runtime import interpreter as it

    builder = it.InterpreterBuilder
    if getattr(builder, _MARK, False):
        return

    def bf16_bits_to_f32(data):
        return (data.astype(np.uint32) << 16).view(np.float32)

    def f32_to(data, dtype):
        t = torch.from_numpy(np.ascontiguousarray(data, dtype=np.float32))
        if dtype == tl.bfloat16:
            return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return t.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8).numpy()  # cvt.rn.satfinite

    orig_dot, orig_fp_to_fp, orig_cast = builder.create_dot, builder.create_fp_to_fp, builder.cast_impl
    orig_asm = builder.create_inline_asm

    def create_dot(self, a, b, d, *args):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a = it.TensorHandle(bf16_bits_to_f32(a.data), tl.float32)
            b = it.TensorHandle(bf16_bits_to_f32(b.data), tl.float32)
        return orig_dot(self, a, b, d, *args)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if src.dtype.scalar == tl.float32 and dst_type.scalar in (tl.float8e4nv, tl.bfloat16):
            return it.TensorHandle(f32_to(src.data, dst_type.scalar), dst_type.scalar)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return it.TensorHandle(f32_to(src.data, tl.bfloat16), tl.bfloat16)
        return orig_cast(self, src, dst_type)

    def create_inline_asm(self, asm, constraints, values, types, is_pure, pack):
        # _e4m3_codes: fp32 -> e4m3 codes (round to nearest even, saturating at 448; the PTX triton 3.6
        # emits for `.to(tl.float8e4nv)` too); _round_pairs: fp32 -> bf16 / fp16, plus the rounded values
        # back in fp32. Any other PTX reaches the interpreter's own refusal.
        data = values[0].data if len(values) == 1 else None
        if data is not None and "cvt.rn.satfinite.e4m3x2.f32" in asm:
            out = [it.TensorHandle(f32_to(data, tl.float8e4nv), tl.uint8)]
        elif data is not None and "cvt.rn.bf16x2.f32" in asm:
            bits = f32_to(data, tl.bfloat16)
            out = [it.TensorHandle(bits, tl.bfloat16), it.TensorHandle(bf16_bits_to_f32(bits), tl.float32)]
        elif data is not None and "cvt.rn.f16x2.f32" in asm:
            half = torch.from_numpy(np.ascontiguousarray(data, dtype=np.float32)).half()
            out = [it.TensorHandle(half.numpy(), tl.float16), it.TensorHandle(half.float().numpy(), tl.float32)]
        else:
            return orig_asm(self, asm, constraints, values, types, is_pure, pack)
        return SimpleNamespace(get_result=lambda i: out[i])

    for name, fn in (("create_dot", create_dot), ("create_inline_asm", create_inline_asm),
                     ("create_fp_to_fp", create_fp_to_fp), ("cast_impl", cast_impl), (_MARK, True)):
        set_attr(builder, name, fn)
