"""Plain attention functions as kernels: specs, the declared convention, the gate, layouts, GQA, FP8, identity."""

from __future__ import annotations

import hashlib
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from harness.errors import ConfigError, GateFailure, KernelError, UnsupportedInputError
from harness.inputs import AttentionShape, InputSpec, make_inputs
from harness.kernels import (
    CALLABLE_SIGNATURE,
    KernelRegistry,
    adapt_callable,
    convention,
    fp8_inputs,
    gate,
    spec_with_options,
)

SHAPE = AttentionShape(batch=1, heads_q=4, heads_kv=4, seq_len=32, head_dim_qk=16)
GQA = AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=32, head_dim_qk=16)

MODULE = '''
import torch.nn.functional as F

def attn(q, k, v, causal=True, scale=None):
    """SDPA with flash-attn's keyword names."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

def zeros(q, k, v, is_causal=True, scale=None):
    return q.new_zeros(q.shape)

def two_args(q, k):
    return q

def bshd(q, k, v, causal=True, softmax_scale=None):
    """Takes [B, S, H, d], as flash-attn does."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                                         scale=softmax_scale)
    return out.transpose(1, 2)
'''


def inputs_for(shape=SHAPE, dtype="float32", source="gaussian:1"):
    return make_inputs(InputSpec(shape=shape, dtype=dtype, source=source), device=torch.device("cpu"))


def gated(kernel, inputs):
    return gate(kernel, inputs, kernel.prepare(inputs))


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_attn.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "user_attn", raising=False)  # each test imports its own copy
    yield tmp_path
    sys.modules.pop("user_attn", None)


def test_module_function_is_adapted_and_passes_the_gate(user_module):
    kernel = KernelRegistry().get("user_attn:attn")
    assert kernel.name == "user_attn:attn" and kernel.source == "user_attn:attn"
    inputs = inputs_for()
    result = gated(kernel, inputs)
    assert result.passed and result.max_abs_diff < 1e-5
    # The launch calls the user's function on the harness's own tensors (no copy), so the gate's
    # in-place perturbation check ran and the output follows the inputs.
    assert kernel.extra["reads_inputs_at_launch"] is True
    out = kernel.prepare(inputs)()
    assert torch.allclose(out, F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, is_causal=True))


def test_file_path_function_is_loaded_from_that_file(user_module, monkeypatch, tmp_path):
    other = tmp_path / "sub"
    other.mkdir()
    (other / "mykern.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    kernel = KernelRegistry().get("sub/mykern.py:attn")
    assert kernel.name == "sub/mykern.py:attn"
    assert kernel.source.endswith(":attn")
    assert gated(kernel, inputs_for()).passed
    # relative to a base folder (bench commits: the repository's subfolder in each worktree)
    assert KernelRegistry().get("mykern.py:attn", base_dir=other).source == kernel.source


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(KernelError, match=r"the file .*nothere\.py does not exist"):
        KernelRegistry().get("nothere.py:attn", base_dir=tmp_path)


def test_zeros_are_refused_by_the_gate_with_numbers(user_module):
    kernel = KernelRegistry().get("user_attn:zeros")  # loads fine: the signature fits
    with pytest.raises(GateFailure, match=r"'user_attn:zeros' failed the correctness gate .*max \|diff\| [0-9.]+"):
        gated(kernel, inputs_for())


def test_wrong_signature_gets_the_signature_message(user_module):
    with pytest.raises(KernelError) as info:
        KernelRegistry().get("user_attn:two_args")
    assert "takes 2 positional parameter(s) (q, k), not q, k, v" in str(info.value)
    assert CALLABLE_SIGNATURE in str(info.value)


def test_plain_qkv_function_runs_non_causal_and_causal_inputs_name_the_fixes():
    def attn(q, k, v):  # the first function a user writes: no keywords at all
        return F.scaled_dot_product_attention(q, k, v)

    kernel = adapt_callable(attn)
    assert kernel.noncausal_only and not kernel.causal_only
    assert "non-causal only (no causal keyword)" in kernel.extra["convention"]
    noncausal = AttentionShape(batch=1, heads_q=4, heads_kv=4, seq_len=32, head_dim_qk=16, causal=False)
    assert gated(kernel, inputs_for(noncausal)).passed
    kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=False, device_kind="cpu")
    with pytest.raises(UnsupportedInputError) as info:  # the default causal run: refused up front, fixes named
        kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu")
    for fix in ("--no-causal", "`is_causal=True` keyword", "convention(causal=True)"):
        assert fix in str(info.value)


