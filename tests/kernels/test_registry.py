"""The kernel registry and plugin path: names, `module:function` specs, entry points, support checks."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.errors import KernelError, UnknownKernelError, UnsupportedInputError
from harness.kernels import Kernel, KernelRegistry, default_registry


def test_bundled_kernels_are_registered_through_the_entry_point():
    reg = default_registry()
    for name in ("sdpa-cudnn", "sdpa-flash", "sdpa-cpu", "reference-fp64", "triton-bf16", "triton-fp8-exact",
                 "triton-fp8-lean", "triton-fp8-lean-pipe", "triton-fp8-lean-accmma", "triton-fp8-exact-accmma"):
        assert name in reg
    assert reg.plugin_errors == {}


def test_unknown_name_lists_known_kernels():
    reg = KernelRegistry()
    reg.kernel("a", dtypes={"float32"}, devices={"cpu"})(lambda inputs: (lambda: None))
    with pytest.raises(UnknownKernelError, match=r"No kernel named 'b'\. Known kernels: a\..*module:function"):
        reg.get("b")


def test_spec_whose_module_does_not_import(tmp_path, monkeypatch):
    (tmp_path / "broken_kernels.py").write_text("import not_a_real_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KernelError, match=r"importing module 'broken_kernels' failed \(ModuleNotFoundError: .*PYTHONPATH"):
        KernelRegistry().get("broken_kernels:attention")


def test_spec_naming_a_missing_attribute_or_a_non_kernel(tmp_path, monkeypatch):
    (tmp_path / "some_kernels.py").write_text("VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KernelError, match="has no attribute 'nope'"):
        KernelRegistry().get("some_kernels:nope")
    with pytest.raises(KernelError, match="neither a harness.kernels.Kernel, a factory .* nor an attention function"):
        KernelRegistry().get("some_kernels:VALUE")


def test_spec_resolves_a_recorded_factory(tmp_path, monkeypatch):
    (tmp_path / "good_kernels.py").write_text(textwrap.dedent("""
        from harness.kernels import KernelRegistry
        registry = KernelRegistry()

        @registry.kernel("mine", dtypes={"float32"}, devices={"cpu"})
        def mine(inputs):
            return lambda: inputs.q
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = KernelRegistry()
    k = reg.get("good_kernels:mine")
    assert k.name == "mine" and k.source == "good_kernels:mine" and "mine" in reg
    sys.modules.pop("good_kernels", None)


def test_duplicate_names_are_refused():
    reg = KernelRegistry()
    reg.kernel("a", dtypes={"float32"}, devices={"cpu"})(lambda inputs: None)
    with pytest.raises(KernelError, match="Two kernels are registered as 'a'"):
        reg.kernel("a", dtypes={"float32"}, devices={"cpu"})(lambda inputs: None)


def test_a_broken_plugin_is_reported_not_hidden(monkeypatch):
    from importlib import metadata

    class EP:
        name, value, group = "broken", "broken_plugin:register", "harness.kernels"

        def load(self):
            raise ImportError("no module named broken_plugin")

    real = metadata.entry_points
    # where the registry looks entry_points up
    monkeypatch.setattr("harness.kernels._registry.entry_points", lambda group=None: [*real(group=group), EP()])
    reg = KernelRegistry()
    reg.load_plugins()
    assert "sdpa-cpu" in reg, reg.plugin_errors  # the others still load
    assert reg.plugin_errors == {"broken_plugin:register": "ImportError: no module named broken_plugin"}


def test_kernel_that_does_not_support_the_shape():
    k = default_registry().get("triton-bf16")
    with pytest.raises(UnsupportedInputError, match=r"does not support head dims dqk=96, dv=96; it supports 64, 128, 192/128"):
        k.check_supports(dtype="bf16", head_dim_qk=96, head_dim_v=96, causal=True, device_kind="cuda")
    causal_only = Kernel(name="c", prepare=lambda i: None, dtypes=frozenset({"float32"}), devices=frozenset({"cpu"}),
                         causal_only=True)
    with pytest.raises(UnsupportedInputError, match="causal attention only"):
        causal_only.check_supports(dtype="fp32", head_dim_qk=8, head_dim_v=8, causal=False, device_kind="cpu")
    with pytest.raises(UnsupportedInputError, match="runs on cpu, not cuda"):
        causal_only.check_supports(dtype="fp32", head_dim_qk=8, head_dim_v=8, causal=True, device_kind="cuda")


def test_a_kernel_declared_with_short_dtype_names_supports_them():
    """`dtypes={"bf16"}` said "does not support dtype 'bf16'; it supports bf16, fp32": the short names the user
    typed were never matched against the run's canonical dtype."""
    reg = KernelRegistry()

    @reg.kernel("short", dtypes={"bf16", "fp32"}, devices={"cpu"})
    def prepare(inputs):
        return lambda: inputs.q

    k = reg.get("short")
    assert k.dtypes == frozenset({"bfloat16", "float32"})
    for dtype in ("bf16", "bfloat16", "fp32", "float32"):
        k.check_supports(dtype=dtype, head_dim_qk=8, head_dim_v=8, causal=True, device_kind="cpu")
    with pytest.raises(UnsupportedInputError) as info:  # the refusal lists what --dtype takes, once each
        k.check_supports(dtype="fp16", head_dim_qk=8, head_dim_v=8, causal=True, device_kind="cpu")
    assert "does not support dtype 'fp16'; it supports bf16, fp32. Pick one of those with --dtype" in str(info.value)
    with pytest.raises(ValueError, match=r"unknown dtypes \['bf61'\]"):  # a typo is refused when declared
        reg.kernel("typo", dtypes={"bf61"}, devices={"cpu"})(lambda inputs: None)
