"""Ahead-of-time compilation of the shared Triton attention forward (`_triton_common._attn_fwd`) and of triton-mla's
partial kernel (`_triton_mla._mla_partial`) for `sm_<arch>` without a GPU: ptxas ships with triton, so the SASS, the
registers and any spill of a configuration can be checked anywhere (tests/kernels/test_triton_sass.py,
test_mla_sass.py). Imports triton at the top, as `_triton_common` does.
"""

from __future__ import annotations

import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels_under_test._triton_common import MODE_BF16, Config, _attn_fwd, _constexprs, split_qk_dim
from kernels_under_test._triton_mla import _mla_partial, block_rows

__all__ = ["compile_for", "compile_mla", "disassemble"]


def compile_for(
    *, mode: int, dqk: int, dv: int, causal: bool, config: Config, tau: float, sigma: float = 0.0, beta: float = 0.0,
    v_transposed: bool = False, arch: int = 90, proton: bool = False, bulk=None,
):
    """Compile ahead of time for `sm_<arch>` without a GPU (ptxas ships with triton): SASS, registers, spills.

    Disassemble `.asm["cubin"]` with triton's bundled cuobjdump (`-sass`, `-res-usage`: STACK > 0 is a
    spill); `.metadata.shared` is the shared memory it needs. Strides are specialised as a launch would.
    """
    lo, hi = split_qk_dim(dqk)
    elem = "fp8e4nv" if mode != MODE_BF16 else "bf16"
    bn = config.block_n
    if config.use_tma:
        vblock = f"{dv},{bn}" if v_transposed else f"{bn},{dv}"
        sig = {"Q": f"*{elem}", "K": f"tensordesc<{elem}[{bn},{lo}]>", "K2": f"tensordesc<{elem}[{bn},{hi or lo}]>",
               "V": f"tensordesc<{elem}[{vblock}]>"}
    else:
        sig = {name: f"*{elem}" for name in ("Q", "K", "K2", "V")}
    sig.update(Out="*bf16", qk_scale="fp32", out_scale="fp32")
    for name in ("stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn", "stride_vb",
                 "stride_vh", "stride_vn", "stride_vd", "stride_ob", "stride_oh", "stride_om", "HQ", "GROUP", "S"):
        sig[name] = "i32"
    consts = _constexprs(mode=mode, causal=causal, dqk=dqk, dv=dv, config=config, tau=tau, sigma=sigma, beta=beta,
                         use_tma=config.use_tma, v_transposed=v_transposed, proton=proton, bulk=bulk)
    unit = ("stride_vn",) if v_transposed else ("stride_vd",)  # what the JIT specialises for unit strides
    consts.update({name: 1 for name in unit})
    sig.update({name: "constexpr" for name in consts})
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(sig)
             if sig[name].startswith("*") or (sig[name] == "i32" and name not in ("HQ", "GROUP"))}
    src = ASTSource(fn=_attn_fwd, signature=sig, constexprs=consts, attrs=attrs)
    opts = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)


def compile_mla(config: dict, *, heads_q: int, dv: int = 512, dr: int = 64, seq_len: int = 1, page: int | None = 64,
                arch: int = 90):
    """triton-mla's partial kernel as `_triton_mla._bind` would launch it with `config` (block_h, block_n, num_warps,
    num_stages, tma) on a DeepSeek-shaped decode (dv latent + dr RoPE dims, one query per sequence, pages of `page`
    or a dense cache), compiled for `sm_<arch>`: the same products as `compile_for`."""
    hb, block_m = block_rows(config["block_h"], seq_len, heads_q)
    bn = config["block_n"]
    tma = bool(config.get("tma")) and not (page and page % bn)  # as `tma_fits` decides at bind
    sig = {"Q": "*bf16", "KV": "*bf16"}
    if tma:
        sig.update(KVD=f"tensordesc<bf16[{bn},{dv}]>", KRD=f"tensordesc<bf16[{bn},{dr}]>")
    else:
        sig.update(KVD="*bf16", KRD="*bf16")
    sig.update(PageTable="*i32", KvLens="*i32", CuQ="*i32", CuKv="*i32", Acc="*fp32", Mx="*fp32", Ls="*fp32",
               qk_scale="fp32", split_len="i32", HQ="i32")
    sig.update({name: "i32" for name in ("stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kt", "stride_pt")})
    consts = dict(HB=hb, SQ=seq_len, BLOCK_M=block_m, BLOCK_N=bn, DV=dv, DR=dr, PAGE=page or 1, PAGED=bool(page),
                  PACKED=False, CAUSAL=False, WINDOW=0, TMA=tma)
    sig.update({name: "constexpr" for name in consts})
    # the JIT's specialisation of this launch: pointers 16-byte aligned, every stride, split_len (a whole number of
    # blocks) and HQ (DeepSeek's 128, or a TP slice's 16) multiples of 16
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(sig) if sig[name].startswith("*") or sig[name] == "i32"}
    src = ASTSource(fn=_mla_partial, signature=sig, constexprs=consts, attrs=attrs)
    opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)


def disassemble(compiled, cuobjdump: str) -> tuple[str, str]:
    """(SASS, resource usage) of a compiled kernel, by triton's bundled `cuobjdump` (`-sass`, `-res-usage`: a
    STACK above 0 is a spill)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    return sass, usage