def test_causal_only_function_declares_its_mode_and_the_gate_checks_the_claim():
    def plain(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    noncausal = AttentionShape(batch=1, heads_q=4, heads_kv=4, seq_len=32, head_dim_qk=16, causal=False)
    with pytest.raises(GateFailure):  # undeclared, it is taken as non-causal, and its mask fails the gate
        gated(adapt_callable(plain), inputs_for(noncausal))
    kernel = adapt_callable(convention(causal=True)(plain))
    assert kernel.causal_only and gated(kernel, inputs_for()).passed
    with pytest.raises(UnsupportedInputError, match="supports causal attention only"):
        kernel.check_supports(dtype="float32", head_dim_qk=16, head_dim_v=16, causal=False, device_kind="cpu")


def test_required_extra_parameter_is_a_misfit():
    def needs(q, k, v, mask, is_causal=True):
        return q

    with pytest.raises(KernelError, match=r"requires parameter.s. mask, which are not among the names the harness "
                                          r"passes \(the causal flag: `is_causal` or `causal`;"):
        adapt_callable(needs)


def test_non_tensor_return_is_refused_in_prepare():
    def pair(q, k, v, is_causal=True, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale), None

    with pytest.raises(KernelError, match="returned tuple, not the output tensor"):
        adapt_callable(pair).prepare(inputs_for())


def test_bshd_layout_by_spec_suffix(user_module):
    inputs = inputs_for()
    kernel = KernelRegistry().get("user_attn:bshd@bshd")
    assert kernel.extra["layout"] == "bshd" and kernel.extra["reads_inputs_at_launch"] is False
    assert gated(kernel, inputs).passed
    # The same function called in torch's layout computes attention over the wrong axis: the gate says so.
    with pytest.raises(GateFailure, match="failed the correctness gate"):
        gated(KernelRegistry().get("user_attn:bshd"), inputs)


def test_bshd_layout_by_decorator_receives_bshd_tensors():
    seen = []

    @convention(layout="bshd")
    def fa(q, k, v, causal=True, softmax_scale=None):
        seen.append((tuple(q.shape), q.is_contiguous()))
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                                              scale=softmax_scale).transpose(1, 2)

    assert gated(adapt_callable(fa), inputs_for()).passed
    assert seen[0] == ((1, 32, 4, 16), True)


def test_gqa_passed_as_is_with_enable_gqa():
    seen = []

    def sdpa(q, k, v, is_causal=True, scale=None, enable_gqa=False):
        seen.append((k.shape[1], enable_gqa))
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)

    assert gated(adapt_callable(sdpa), inputs_for(GQA)).passed
    assert seen[0] == (2, True)


def test_gqa_expanded_when_declared():
    seen = []

    @convention(gqa="expand")
    def mha_only(q, k, v, is_causal=True, scale=None):
        assert k.shape[1] == q.shape[1], "this function cannot take GQA"
        seen.append(k.shape[1])
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)

    assert gated(adapt_callable(mha_only), inputs_for(GQA)).passed
    assert seen[0] == 4
    with pytest.raises(AssertionError, match="cannot take GQA"):  # undeclared: it gets Hkv < Hq, as is
        adapt_callable(mha_only, options={"gqa": "native"}).prepare(inputs_for(GQA))


def test_torch_sdpa_itself_is_known_by_heart():
    kernel = KernelRegistry().get("torch.nn.functional:scaled_dot_product_attention")
    assert gated(kernel, inputs_for(GQA)).passed


