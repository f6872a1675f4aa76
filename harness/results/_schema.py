"""The results schema: one module, one version for every table. Units are in the column names.

Tables: `runs` (one row: provenance and protocol), `measurements` (kernel x input x repeat),
`chunks` (every warm-in and window chunk), `samples` (every telemetry sample), `probes` (in-band clock
readings), `model_error` (`bench error --model`: one row per kernel x scope x document, every token's
KL divergence and top-1 agreement kept), `in_model` (`bench in-model`, v8: one row per measurement of a model's
forward, the time its attention took, layer by layer), `traces` and `peaks` (v9: `bench trace`'s pipe counters and
`bench peaks`' rates, written beside a run's measurements). `history` (v6) is not a table of a run: it is the
nightly history store's (harness.history), one file per night with one row per series, written and migrated by
the same rules. Older files are migrated on read by the one function `migrate`, driven by the table `ADDED` (what
each version added and what an older file reads in its place); none is refused for being old. The schema is
declared once in Arrow types so the device machine, which has pyarrow but not polars, writes exactly what the
analysis side reads as polars frames (`polars_schema`).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["SCHEMA_VERSION", "TABLES", "OPTIONAL_TABLES", "HISTORY_TABLE", "ADDED", "MIGRATIONS", "LEGACY_PROFILING",
           "columns", "file_version", "migrate", "table_schema", "polars_schema"]

SCHEMA_VERSION = 10

_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "runs": [
        ("run_id", "string"), ("schema_version", "int32"), ("status", "string"), ("status_detail", "string"),
        ("started_at", "string"), ("finished_at", "string"), ("command", "string"), ("harness_version", "string"),
        ("git_commit", "string"), ("git_dirty", "bool"), ("kernel_sources_json", "string"), ("host", "string"),
        ("os", "string"), ("python", "string"), ("versions_json", "string"), ("device_kind", "string"),
        ("device_name", "string"), ("device_index", "int32"), ("pci_bus_id", "string"), ("driver", "string"),
        ("runtime", "string"), ("compute_capability", "string"), ("sm_count", "int32"), ("memory_bytes", "int64"),
        ("power_limit_w", "float64"), ("max_sm_clock_mhz", "float64"), ("telemetry_backend", "string"),
        ("telemetry_json", "string"), ("protocol_json", "string"), ("config_json", "string"),
        ("allow_busy", "bool"), ("busy_processes_json", "string"), ("notes", "string"),
        # v3: how busy the host was before and after (CPU runs), and what the timings are (a CPU's are not
        # sustained-clock figures).
        ("contention_json", "string"), ("timing_note", "string"),
        # v6: the machine's fingerprint beyond model, driver and power limit (JSON): GPU UUID and serial, VBIOS,
        # ECC and MIG modes, the clock policy (application clocks against their defaults), read, never set.
        ("machine_json", "string"),
    ],
    "measurements": [
        ("run_id", "string"), ("measurement_id", "string"), ("config_index", "int32"), ("input_label", "string"),
        ("input_source", "string"), ("input_seed", "int64"), ("kernel", "string"), ("kernel_source", "string"),
        ("repeat", "int32"), ("order_index", "int32"), ("dtype", "string"), ("batch", "int32"), ("heads_q", "int32"),
        ("heads_kv", "int32"), ("seq_len", "int32"), ("head_dim_qk", "int32"), ("head_dim_v", "int32"),
        ("causal", "bool"), ("flops_per_launch", "float64"), ("status", "string"), ("error", "string"),
        ("launch_strategy", "string"), ("launch_note", "string"), ("launches_per_call", "int32"),
        ("settled", "bool"), ("settled_after_s", "float64"), ("settle_reason", "string"), ("warmin_s", "float64"),
        ("window_s", "float64"), ("window_start_ns", "int64"), ("window_end_ns", "int64"), ("window_launches", "int64"),
        ("time_ns", "float64"), ("chunk_time_cv", "float64"), ("duty_cycle", "float64"),
        ("sm_clock_mhz", "float64"), ("inband_clock_mhz", "float64"), ("inband_to_nvml", "float64"),
        ("cycles_clock", "string"), ("cycles_per_launch", "float64"), ("cycles_per_launch_nvml", "float64"),
        ("cycles_per_launch_inband", "float64"), ("power_w", "float64"), ("energy_j", "float64"),
        ("energy_per_launch_j", "float64"), ("energy_per_launch_from_power_j", "float64"), ("temp_max_c", "float64"),
        ("power_limited_frac", "float64"), ("thermal_limited_frac", "float64"), ("reasons_mask", "int64"),
        ("reason_names", "string"), ("tflops", "float64"), ("tflop_per_j", "float64"),
        ("flop_per_cycle_per_sm", "float64"), ("sm_util_pct", "float64"), ("tensor_util_pct", "float64"),
        ("fp32_util_pct", "float64"), ("samples_in_window", "int32"), ("sample_errors_in_window", "int32"),
        ("probes_in_window", "int32"), ("gate_max_abs_diff", "float64"), ("gate_snr_db", "float64"),
        # v2: chiplet GPUs (MI300/MI355X: 8 XCDs); the slowest chiplet sets the kernel's time.
        ("chiplet_count", "int32"), ("chiplet_spread_mhz", "float64"), ("chiplet_spread_frac", "float64"),
        ("slowest_chiplet", "int32"), ("slowest_chiplet_share", "float64"),
        # v4: the gate by declared numerics (FP8 kernels that declare their P rounding): the largest |diff| from
        # the emulation over its per-element allowance, the RMS diff over the RMS the emulation's rounding
        # gives, and what the output was compared with.
        ("gate_max_ratio", "float64"), ("gate_rms_ratio", "float64"), ("gate_reference", "string"),
        # v5: serving workloads (harness.inputs.AttentionShape). seq_len is S_q, the queries per sequence; seq_len_kv
        # the keys (the longest allowed under varlen); window (keys a query sees at most), page_size (tokens per page
        # of a paged KV cache) and varlen (how the lengths were chosen) null where the workload has none; kv_lens each
        # sequence's KV length under varlen; bytes_per_launch the least memory traffic of one call (q, the visible
        # K/V once per KV head, the output, the page table), from which GB/s = bytes_per_launch / time.
        ("seq_len_kv", "int32"), ("window", "int32"), ("page_size", "int32"), ("varlen", "string"),
        ("kv_lens", "list<int32>"), ("bytes_per_launch", "float64"),
    ],
    "chunks": [
        ("run_id", "string"), ("measurement_id", "string"), ("chunk_index", "int32"), ("phase", "string"),
        ("t_start_ns", "int64"), ("t_end_ns", "int64"), ("device_ns", "int64"), ("launches", "int64"),
        ("time_ns", "float64"), ("sm_clock_mhz", "float64"), ("inband_clock_mhz", "float64"), ("power_w", "float64"),
    ],
    "samples": [
        ("run_id", "string"), ("measurement_id", "string"), ("phase", "string"), ("t_ns", "int64"),
        ("source", "string"), ("sm_clock_mhz", "float64"), ("chiplet_clocks_mhz", "list<float64>"),
        ("mem_clock_mhz", "float64"), ("power_w", "float64"), ("power_avg_w", "float64"), ("energy_j", "float64"),
        ("temp_c", "float64"), ("mem_temp_c", "float64"), ("reasons", "int64"), ("reason_names", "string"),
        ("power_limited_ns", "int64"), ("thermal_limited_ns", "int64"), ("sm_util_pct", "float64"),
        ("tensor_util_pct", "float64"), ("fp32_util_pct", "float64"), ("error", "string"),
    ],
    "probes": [
        ("run_id", "string"), ("measurement_id", "string"), ("t_ns", "int64"), ("clock_mhz", "float64"),
        ("clock_min_mhz", "float64"), ("clock_max_mhz", "float64"), ("blocks", "int32"), ("span_ns", "int64"),
    ],
    # v4. role: "kernel" or "floor" (the second correct BF16 kernel); scope: "all" (the kernel in every
    # layer) or "layer" (in `layer` alone); document: the row's index among the run's documents,
    # document_index its index in the text. kl_nats / top1_match: per token position, KL(reference || kernel)
    # of the next-token distribution in nats (computed in fp64, kept to float32's 7 digits: a GPU run's logits
    # are bf16, and 24 documents x 1024 tokens x 31 scopes x 5 kernels stay under 16 MB) and whether the
    # top-1 token agrees.
    "model_error": [
        ("run_id", "string"), ("kernel", "string"), ("kernel_source", "string"), ("role", "string"),
        ("scope", "string"), ("layer", "int32"), ("document", "int32"), ("document_index", "int32"),
        ("document_title", "string"), ("tokens", "int32"), ("seq_len", "int32"), ("kernel_dtype", "string"),
        ("kl_mean_nats", "float64"), ("kl_max_nats", "float64"), ("top1_agreement", "float64"),
        ("kl_nats", "list<float32>"), ("top1_match", "list<bool>"),
        # v7: what the kernel's model is compared with ("fp64": the model with fp64 attention; else the name of the
        # BF16 kernel whose model is the reference, ZYFA's way), and per token position but the last, dNLL: the
        # negative log-likelihood of the text's next token under the kernel's model minus under the reference's.
        ("reference", "string"), ("dnll_mean_nats", "float64"), ("dnll_nats", "list<float32>"),
    ],
    # v8 (`bench in-model`): one row per measurement of a model's forward (its measurements row holds the forward's
    # sustained window: time_ns is one forward). After the window, still under load, the attention pass times
    # `pass_forwards` pairs of forwards in turn, one plain and one with device marks around every attention call
    # (CUDA events; host timestamps on the CPU), as a loop of launches. pass_plain_ns / pass_marked_ns: every
    # forward's time; pass_attention_ns / pass_copy_ns: per marked forward, the sum over its attention calls of the
    # kernel's time (refresh and launch) and of the copy of q, k, v into the layer's buffers. The figures are medians
    # over the pass: attention_ns, copy_ns, pass_forward_ns (plain), pass_marked_forward_ns,
    # instrumentation_cost_ns (median of marked - plain over the pairs), rest_ns = pass_forward_ns - attention_ns,
    # attention_share = attention_ns / pass_forward_ns; layer_attention_ns the median per layer. The pass's clocks and
    # power come from the samples and probes between pass_start_ns and pass_end_ns (samples phase "attention-pass").
    # random_weights: the model was built with random weights (data moves the clock: never a model's figures).
    # layer_gate_*: each layer's gate figures (harness.kernels.gate_columns), in layer order.
    "in_model": [
        ("run_id", "string"), ("measurement_id", "string"), ("kernel", "string"), ("model", "string"),
        ("phase", "string"), ("random_weights", "bool"), ("weights", "string"), ("batch", "int32"),
        ("seq_len_q", "int32"), ("seq_len_kv", "int32"), ("layers", "int32"), ("attention_calls", "int32"),
        ("pass_start_ns", "int64"), ("pass_end_ns", "int64"), ("pass_forwards", "int32"),
        ("pass_plain_ns", "list<float64>"), ("pass_marked_ns", "list<float64>"),
        ("pass_attention_ns", "list<float64>"), ("pass_copy_ns", "list<float64>"),
        ("pass_forward_ns", "float64"), ("pass_marked_forward_ns", "float64"), ("instrumentation_cost_ns", "float64"),
        ("attention_ns", "float64"), ("copy_ns", "float64"), ("rest_ns", "float64"), ("attention_share", "float64"),
        ("layer_attention_ns", "list<float64>"), ("pass_sm_clock_mhz", "float64"),
        ("pass_inband_clock_mhz", "float64"), ("pass_power_w", "float64"), ("pass_probes", "int32"),
        ("layer_gate_max_abs_diff", "list<float64>"), ("layer_gate_snr_db", "list<float64>"),
        ("layer_gate_max_ratio", "list<float64>"),
        # v10: of the kernel's time per marked forward, the part in its refresh() (q, k, v quantized or copied again
        # each call: work an isolated timing does once in prepare()), and its median; null for a kernel without one.
        ("pass_refresh_ns", "list<float64>"), ("refresh_ns", "float64"),
    ],
    # v9: the profiling tables of a run (harness.profiling), written beside its measurements by `bench trace` and
    # `bench peaks`. traces: one row per profiled kernel launch (ncu): pipe cycles and the raw metrics. peaks: one
    # row per peak microbenchmark measurement, its work per launch and the achieved rate, and (check_*) the rate by
    # an independent second timing.
    "traces": [
        ("run_id", "string"), ("trace_id", "string"), ("tool", "string"), ("kernel", "string"),
        ("input_label", "string"), ("launch_kernel", "string"), ("launch_id", "int32"), ("block", "string"),
        ("grid", "string"), ("compute_capability", "string"), ("warm_s", "float64"), ("warm_launches", "int64"),
        ("duration_ns", "float64"), ("sm_clock_mhz", "float64"), ("achieved_cycles", "float64"),
        ("active_cycles", "float64"), ("cycles_basis", "string"), ("tensor_pct", "float64"), ("fma_pct", "float64"),
        ("alu_pct", "float64"), ("xu_pct", "float64"), ("issue_pct", "float64"), ("matrix_cycles", "float64"),
        ("fma_cycles", "float64"), ("alu_cycles", "float64"), ("xu_cycles", "float64"), ("vector_cycles", "float64"),
        ("serialized_cycles", "float64"), ("overlap", "float64"), ("xu_inst", "float64"), ("dram_bytes", "float64"),
        ("metrics_json", "string"), ("command_json", "string"), ("created_at", "string"),
    ],
    "peaks": [
        ("run_id", "string"), ("peaks_run_id", "string"), ("measurement_id", "string"), ("kernel", "string"),
        ("group", "string"), ("operands", "string"), ("unit", "string"), ("work_per_launch", "float64"),
        ("repeat", "int32"), ("status", "string"), ("time_ns", "float64"), ("rate_per_s", "float64"),
        ("sm_clock_mhz", "float64"), ("inband_clock_mhz", "float64"), ("power_w", "float64"),
        ("power_limited_frac", "float64"), ("reason_names", "string"), ("settled", "bool"), ("device_name", "string"),
        ("check_method", "string"), ("check_time_ns", "float64"), ("check_rate_per_s", "float64"),
    ],
    # v6, the history store (harness.history): one row per series (kernel x input x shape x dtype) per night.
    # Figures are geometric means over the night's repeats, with every repeat's value in the *_repeats lists (the
    # interval bands and the between-night variance come from them); `clock_mhz` is the clock the cycles were
    # counted with (`cycles_clock`: inband or nvml). The fingerprint, software and code columns say what a night
    # ran on and with; a change in any of them between two nights is an event, not a regression.
    "history": [
        ("night", "string"), ("night_started_at", "string"), ("run_id", "string"), ("run_status", "string"),
        ("role", "string"), ("series", "string"), ("kernel", "string"), ("kernel_source", "string"),
        ("input_label", "string"), ("input_source", "string"), ("dtype", "string"), ("batch", "int32"),
        ("heads_q", "int32"), ("heads_kv", "int32"), ("seq_len", "int32"), ("seq_len_kv", "int32"),
        ("head_dim_qk", "int32"), ("head_dim_v", "int32"), ("causal", "bool"), ("window", "int32"),
        ("page_size", "int32"), ("varlen", "string"), ("status", "string"), ("repeats", "int32"),
        ("unsettled", "int32"), ("time_ns", "float64"), ("time_ns_repeats", "list<float64>"),
        ("cycles_per_launch", "float64"), ("cycles_repeats", "list<float64>"), ("cycles_clock", "string"),
        ("clock_mhz", "float64"), ("clock_mhz_repeats", "list<float64>"), ("sm_clock_mhz", "float64"),
        ("power_w", "float64"), ("power_w_repeats", "list<float64>"), ("energy_per_launch_j", "float64"),
        ("energy_per_launch_j_repeats", "list<float64>"), ("temp_max_c", "float64"), ("power_limited_frac", "float64"),
        ("device_kind", "string"), ("device_name", "string"), ("gpu_uuid", "string"), ("gpu_serial", "string"),
        ("host", "string"), ("pci_bus_id", "string"), ("driver", "string"), ("vbios", "string"),
        ("power_limit_w", "float64"), ("clock_policy", "string"), ("ecc", "string"), ("mig", "string"),
        ("fingerprint", "string"), ("software", "string"), ("protocol", "string"), ("git_commit", "string"),
        ("git_dirty", "bool"), ("kernel_commit", "string"), ("kernel_dirty", "bool"),
    ],
}

# Tables of a run directory (`RunWriter`, `read_run`); the history table is the history store's.
HISTORY_TABLE = "history"
TABLES: tuple[str, ...] = tuple(t for t in _COLUMNS if t != HISTORY_TABLE)


V2_CHIPLET_COLUMNS = ("chiplet_count", "chiplet_spread_mhz", "chiplet_spread_frac", "slowest_chiplet",
                      "slowest_chiplet_share")
V3_RUNS_COLUMNS = ("contention_json", "timing_note")
V4_GATE_COLUMNS = ("gate_max_ratio", "gate_rms_ratio", "gate_reference")
V5_WORKLOAD_COLUMNS = ("seq_len_kv", "window", "page_size", "varlen", "kv_lens", "bytes_per_launch")
V6_RUNS_COLUMNS = ("machine_json",)
V7_MODEL_ERROR_COLUMNS = ("reference", "dnll_mean_nats", "dnll_nats")
V9_PEAKS_COLUMNS = ("check_method", "check_time_ns", "check_rate_per_s")

# Tables a run holds only when its command writes them: a run without the folder, of this version or an older one,
# has no such rows. model_error (`bench error --model`, new in v4), in_model (`bench in-model`, v8), traces
# (`bench trace`, v9) and peaks (`bench peaks`, v9).
OPTIONAL_TABLES = ("model_error", "in_model", "traces", "peaks")

# The migrations, as data: what each version added to which table, and what a file of an older version reads in its
# place. None: null (it was not recorded then); ("copy", column): that column's value; ("value", x): the constant x.
# One function (`migrate`) applies it; a new version adds an entry here, never code. A column already in the file
# is kept as it is (a file may hold a column before its version declares it: the profiling files of v9's traces
# and peaks, see LEGACY_PROFILING).
ADDED: dict[int, dict[str, dict[str, object]]] = {
    # v2: chiplet GPUs (MI300/MI355X); no chiplet GPU was ever read before, so the columns are null.
    2: {"measurements": {c: None for c in V2_CHIPLET_COLUMNS}},
    # v3: host contention and the timing note were not checked before: null.
    3: {"runs": {c: None for c in V3_RUNS_COLUMNS}},
    # v4: the gate by declared numerics; every older kernel was judged by format (gate_max_abs_diff, gate_snr_db).
    # The model_error table is new in v4.
    4: {"measurements": {c: None for c in V4_GATE_COLUMNS}},
    # v5: serving workloads. v4 knew self-attention only: seq_len_kv is its seq_len; no window, page or varlen;
    # bytes_per_launch was not recorded.
    5: {"measurements": {c: ("copy", "seq_len") if c == "seq_len_kv" else None for c in V5_WORKLOAD_COLUMNS}},
    # v6: the machine fingerprint beyond model, driver and power limit is unknown before (null, not "none"). The
    # history table is new in v6.
    6: {"runs": {c: None for c in V6_RUNS_COLUMNS}},
    # v7: the model error was always against the model with fp64 attention before, and kept no dNLL.
    7: {"model_error": {"reference": ("value", "fp64"), "dnll_mean_nats": None, "dnll_nats": None}},
    # v8: the in_model table is new; no column of the others changed.
    8: {},
    # v9: traces and peaks (pipe counters from ncu; peak microbenchmarks) join this schema. They had a schema of
    # their own before (profiling v1, v2), read as v8 here: its v1 peaks lack the independent second timing.
    9: {"peaks": {c: None for c in V9_PEAKS_COLUMNS}},
    # v10: the in_model table's refresh() time; an older run did not split it out of the kernel's time (null).
    10: {"in_model": {"pass_refresh_ns": None, "refresh_ns": None}},
}

# Files of the retired profiling schema (`harness_trace_schema_version` in their metadata, versions 1 and 2) hold
# the traces and peaks tables as v9 declares them, less what ADDED[9] adds: they read as v8 files.
LEGACY_PROFILING = {b"harness_trace_schema_version": 8}


def file_version(meta: dict | None) -> int:
    """The results schema version a Parquet file's metadata says it was written at (0: none, not a harness file)."""
    meta = meta or {}
    if b"harness_schema_version" in meta:
        return int(meta[b"harness_schema_version"])
    for key, version in LEGACY_PROFILING.items():
        if key in meta:
            return version
    return 0


