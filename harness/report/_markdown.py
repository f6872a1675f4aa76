"""Report tables and sections, rendered as rich tables, Markdown and HTML from the same strings.

Every number a report shows is formatted once, here, into a `ReportTable`; the terminal, the Markdown
twin and the HTML page render that table, so they cannot disagree.
"""

from __future__ import annotations

import json

from harness.analysis import estimators_text, explain_comparison, gate_outcome, ratio_text as _ratio, resolution_text
from harness.report._blocks import ReportTable, Section
from harness.report._tables import HEADERS as H, fmt, tflops, traffic_caption, traffic_cells

__all__ = [
    "burst_tables",
    "comparison_markdown",
    "comparison_tables",
    "gate_line",
    "render_markdown",
    "run_sections",
    "run_tables",
]


def _methods(cmp) -> str:
    methods = sorted({r.time.method for r in cmp.rows if r.time.method})
    return " / ".join(methods) or "no"


def comparison_tables(cmp, *, title: str = "B vs A", input_columns: tuple[str, str] = ("A", "B")) -> list[ReportTable]:
    """The decomposition table of a `Comparison` (two runs, two inputs, two kernels, or burst vs sustained).

    `input_columns` names the sides in the headers; when every row pairs an input with itself (burst vs
    sustained of one input) a single input column is shown. The verdict column is the row's verdict: the same
    one the sentences, the JSON and the gate read.
    """
    if not cmp.rows:
        return []
    level = f"{cmp.rule.level:.0%}"
    a, b = input_columns
    one_input = all(r.input_a == r.input_b for r in cmp.rows)
    inputs = (lambda r: (r.input_a,)) if one_input else (lambda r: (r.input_a, r.input_b))
    kernels = any(r.kernel_b for r in cmp.rows)
    rows = tuple((
        r.subject, *inputs(r), fmt(r.time_a_ns, ".4f", scale=1e-6), fmt(r.time_b_ns, ".4f", scale=1e-6),
        _ratio(r.time), _ratio(r.cycles), _ratio(r.clock),
        f"{fmt(r.clock_a_mhz, '.0f')} / {fmt(r.clock_b_mhz, '.0f')}" + (" (NVML)" if r.clock_source == "nvml" else ""),
        r.limiter_a if r.limiter_a == r.limiter_b else f"{r.limiter_a} / {r.limiter_b}",
        resolution_text(r.time),
        r.verdict + (f" ({r.note})" if r.note else ""),
    ) for r in cmp.rows)
    sources = {r.clock_source for r in cmp.rows}
    clock = ("in-band (SM cycles counted per ns)" if sources == {"inband"} else
             "NVML" if sources == {"nvml"} else "in-band where both sides have it, else NVML (marked)")
    designs = {r.design for r in cmp.rows}
    paired = ("paired by repeat (A and B interleaved)" if designs == {"interleaved"} else
              "independent sides" if designs == {"independent"} else "paired where interleaved")
    same = f" {cmp.same_code}." if cmp.same_code else ""
    return [ReportTable(
        title=title, left=2 if one_input else 3, text_tail=2,
        columns=("kernel" + (" (B vs A)" if kernels else ""), *(("input",) if one_input else (f"input {a}", f"input {b}")),
                 f"{a} ms (geomean)", f"{b} ms (geomean)", f"time {b}/{a} [{level}]", f"= cycles {b}/{a}",
                 f"x clock {a}/{b}", f"clock MHz {a} / {b}", f"limiter ({a} / {b})", "resolves",
                 f"verdict: {b} vs {a} (threshold {cmp.rule.threshold_text})"),
        rows=rows,
        caption=(f"ms: geometric means over repeats; ratios: {estimators_text([r.time for r in cmp.rows])} with the "
                 f"[{level} {_methods(cmp)} "
                 f"interval] on log time per repeat, {paired}; resolves: the smallest change the interval could call "
                 f"(its half-width). time = cycles / clock, so time {b}/{a} = cycles {b}/{a} x clock {a}/{b} exactly; "
                 f"clock {a}/{b} > 1 means {b} ran at a lower clock. Clock: {clock}. "
                 f"Verdict{'' if (a, b) == ('A', 'B') else f' ({a} = A, {b} = B)'}: {cmp.rule.describe()}.{same}"),
    )]