def test_fp8_quantized_by_the_harness_gets_e4m3_and_descales():
    seen = {}

    @fp8_inputs(quantized_by="harness")
    def fp8(q, k, v, is_causal=True, scale=None, q_descale=1.0, k_descale=1.0, v_descale=1.0):
        seen["dtype"] = q.dtype
        out = F.scaled_dot_product_attention(q.float() * q_descale, k.float() * k_descale, v.float() * v_descale,
                                             is_causal=is_causal, scale=scale)
        return out.to(torch.bfloat16)

    kernel = adapt_callable(fp8)
    assert kernel.tolerance == "fp8" and kernel.extra["quant"] == "e4m3-pow2" and kernel.output_dtype == "bfloat16"
    result = gated(kernel, inputs_for(dtype="bfloat16"))
    assert result.passed and seen["dtype"] == torch.float8_e4m3fn
    # the gate's reference was attention on the quantized inputs: against bf16 inputs the error is larger
    assert result.max_abs_diff < 0.01


def test_fp8_callable_declaring_its_p_rounding_is_judged_by_those_numerics():
    from harness.kernels import Numerics, declared_numerics, emulate_declared

    @fp8_inputs(quantized_by="harness", p_mode="exact", p_scale="row", sigma=5.0)
    def fp8(q, k, v, is_causal=True, scale=None, q_descale=1.0, k_descale=1.0, v_descale=1.0):
        # what it declares, computed: P per row, e4m3 exact, sigma 5 (the harness's own emulation of it)
        num = Numerics(p_mode="exact", p_scale="row", sigma=5.0)
        em = emulate_declared(num, q.double() * q_descale, k.double() * k_descale, v.double() * v_descale,
                              scale=scale, causal=is_causal, spread=False)
        return em.out.to(torch.bfloat16)

    kernel = adapt_callable(fp8)
    num = declared_numerics(kernel)
    assert (num.p_mode, num.p_scale, num.sigma, num.p_block) == ("exact", "row", 5.0, 64)
    result = gated(kernel, inputs_for(dtype="bfloat16"))
    assert result.passed and result.max_ratio <= 0.5 and "per row" in result.reference  # bf16 out: half its unit
    with pytest.raises(ConfigError, match="fp8_inputs\\(p_blok=...\\): not a declared numeric"):
        fp8_inputs(p_mode="exact", p_blok=32)


def test_fp8_quantized_by_the_harness_needs_descale_keywords():
    @fp8_inputs(quantized_by="harness")
    def fp8(q, k, v, is_causal=True):
        return q

    with pytest.raises(KernelError, match="no q_descale, k_descale, v_descale keyword"):
        adapt_callable(fp8)