def _migration(to_version: int):
    def step(table: str, arrow):
        """One version up: the columns ADDED[to_version] lists for `table` that the file lacks, filled as listed."""
        import pyarrow as pa

        for name, fill in ADDED[to_version].get(table, {}).items():
            if name in arrow.schema.names:
                continue
            kind = table_schema(table).field(name).type
            if fill is None:
                values = pa.nulls(arrow.num_rows, type=kind)
            elif fill[0] == "copy":
                values = arrow.column(fill[1]).cast(kind)
            elif fill[0] == "value":
                values = pa.array([fill[1]] * arrow.num_rows, type=kind)
            else:
                raise ValueError(f"ADDED[{to_version}][{table!r}][{name!r}] = {fill!r}: a fill is None, "
                                 f"('copy', column) or ('value', constant)")
            arrow = arrow.append_column(name, values)
        return arrow

    step.__name__ = f"to_v{to_version}"
    return step


# Migrations on read: from_version -> function(table_name, arrow_table) -> arrow_table of from_version+1.
MIGRATIONS: dict[int, object] = {v - 1: _migration(v) for v in sorted(ADDED)}


def migrate(table: str, arrow, version: int):
    """`arrow`, a table of `version`, as the current version declares it (every step of MIGRATIONS in turn)."""
    while version < SCHEMA_VERSION:
        arrow = MIGRATIONS[version](table, arrow)
        version += 1
    return arrow


def _arrow_type(name: str):
    import pyarrow as pa

    if name.startswith("list<"):
        return pa.list_(_arrow_type(name[5:-1]))
    return {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
            "float64": pa.float64(), "bool": pa.bool_()}[name]


@lru_cache(maxsize=None)
def table_schema(table: str):
    """The Arrow schema of a table, with the schema version in its metadata."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(n, _arrow_type(t)) for n, t in _COLUMNS[table]],
        metadata={b"harness_schema_version": str(SCHEMA_VERSION).encode(), b"harness_table": table.encode()},
    )


def polars_schema(table: str):
    """The same schema as a polars `Schema` (polars imported only here)."""
    import polars as pl

    return pl.Schema(pl.from_arrow(table_schema(table).empty_table()).schema)


def columns(table: str) -> list[str]:
    return [n for n, _ in _COLUMNS[table]]
