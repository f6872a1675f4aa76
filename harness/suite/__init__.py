"""The suite layer: the one place for the defaults that depend on the device and the workload.

Every command that runs kernels on inputs (`bench sustained`, `burst`, `error`, `repro`, `commits`,
`nightly`, `slurm`, the multi-GPU workers, the pytest plugin) builds its frozen config here, so a
default kernel list, a default sequence length or a protocol override means the same thing everywhere.
Values are checked with the name of the option a user typed, before anything is allocated or written.

One module per kind of default: `_devices` (the default device, device kind, default kernels by device and workload,
default S), `_models` (a model's default layers, S and windows; `bench capture`'s config),
`_shapes` (the shape options and sweeps), `_inputs` (synthetic and captured inputs), `_protocol` (the sustained,
burst and commits protocols and configs), `_verdicts` (verdict rule, gate policy, adaptive target, nightly and
history defaults), `_in_model` (`bench in-model`), `_model_error` (`bench error --model`), `_checks` (seeds, sizes and times above 0).
Other packages import from `harness.suite` only.

>>> from harness.suite import default_kernels, default_seq_len
>>> default_kernels("cpu"), default_kernels("cuda:1")
(('sdpa-cpu',), ('sdpa-cudnn', 'sdpa-flash'))
>>> default_seq_len("cpu", model=False), default_seq_len("cuda:0", model=True)
(1024, 8192)
"""

from harness.config import RESULTS_ROOT
from harness.suite._checks import SEED_LIMIT, check_seed
from harness.suite._devices import (
    DEFAULT_DEVICE,
    DEVICE_HELP,
    default_kernels,
    default_seq_len,
    device_kind,
    kernel_specs,
    machine_device,
    run_device,
    workload_kernels,
)
from harness.suite._in_model import IN_MODEL_LAUNCH_TIMEOUT_S, IN_MODEL_PASS_S, in_model_job
from harness.suite._inputs import (
    BURST_INPUTS,
    CAPTURES_ROOT,
    DEFAULT_CONTROLS,
    DEFAULT_DTYPE,
    DEFAULT_INPUTS,
    DEFAULT_TEXT,
    CaptureArgs,
    captured_specs,
    input_specs,
    synthetic_specs,
)
from harness.suite._model_error import FLOOR_KERNELS, MODEL_ERROR_DEFAULTS, model_error_config, model_error_kernels
from harness.suite._models import (
    CAPTURE_DEVICE,
    CAPTURE_SEQ_LEN,
    CAPTURE_WINDOWS,
    MainJob,
    capture_config,
    default_layers,
    main_job_defaults,
)
from harness.suite._protocol import (
    ADAPTIVE_PILOT,
    BURST_DEFAULTS,
    COMMITS_IDLE_S,
    COMMITS_INPUT,
    MAX_REPEATS,
    PROTOCOL_DEFAULTS,
    QUICK_DEFAULTS,
    burst_config,
    burst_protocol,
    commits_config,
    commits_protocol,
    given_settings,
    sustained_config,
    sustained_protocol,
)
from harness.suite._shapes import (
    DEFAULT_SEED,
    MLA_DIMS,
    NIGHTLY_HEADS,
    SHAPE_DEFAULTS,
    ShapeArgs,
    attention_shape,
    attention_shapes,
    nightly_shape,
    nightly_shape_args,
    seq_lens,
)
from harness.suite._verdicts import (
    HISTORY_CONTROL,
    HISTORY_CONTROL_GEMM,
    HISTORY_RECENT,
    NIGHTLY_BASELINE,
    NIGHTLY_FAIL_ON_SLOWDOWN,
    NIGHTLY_RESULTS,
    UNRESOLVED_DEFAULT,
    HistorySettings,
    history_settings,
    nightly_until_ci,
    unresolved_policy,
    until_ci,
    verdict_rule,
)

__all__ = [
    "DEFAULT_DEVICE",
    "DEVICE_HELP",
    "run_device",
    "PROTOCOL_DEFAULTS",
    "QUICK_DEFAULTS",
    "BURST_DEFAULTS",
    "burst_protocol",
    "burst_config",
    "commits_config",
    "given_settings",
    "CAPTURE_DEVICE",
    "CAPTURE_SEQ_LEN",
    "CAPTURE_WINDOWS",
    "MainJob",
    "capture_config",
    "default_layers",
    "main_job_defaults",
    "CAPTURES_ROOT",
    "SEED_LIMIT",
    "check_seed",
    "RESULTS_ROOT",
    "NIGHTLY_RESULTS",
    "NIGHTLY_BASELINE",
    "NIGHTLY_HEADS",
    "NIGHTLY_FAIL_ON_SLOWDOWN",
    "COMMITS_INPUT",
    "DEFAULT_INPUTS",
    "DEFAULT_DTYPE",
    "DEFAULT_SEED",
    "BURST_INPUTS",
    "DEFAULT_CONTROLS",
    "DEFAULT_TEXT",
    "ShapeArgs",
    "SHAPE_DEFAULTS",
    "seq_lens",
    "MLA_DIMS",
    "CaptureArgs",
    "device_kind",
    "default_kernels",
    "kernel_specs",
    "workload_kernels",
    "machine_device",
    "default_seq_len",
    "attention_shape",
    "attention_shapes",
    "synthetic_specs",
    "captured_specs",
    "input_specs",
    "sustained_protocol",
    "sustained_config",
    "nightly_shape",
    "nightly_shape_args",
    "HistorySettings",
    "history_settings",
    "HISTORY_CONTROL",
    "HISTORY_CONTROL_GEMM",
    "HISTORY_RECENT",
    "FLOOR_KERNELS",
    "MODEL_ERROR_DEFAULTS",
    "model_error_config",
    "model_error_kernels",
    "verdict_rule",
    "until_ci",
    "nightly_until_ci",
    "MAX_REPEATS",
    "ADAPTIVE_PILOT",
    "COMMITS_IDLE_S",
    "UNRESOLVED_DEFAULT",
    "commits_protocol",
    "unresolved_policy",
    "IN_MODEL_PASS_S",
    "IN_MODEL_LAUNCH_TIMEOUT_S",
    "in_model_job",
]