def test_provenance_names_module_qualname_and_file_digest(user_module, monkeypatch, tmp_path):
    from harness.runner._setup import kernel_provenance  # what every run records, used unchanged

    (tmp_path / "prov_kern.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    kernels = [KernelRegistry().get("user_attn:attn"), KernelRegistry().get("prov_kern.py:attn@bshd")]
    prov = kernel_provenance(kernels)
    by_module = prov["user_attn:attn"]
    assert by_module["source"] == "user_attn:attn"
    assert by_module["file"] == str((user_module / "user_attn.py").resolve())
    assert by_module["file_sha256"] == hashlib.sha256(MODULE.encode()).hexdigest()
    assert "git_commit" in by_module and "error" not in by_module
    by_file = prov["prov_kern.py:attn@bshd"]
    assert by_file["file"] == str((tmp_path / "prov_kern.py").resolve()) and "error" not in by_file


def test_spec_options_and_with_options():
    assert spec_with_options("m:f", layout="bshd") == "m:f@bshd"
    assert spec_with_options("m:f@expand-gqa", layout="bshd") == "m:f@expand-gqa,bshd"
    assert spec_with_options("a/b.py:f", gqa="expand") == "a/b.py:f@expand-gqa"
    assert spec_with_options("sdpa-cpu") == "sdpa-cpu"
    with pytest.raises(ConfigError, match="registered kernel, which declares its own layout"):
        spec_with_options("sdpa-cpu", layout="bshd")
    with pytest.raises(ConfigError, match="contradicts"):
        spec_with_options("m:f@bhsd", layout="bshd")
    with pytest.raises(KernelError, match="unknown option 'bsdh'"):
        KernelRegistry().get("m:f@bsdh")


def test_cli_layout_applies_to_callables_beside_registered_kernels():
    from harness.kernels import apply_options

    assert apply_options(["sdpa-cudnn", "m:f", "a.py:g@expand-gqa"], layout="bshd") == (
        "sdpa-cudnn", "m:f@bshd", "a.py:g@expand-gqa,bshd")
    assert apply_options(["sdpa-cudnn"]) == ("sdpa-cudnn",)
    with pytest.raises(ConfigError, match="--layout applies to plain callables .* none of the kernels .sdpa-cudnn."):
        apply_options(["sdpa-cudnn"], layout="bshd")


def test_options_on_a_declared_kernel_are_refused(tmp_path, monkeypatch):
    (tmp_path / "declared_k.py").write_text(textwrap.dedent("""
        from harness.kernels import KernelRegistry
        registry = KernelRegistry()
        @registry.kernel("declared", dtypes={"float32"}, devices={"cpu"})
        def prep(inputs):
            return lambda: inputs.q
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KernelError, match="declared Kernel with its own layout"):
        KernelRegistry().get("declared_k:prep@bshd")


def test_fp8_quantized_by_the_callable_is_judged_on_its_quantized_inputs():
    from harness.kernels import dequantize, quantize_e4m3_pow2

    @fp8_inputs()  # it gets bf16 tensors and quantizes them itself, inside the timed call
    def fp8(q, k, v, is_causal=True, scale=None):
        q, k, v = (dequantize(*quantize_e4m3_pow2(t), dtype=torch.float32) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale).to(torch.bfloat16)

    kernel = adapt_callable(fp8)
    assert kernel.dtypes == frozenset({"bfloat16", "float16"}) and kernel.extra["reads_inputs_at_launch"] is False
    result = gated(kernel, inputs_for(dtype="bfloat16"))
    # against attention on the quantized inputs only the bf16 output rounding remains
    assert result.passed and result.max_excess_diff <= 0


def test_a_cached_output_is_caught_as_for_bundled_kernels():
    cache = {}

    def cached(q, k, v, is_causal=True, scale=None):
        if "out" not in cache:
            cache["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
        return cache["out"]

    with pytest.raises(GateFailure, match="returned a stale output"):
        gated(adapt_callable(cached), inputs_for())


def test_decorator_name_and_dtypes():
    @convention(name="my-attn", dtypes={"float32"}, devices={"cpu"})
    def attn(q, k, v, causal=True, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    kernel = adapt_callable(attn)
    assert kernel.name == "my-attn" and kernel.dtypes == frozenset({"float32"})
    with pytest.raises(UnsupportedInputError, match="does not support dtype 'bfloat16'"):
        kernel.check_supports(dtype="bfloat16", head_dim_qk=16, head_dim_v=16, causal=True, device_kind="cpu")
    with pytest.raises(ConfigError, match="the layout is one of bhsd, bshd"):
        convention(layout="sbhd")


def test_a_layout_mistake_fails_the_gate_with_the_layout_that_would_pass(user_module):
    """flash-attn's (B, S, H, d) function named without @bshd failed with SNR -11 dB and no hint; the gate now
    checks the swapped layout at a few positions and names the fix. The reverse mistake is named too."""
    reg = KernelRegistry()
    with pytest.raises(GateFailure) as info:
        gated(reg.get("user_attn:bshd"), inputs_for())
    text = str(info.value)
    assert "SNR" in text and "It would pass as layout bshd" in text and "user_attn:fn@bshd" not in text
    assert "`module:fn@bshd`, pass --layout bshd" in text
    assert gated(reg.get("user_attn:bshd@bshd"), inputs_for()).passed  # the fix it names passes
    with pytest.raises(GateFailure, match=r"It would pass as layout bhsd: drop @bshd"):
        gated(reg.get("user_attn:attn@bshd"), inputs_for())
    with pytest.raises(GateFailure) as wrong:  # a wrong result is not dressed up as a layout mistake
        gated(reg.get("user_attn:zeros"), inputs_for())
    assert "other layout" not in str(wrong.value)
