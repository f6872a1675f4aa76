"""The final tables of a sustained run, as rich Tables (rendered by the CLI, tested at a fixed width), and
the one vocabulary of column names that every view uses.

Two tables, so each fits a terminal: time and clock (what the decomposition needs), then power,
energy and limiters (why the clock is where it is).

`HEADERS` maps each figure's JSON/CSV key (units in the key) to the column header the terminal tables,
the Markdown and HTML reports show, so `bench sustained`, `bench report` and `--json` cannot call one
figure by two names.

>>> HEADERS["nvml_clock_mhz"], HEADERS["inband_to_nvml"]
('NVML MHz', 'in-band/NVML')
"""

from __future__ import annotations

from harness.report._blocks import ReportTable

__all__ = ["HEADERS", "sustained_tables", "fmt", "read_roof_share", "tflops"]

# key (JSON and CSV, units in the name) -> header (terminal, Markdown, HTML). One name per figure.
HEADERS = {
    "input": "input",
    "kernel": "kernel",
    "time_ms": "median ms",  # of the repeats; comparisons take geometric means and say "geomean"
    "time_range_pct": "range",
    "nvml_clock_mhz": "NVML MHz",  # the vendor SMI's clock of record (amdsmi: the slowest XCD)
    "inband_clock_mhz": "in-band MHz",
    "inband_to_nvml": "in-band/NVML",
    "mcycles_per_launch": "Mcycles/launch",
    "settled_after_s": "settled after",
    "duty_cycle": "duty",
    "repeats": "repeats",
    "board_power_w": "board W",
    "energy_per_launch_j": "J/launch",
    "energy_per_launch_from_power_j": "J/launch (W x t)",
    "tflop_per_s": "TFLOP/s",
    "bytes_per_launch": "MB/launch",  # the workload's least traffic (AttentionShape.bytes_moved)
    "gb_per_s": "GB/s",
    "read_roof_pct": "% of read roof",  # GB/s against the run's measured read stream (bench peaks)
    "tflop_per_j": "TFLOP/J",
    "flop_per_cycle_per_sm": "FLOP/cycle/SM",
    "power_limited_pct": "power-limited",
    "thermal_limited_pct": "thermal-limited",
    "temp_max_c": "max °C",
    "limiters": "limiter",
    "xcd_spread_mhz": "XCD spread",
    "slowest_xcd": "slowest XCD",
    "why_not_timed": "why not timed",
}
H = HEADERS


def fmt(value, spec: str = ".3g", *, scale: float = 1.0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value * scale:{spec}}{suffix}"


def tflops(value) -> str:
    """TFLOP/s with four significant digits at any size: a CPU's 0.0223 is not printed `0.0`, nor an H200's
    612.3 as `612.3456`.

    >>> tflops(612.345), tflops(0.02235), tflops(None)
    ('612.3', '0.02235', '-')
    """
    return fmt(value, ".4g")


def read_roof_share(aggregate: dict, read_roof) -> float | None:
    """GB/s of an aggregate row as a share of the read roof (`harness.profiling.Roof`, bytes/s), None without one."""
    gb = aggregate.get("gb_per_s")
    return gb * 1e9 / read_roof.value if gb and read_roof is not None and read_roof.value else None


def traffic_cells(aggregate: dict, read_roof) -> tuple[str, str, str]:
    """(MB/launch, GB/s, % of read roof) of an aggregate row, as the terminal and report tables print them."""
    return (fmt(aggregate.get("bytes_per_launch"), ".4g", scale=1e-6), fmt(aggregate.get("gb_per_s"), ".4g"),
            fmt(read_roof_share(aggregate, read_roof), ".1f", scale=100, suffix=" %"))


def traffic_caption(read_roof) -> str:
    base = ("MB/launch = the workload's least traffic (q, the visible K/V once per KV head, the output, the page table "
            "and lengths); GB/s = it / median time")
    if read_roof is None:
        return base + "; % of read roof: the run has no peaks (bench peaks --into RUN, or bench sustained --peaks RUN)"
    clock = f" at {read_roof.clock_mhz:.0f} MHz" if read_roof.clock_mhz else ""
    return base + f"; % of read roof: of the measured {read_roof.label} ({read_roof.value / 1e9:.0f} GB/s{clock})"


