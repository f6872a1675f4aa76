"""Kernels under test: the `Kernel` declaration, the registry, the fp64 reference and the correctness gate.

A kernel is declared once. Its factory does all setup (allocations, compilation, quantization) and
returns a zero-argument closure; only that closure is ever timed, and it returns the output so the
gate can check it.

>>> from harness.kernels import KernelRegistry
>>> reg = KernelRegistry()
>>> @reg.kernel("double", dtypes={"float32"}, devices={"cpu"})
... def double(inputs):
...     return lambda: inputs.q * 2
>>> reg.names()
['double']

A plain attention function is a kernel too (`-k mykern:attn`, `-k path/to/file.py:attn@bshd`):

>>> def attn(q, k, v, is_causal=True, scale=None):
...     return q
>>> adapt_callable(attn).extra["convention"]
'attn(q, k, v, is_causal=..., scale=...) layout bhsd, GQA passed as is'
"""

from harness.kernels._callable import CALLABLE_SIGNATURE, adapt_callable, convention, describe_convention, fp8_inputs
from harness.kernels._callable_spec import LAYOUTS, SPEC_OPTIONS, apply_options, spec_with_options, split_spec
from harness.kernels._decode_layout import DECODE_LAYOUTS, DecodeBatch, decode_batch
from harness.kernels._error import ErrorReport, attention_error, kernel_reference_inputs
from harness.kernels._gate import GateResult, compare_declared, compare_outputs, gate, gate_columns
from harness.kernels._kernel import WORKLOADS, Kernel, Launch
from harness.kernels._listing import kernel_rows
from harness.kernels._quant import E4M3_MAX, dequantize, pow2_scale, quantize_e4m3_pow2
from harness.kernels._reference import (
                                        MMA_REL_ERROR,
                                        Emulation,
                                        Numerics,
                                        declared_numerics,
                                        emulate_declared,
                                        reference_attention,
                                        workload_reference,
)
from harness.kernels._registry import KernelRegistry, default_registry, kernel_provenance
from harness.kernels._repro import INTERFERERS, ReproReport, reproducibility
from harness.kernels._survey import (
                                        ERROR_STAGES,
                                        SurveySetup,
                                        check_interferers,
                                        error_survey,
                                        repro_survey,
                                        resolve_kernels,
                                        set_up_survey,
)
from harness.kernels._tolerance import GateTolerance, declared_tolerance, gate_tolerance

__all__ = [
    "DECODE_LAYOUTS",
    "DecodeBatch",
    "decode_batch",
    "E4M3_MAX",
    "ERROR_STAGES",
    "SurveySetup",
    "check_interferers",
    "error_survey",
    "repro_survey",
    "resolve_kernels",
    "set_up_survey",
    "INTERFERERS",
    "pow2_scale",
    "CALLABLE_SIGNATURE",
    "LAYOUTS",
    "SPEC_OPTIONS",
    "adapt_callable",
    "apply_options",
    "convention",
    "describe_convention",
    "fp8_inputs",
    "split_spec",
    "spec_with_options",
    "ErrorReport",
    "ReproReport",
    "attention_error",
    "dequantize",
    "kernel_reference_inputs",
    "quantize_e4m3_pow2",
    "reproducibility",
    "Kernel",
    "Launch",
    "WORKLOADS",
    "kernel_rows",
    "KernelRegistry",
    "default_registry",
    "kernel_provenance",
    "GateResult",
    "GateTolerance",
    "gate",
    "gate_tolerance",
    "compare_outputs",
    "reference_attention",
    "workload_reference",
    "MMA_REL_ERROR",
    "Emulation",
    "Numerics",
    "declared_numerics",
    "emulate_declared",
    "compare_declared",
    "declared_tolerance",
    "gate_columns",
]