def run_tables(summary, *, read_roof=None) -> list[ReportTable]:
    """Per kernel x input figures (medians over repeats), then what was not timed; `read_roof` (the run's measured
    read stream, a `harness.profiling.Roof`) sets each row's GB/s against it."""
    timed = [a for a in summary.sustained if a.get("repeats")]
    ref = summary.reference_inputs
    tag = {a["input_label"]: (" (ref)" if a["input_label"] in ref else "") for a in timed}
    tables = []
    if timed:
        tables.append(ReportTable(
            title="Sustained: time and clock",
            columns=tuple(H[k] for k in ("input", "kernel", "time_ms", "time_range_pct", "nvml_clock_mhz",
                                         "inband_clock_mhz", "inband_to_nvml", "mcycles_per_launch", "settled_after_s",
                                         "duty_cycle", "repeats")),
            rows=tuple((
                a["input_label"] + tag[a["input_label"]], a["kernel"], fmt(a["time_ns"], ".4f", scale=1e-6),
                fmt(a.get("time_range_frac"), ".2f", scale=100, suffix=" %"), fmt(a.get("sm_clock_mhz"), ".0f"),
                fmt(a.get("inband_clock_mhz"), ".0f"), fmt(a.get("inband_to_nvml"), ".3f"),
                fmt(a.get("cycles_per_launch"), ".4f", scale=1e-6)
                + (" (NVML)" if a.get("cycles_clock") == "nvml" else ""),
                "UNSETTLED" if a.get("unsettled") else fmt(a.get("settled_after_s"), ".1f", suffix=" s"),
                fmt(a.get("duty_cycle"), ".4f"), str(a["repeats"]),
            ) for a in timed),
            caption=("medians over repeats of the timed window; range = (max - min) / median of ms/launch; "
                     "cycles = time x in-band clock (x NVML clock where marked: no in-band reading); duty = device "
                     "busy time / window wall time"),
        ))
        tables.append(ReportTable(
            title="Sustained: power, energy, traffic and limiter", text_tail=1,
            columns=tuple(H[k] for k in ("input", "kernel", "board_power_w", "energy_per_launch_j",
                                         "energy_per_launch_from_power_j", "bytes_per_launch", "gb_per_s",
                                         "read_roof_pct", "tflop_per_s", "tflop_per_j",
                                         "flop_per_cycle_per_sm", "power_limited_pct", "thermal_limited_pct",
                                         "temp_max_c", "limiters")),
            rows=tuple((
                a["input_label"] + tag[a["input_label"]], a["kernel"], fmt(a.get("power_w"), ".0f"),
                fmt(a.get("energy_per_launch_j"), ".4g"), fmt(a.get("energy_per_launch_from_power_j"), ".4g"),
                *traffic_cells(a, read_roof), tflops(a.get("tflops")), fmt(a.get("tflop_per_j"), ".3f"),
                fmt(a.get("flop_per_cycle_per_sm"), ".0f"),
                fmt(a.get("power_limited_frac"), ".0f", scale=100, suffix=" %"),
                fmt(a.get("thermal_limited_frac"), ".0f", scale=100, suffix=" %"), fmt(a.get("temp_max_c"), ".0f"),
                a.get("limiter") or "-",
            ) for a in timed),
            caption=("J/launch: from the board's energy counter over the window; J/launch (W x t): from mean power x "
                     "time (both kept: they should agree); limited = share of window time the driver reported "
                     "the limit; " + traffic_caption(read_roof)),
        ))
    failed = [a for a in summary.sustained if not a.get("repeats")]
    if failed:
        tables.append(ReportTable(title="Not timed", columns=("input", "kernel", "why"), rows=tuple(
            (a["input_label"], a["kernel"], "; ".join(a["errors"]) or "no measurement") for a in failed), left=3))
    return tables


