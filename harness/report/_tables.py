"""The final tables of a sustained run, as rich Tables (rendered by the CLI, tested at a fixed width).

Two tables, so each fits a terminal: time and clock (what the decomposition needs), then power,
energy and limiters (why the clock is where it is).
"""

from __future__ import annotations

__all__ = ["sustained_tables", "fmt"]


def fmt(value, spec: str = ".3g", *, scale: float = 1.0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value * scale:{spec}}{suffix}"


def _table(title: str, columns: list[tuple[str, str]]):
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    for name, justify in columns:
        t.add_column(name, justify=justify, no_wrap=name not in ("limiters", "input", "why not timed"))
    return t


def sustained_tables(aggregates: list[dict], *, title: str = "Sustained results") -> list:
    """Rows are input x kernel, medians over repeats; kernels that were not timed get their own table."""
    timed = [a for a in aggregates if a.get("repeats")]
    failed = [a for a in aggregates if not a.get("repeats")]
    # Chiplet GPUs (AMD MI300/MI355X) get the spread between their chiplets' clocks: the slowest sets the time.
    chiplets = any(a.get("chiplet_spread_mhz") is not None for a in timed)
    clock = _table(f"{title}: time and clock", [
        ("input", "left"), ("kernel", "left"), ("ms/launch", "right"), ("range", "right"), ("SMI MHz", "right"),
        ("in-band MHz", "right"), ("gap", "right"), ("Mcycles", "right"), ("settled", "right"), ("duty", "right"),
        *([("XCD spread", "right"), ("slowest XCD", "right")] if chiplets else []),
    ])
    power = _table(f"{title}: power and limiters", [
        ("input", "left"), ("kernel", "left"), ("W", "right"), ("J/launch", "right"), ("TFLOP/s", "right"),
        ("TFLOP/J", "right"), ("pwr-lim", "right"), ("thm-lim", "right"), ("limiters", "left"),
    ])
    for a in timed:
        gap = a.get("inband_to_nvml")
        settled = fmt(a.get("settled_after_s"), ".1f", suffix=" s")
        if a.get("unsettled"):
            settled = f"[red]UNSETTLED x{a['unsettled']}[/]"
        clock.add_row(
            a["input_label"], a["kernel"], fmt(a["time_ns"], ".4f", scale=1e-6),
            fmt(a.get("time_range_frac"), ".2f", scale=100, suffix="%"), fmt(a.get("sm_clock_mhz"), ".0f"),
            fmt(a.get("inband_clock_mhz"), ".0f"), fmt(gap - 1 if gap else None, "+.1f", scale=100, suffix="%"),
            fmt(a.get("cycles_per_launch"), ".3f", scale=1e-6) + ("*" if a.get("cycles_clock") == "nvml" else ""),
            settled, fmt(a.get("duty_cycle"), ".4f"),
            *([fmt(a.get("chiplet_spread_mhz"), ".0f", suffix=" MHz"), fmt(a.get("slowest_chiplet"), ".0f")]
              if chiplets else []),
        )
        power.add_row(
            a["input_label"], a["kernel"], fmt(a.get("power_w"), ".0f"), fmt(a.get("energy_per_launch_j"), ".4g"),
            fmt(a.get("tflops"), ".4g"), fmt(a.get("tflop_per_j"), ".3f"),
            fmt(a.get("power_limited_frac"), ".0f", scale=100, suffix="%"),
            fmt(a.get("thermal_limited_frac"), ".0f", scale=100, suffix="%"), a.get("limiters") or "-",
        )
    clock.caption = ("median over repeats; range = (max-min)/median; SMI = the vendor's reported clock of record "
                     "(NVML SM clock; amdsmi: slowest XCD); gap = in-band / SMI clock - 1; "
                     "Mcycles = time x in-band clock (* = x SMI clock: no in-band reading)")
    tables = [clock, power]
    if failed:
        t = _table(f"{title}: not timed", [("input", "left"), ("kernel", "left"), ("why not timed", "left")])
        for a in failed:
            t.add_row(a["input_label"], a["kernel"], "; ".join(a["errors"]) or "no measurement")
        tables.append(t)
    return tables