def sustained_tables(aggregates: list[dict], *, title: str = "Sustained results", read_roof=None) -> list:
    """Rows are input x kernel, medians over repeats; kernels that were not timed get their own table. `read_roof`
    (a `harness.profiling.Roof`, the run's measured read stream) adds each row's share of it."""
    timed = [a for a in aggregates if a.get("repeats")]
    failed = [a for a in aggregates if not a.get("repeats")]
    # Chiplet GPUs (AMD MI300/MI355X) get the spread between their chiplets' clocks: the slowest sets the time.
    chiplets = any(a.get("chiplet_spread_mhz") is not None for a in timed)
    clock_cols = [H["input"], H["kernel"], H["time_ms"], H["time_range_pct"], H["nvml_clock_mhz"],
                  H["inband_clock_mhz"], H["inband_to_nvml"], H["mcycles_per_launch"], H["settled_after_s"],
                  H["duty_cycle"], *([H["xcd_spread_mhz"], H["slowest_xcd"]] if chiplets else [])]
    power_cols = [H["input"], H["kernel"], H["board_power_w"], H["energy_per_launch_j"], H["bytes_per_launch"],
                  H["gb_per_s"], H["read_roof_pct"], H["tflop_per_s"], H["tflop_per_j"], H["power_limited_pct"],
                  H["thermal_limited_pct"], H["limiters"]]
    clock_rows, power_rows = [], []
    for a in timed:
        settled = fmt(a.get("settled_after_s"), ".1f", suffix=" s")
        if a.get("unsettled"):
            settled = f"[red]UNSETTLED x{a['unsettled']}[/]"
        clock_rows.append((
            a["input_label"], a["kernel"], fmt(a["time_ns"], ".4f", scale=1e-6),
            fmt(a.get("time_range_frac"), ".2f", scale=100, suffix="%"), fmt(a.get("sm_clock_mhz"), ".0f"),
            fmt(a.get("inband_clock_mhz"), ".0f"), fmt(a.get("inband_to_nvml"), ".3f"),
            fmt(a.get("cycles_per_launch"), ".3f", scale=1e-6) + ("*" if a.get("cycles_clock") == "nvml" else ""),
            settled, fmt(a.get("duty_cycle"), ".4f"),
            *([fmt(a.get("chiplet_spread_mhz"), ".0f", suffix=" MHz"), fmt(a.get("slowest_chiplet"), ".0f")]
              if chiplets else []),
        ))
        power_rows.append((
            a["input_label"], a["kernel"], fmt(a.get("power_w"), ".0f"), fmt(a.get("energy_per_launch_j"), ".4g"),
            *traffic_cells(a, read_roof), tflops(a.get("tflops")), fmt(a.get("tflop_per_j"), ".3f"),
            fmt(a.get("power_limited_frac"), ".0f", scale=100, suffix="%"),
            fmt(a.get("thermal_limited_frac"), ".0f", scale=100, suffix="%"), a.get("limiters") or "-",
        ))
    caption = ("median over repeats; range = (max-min)/median; NVML MHz = the vendor's reported clock of record "
               "(NVML SM clock; amdsmi: slowest XCD); in-band/NVML = in-band clock / NVML clock; "
               "Mcycles/launch = time x in-band clock (* = x NVML clock: no in-band reading)")
    # A run that timed nothing gets no figures tables (they were drawn with every column and no row).
    tables = [ReportTable(title=f"{title}: time and clock", columns=tuple(clock_cols), rows=tuple(clock_rows),
                          caption=caption),
              ReportTable(title=f"{title}: power, traffic and limiters", columns=tuple(power_cols),
                          rows=tuple(power_rows), text_tail=1, caption=traffic_caption(read_roof))] if timed else []
    if failed:
        tables.append(ReportTable(title=f"{title}: not timed", columns=(H["input"], H["kernel"], H["why_not_timed"]),
                                  rows=tuple((a["input_label"], a["kernel"], "; ".join(a["errors"]) or "no measurement")
                                             for a in failed), text_tail=1))
    return tables