def _others(info: dict, j) -> str:
    """What was checked about other processes: a GPU's compute processes, or a CPU host's load."""
    contention = j("contention_json")
    if isinstance(contention, dict):
        def one(c):
            if not isinstance(c, dict) or not c.get("checked"):
                return "not checked" + (f" ({c.get('error')})" if isinstance(c, dict) and c.get("error") else "")
            busy = c.get("busy_processes") or []
            return (f"load average {c.get('load_avg')} on {c.get('cpu_count')} CPUs, "
                    + (f"{len(busy)} busy process(es) using {c.get('busy_cpu_pct')} % of a CPU" if busy else "no busy process"))
        return f"host load before: {one(contention.get('before'))}; after: {one(contention.get('after'))}"
    if info.get("device_kind") == "cpu":
        return "not checked (a CPU run is never refused for a busy host)"
    if info.get("allow_busy"):
        return "allowed (--allow-busy): " + str(j("busy_processes_json"))
    return "none allowed (checked before the run)"


def _provenance(info: dict) -> ReportTable:
    def j(key):
        try:
            return json.loads(info.get(key) or "null")
        except ValueError:
            return info.get(key)

    versions = j("versions_json") or {}
    commit = info.get("git_commit")
    git = (f"{commit} ({'dirty' if info.get('git_dirty') else 'clean'})" if commit else
           "not recorded (the tree had no usable .git; set HARNESS_GIT_COMMIT on the measuring machine)")
    if versions.get("harness_tree_sha256"):
        # Names the code even without git: compare with harness.results.tree_digest of a checkout.
        git += f"; source tree sha256 {versions['harness_tree_sha256'][:16]}"
    kernels = j("kernel_sources_json") or {}
    rows = [
        ("run", f"{info.get('run_id')}: {info.get('status')}"
                + (f" ({info['status_detail']})" if info.get("status_detail") else "")),
        ("when", f"{info.get('started_at')} to {info.get('finished_at') or '?'}"),
        ("command", info.get("command") or "-"),
        ("harness", f"version {info.get('harness_version') or 'not recorded'}, git {git}"),
        *(((("device", f"{info.get('device_name')} (cpu, {info.get('sm_count')} cores)"),
            ("limits as found", "n/a on a CPU (no power limit or SM clock)"),
            ("driver / runtime", "n/a on a CPU")) if info.get("device_kind") == "cpu" else (
            ("device", f"{info.get('device_name')} ({info.get('device_kind')}, PCI {info.get('pci_bus_id')}, "
                       f"{info.get('sm_count')} SMs, compute {info.get('compute_capability')}, "
                       f"{fmt(info.get('memory_bytes'), '.0f', scale=2**-30, suffix=' GiB')})"),
            ("limits as found", f"power limit {fmt(info.get('power_limit_w'), '.0f', suffix=' W')}, max SM clock "
                                f"{fmt(info.get('max_sm_clock_mhz'), '.0f', suffix=' MHz')}"),
            ("driver / runtime", f"{info.get('driver') or '-'} / {info.get('runtime') or '-'}")))),
        ("software", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))),
        ("host", f"{info.get('host')}, {info.get('os')}, Python {info.get('python')}"),
        ("telemetry", f"{info.get('telemetry_backend')}: " + ", ".join(
            f"{k} {v}" for k, v in sorted((j("telemetry_json") or {}).items()))),
        ("kernels", "; ".join(f"{k}: {v.get('source')}" + (f" @ {v['git_commit']}" if v.get("git_commit") else "")
                              for k, v in kernels.items()) if isinstance(kernels, dict) else str(kernels)),
        ("protocol", ", ".join(f"{k}={v}" for k, v in sorted((j("protocol_json") or {}).items()))),
        ("other processes", _others(info, j)),
    ]
    if info.get("timing_note"):
        rows.append(("timings", info["timing_note"]))
    if info.get("notes"):
        rows.append(("notes", info["notes"]))
    return ReportTable(title="", columns=("what", "value"), rows=tuple(rows), left=2)


def burst_tables(burst, *, bvs=None) -> list[ReportTable]:
    """Kernel-only (burst) figures per kernel x input, then burst vs sustained where both exist."""
    tables = []
    if burst:
        timed = [a for a in burst if a.get("repeats")]
        tables.append(ReportTable(
            title="Burst: kernel-only time", text_tail=1,
            columns=(*(H[k] for k in ("input", "kernel", "time_ms", "time_range_pct", "nvml_clock_mhz",
                                      "board_power_w", "duty_cycle", "repeats")), "what was timed"),
            rows=tuple((
                a["input_label"], a["kernel"], fmt(a["time_ns"], ".4f", scale=1e-6),
                fmt(a.get("time_range_frac"), ".2f", scale=100, suffix=" %"), fmt(a.get("sm_clock_mhz"), ".0f"),
                fmt(a.get("power_w"), ".0f"), fmt(a.get("duty_cycle"), ".3f"), str(a["repeats"]),
                a.get("launch_note") or "-",
            ) for a in timed),
            caption=("medians over repeats of the device time of every kernel the launch dispatched (profiler "
                     "trace) / launches; clock and power: telemetry over the timed launches; duty = device time / "
                     "host wall time of the timed launches (the profiler's own cost included)"),
        ))
    if bvs is not None:
        tables += comparison_tables(bvs, title="Burst (A) vs sustained (B)", input_columns=("burst", "sustained"))
    return tables


def gate_line(comparisons, *, threshold: float | None, label=None, unresolved: str = "fail") -> str:
    """The gate's one line (`FAIL` / `NOT RESOLVED` / `PASS`), naming the threshold it applied; every command that
    gates prints it, and its exit status follows the same rows (`gate_figures`; both are `gate_outcome`'s).

    `comparisons`: a `Comparison` or several (commits: one per later revision); `label(cmp, row)` names a row."""
    outcome = gate_outcome(comparisons, threshold=threshold, unresolved=unresolved, label=label)
    if outcome is None:
        cmps = list(comparisons) if isinstance(comparisons, (list, tuple)) else [comparisons]
        rule = cmps[0].rule if cmps else None
        judged = (f"verdicts at the {rule.threshold_text} threshold" if rule is not None and rule.judged else
                  f"no verdicts ({rule.threshold_source})" if rule is not None else "no verdicts")
        return f"no gate ({judged}; --fail-on-slowdown sets one)"
    return outcome.line


def comparison_markdown(cmp, *, threshold: float | None = None, unresolved: str = "fail") -> str:
    """`bench compare` as Markdown (for a CI summary): the table, what was left out, the gate's line."""
    out = [f"# {cmp.name_b} vs {cmp.name_a}", ""]
    out += [t.to_markdown() + "\n" for t in comparison_tables(cmp, title="time = cycles / clock")]
    if cmp.unmatched:
        out += ["Not compared (on one side only): " + "; ".join(cmp.unmatched), ""]
    if threshold is not None:
        head, _, rest = gate_line(cmp, threshold=threshold, unresolved=unresolved).partition(":")
        out.append(f"**{head}**:{rest}")
    return "\n".join(out).rstrip() + "\n"


def _inputs_text(cmp) -> str:
    captured = any(r.input_b.endswith(":captured") for r in cmp.rows)
    who = ("Each captured input (B) against the control of the same layer (A)." if captured else
           "This run has no captured inputs: each input (B) is compared with the run's first input of the same "
           "shape (A, marked ref in the tables).")
    r = cmp.rows[0]
    if r.cycles is None or r.clock is None:
        return who
    clock = "lower" if r.clock.value >= 1 else "higher"
    return (f"{who} Read a row as time B/A = cycles B/A x clock A/B. For example {r.kernel} on {r.input_b} took "
            f"{r.time.value:.4f}x the time it took on {r.input_a}: it needed {r.cycles.value:.4f}x the cycles and "
            f"ran at a clock {abs(r.clock.value - 1):.2%} {clock} ({r.clock_a_mhz:.0f} -> {r.clock_b_mhz:.0f} MHz, "
            f"{'in-band' if r.clock_source == 'inband' else 'NVML'}).")


def run_sections(summary, *, figures: dict | None = None, read_roof=None) -> list[Section]:
    """The report of one run as sections; `figures` maps a figure key to its `Figure` (none: tables only)."""
    figs = figures or {}
    pick = lambda *keys: tuple(figs[k] for k in keys if k in figs)  # noqa: E731
    tables = run_tables(summary, read_roof=read_roof)
    sections = [Section(title="Sustained results", tables=tuple(t for t in tables if t.title != "Not timed"))]
    cmp = summary.inputs
    if cmp.rows:
        sections.append(Section(
            title="Inputs compared: B relative to A", text=_inputs_text(cmp),
            tables=tuple(comparison_tables(cmp, title="Decomposition: time = cycles / clock")),
            figures=pick("inputs"),
        ))
    if summary.kernels is not None and summary.kernels.rows:
        sections.append(Section(
            title="Kernels compared: B relative to A",
            text=("Each pair ran in turn in every repeat of one configuration, its order rotated, so the "
                  "comparison pairs them by repeat. In words, one row each:"),
            points=tuple(explain_comparison(summary.kernels).sentences),
            tables=tuple(comparison_tables(summary.kernels, title="Decomposition: time = cycles / clock")),
        ))
    sections.append(Section(
        title="Clock, power and time through idle, warm-in and window",
        text=("One row per kernel x input, one colour per repeat; t = 0 is the start of each repeat's warm-in. "
              "Read the settling: time per launch and clock move during warm-in and are flat in the window."),
        figures=pick("timeline"),
    ))
    sections.append(Section(title="Cycles vs clock", figures=pick("cycles")))
    sections.append(Section(title="Energy efficiency", figures=pick("energy")))
    if summary.burst:
        sections.append(Section(
            title="Burst vs sustained",
            text=("Burst: kernel-only device time of the timed launches after the warm-up launches (profiler "
                  "trace), from a rested GPU. Sustained: the timed window after the clock settled. The comparison "
                  "uses NVML's clock on both sides (bursts run no in-band probe)."),
            tables=tuple(burst_tables(summary.burst, bvs=summary.burst_vs_sustained)), figures=pick("burst"),
        ))
    extra = [t for t in tables if t.title == "Not timed"]
    if extra or summary.notes:
        sections.append(Section(title="Not timed or not compared", text=" ".join(summary.notes), tables=tuple(extra)))
    sections.append(Section(title="Provenance", tables=(_provenance(summary.info),)))
    return [s for s in sections if s.text or s.tables or s.figures]


def render_markdown(title: str, header: str, sections: list[Section], *, image_paths: dict | None = None) -> str:
    """Markdown of the sections; figures are linked from `image_paths` (key -> relative path) when given."""
    out = [f"# {title}", "", header, ""]
    for s in sections:
        out += [f"## {s.title}", ""]
        if s.text:
            out += [s.text, ""]
        if s.points:
            out += [f"- {p}" for p in s.points] + [""]
        for t in s.tables:
            out += [t.to_markdown(), ""]
        for f in s.figures:
            if image_paths and f.key in image_paths:
                out += [f"![{f.title}]({image_paths[f.key]})", "", f"_{f.caption}_", ""]
    return "\n".join(out).rstrip() + "\n"
