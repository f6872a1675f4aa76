"""How a `ReportTable` is drawn in a terminal, a pipe or a log: whole cells, never a cut or split number.

- Columns with no value in any row (NVML and in-band clocks on a CPU: every cell "-") are left out, and the
  caption names them, so an empty column never costs a narrow terminal its width.
- Numbers and names never wrap. Prose columns (a limiter list, why a kernel was not timed) wrap at spaces,
  off a terminal at most `PROSE_LOG_WIDTH` wide, so a log line stays readable without cutting a word.
- When the table still does not fit the width (80 columns), its columns are dealt into blocks, each block a
  table of its own that repeats the row's key columns (input, kernel): whole cells move to the next block
  instead of rich folding `6.1417` into `6.141` / `7`.
- `--format compact` draws the same cells without box lines or captions (two spaces between columns), for
  narrow terminals and CI logs; the note of left-out columns is kept.

The console's `table_format` attribute ("table" or "compact", set by the CLI's `--format`) picks the style.
"""

from __future__ import annotations

__all__ = ["FORMATS", "PROSE_LOG_WIDTH", "TerminalTable", "empty_columns"]

FORMATS = ("table", "compact")
PROSE_LOG_WIDTH = 60
# Columns whose text is prose, wrapped at spaces; every other column holds numbers or names, never wrapped.
PROSE = frozenset({"limiter", "why not timed", "why", "value", "caveats", "notes", "note", "reason", "what it means"})
_EMPTY = frozenset({"", "-", "n/a"})


def empty_columns(columns, rows, *, keep: int = 0) -> list[int]:
    """Indices of the columns (past the first `keep`) with no value in any row; none when there are no rows."""
    if not rows:
        return []
    return [i for i in range(keep, len(columns)) if all(str(r[i]).strip() in _EMPTY for r in rows)]


class TerminalTable:
    """The rich renderable of a ReportTable (`ReportTable.to_rich()`), laid out at print time for the console's
    width and kind (module docstring)."""

    def __init__(self, table) -> None:
        self.table = table.shown()

    def _prose(self, i: int) -> bool:
        return self.table.columns[i] in PROSE or self.table.columns[i] in self.table.prose_columns

    def _widths(self, i: int) -> tuple[int, int]:
        """(narrowest, natural) width of column i: a number or name is only ever drawn whole, so its narrowest
        is its natural width; prose may wrap at spaces, down to its longest word."""
        from rich.cells import cell_len
        from rich.text import Text

        texts = [self.table.columns[i], *(Text.from_markup(str(r[i])).plain for r in self.table.rows)]
        natural = max(cell_len(x) for x in texts)
        if not self._prose(i):
            return natural, natural
        return max(cell_len(w) for x in texts for w in (x.split() or [""])), natural

    def _span(self, cols, *, compact: bool, natural: bool = False) -> int:
        """The table's width with `cols` at their narrowest (or natural) widths: rich's own arithmetic for
        pad_edge=False and padding (0, 1): 3 per column but one with box lines, 2 between columns without."""
        inner = sum(self._widths(i)[1 if natural else 0] for i in cols)
        return inner + (2 * (len(cols) - 1) if compact else 3 * len(cols) - 1)

    def _rich(self, cols, *, title, caption, compact, terminal):
        from rich import box
        from rich.table import Table

        t = self.table
        table = Table(title=title or None, title_justify="left", header_style="bold", pad_edge=False,
                      caption=caption or None, caption_justify="left",
                      box=None if compact else box.HEAVY_HEAD, show_edge=not compact, padding=(0, 1))
        for i in cols:
            prose = self._prose(i)
            narrowest, natural = self._widths(i)
            # Off a terminal (no width) prose wraps at PROSE_LOG_WIDTH, never below its longest word.
            cap = None if terminal or not prose else max(PROSE_LOG_WIDTH, narrowest)
            table.add_column(t.columns[i], justify="left" if t._left(i) else "right", no_wrap=not prose,
                             overflow="fold", min_width=None if prose else natural, max_width=cap)
        for r in t.rows:
            table.add_row(*(r[i] for i in cols))
        return table

    def __rich_console__(self, console, options):
        t = self.table
        compact = getattr(console, "table_format", "table") == "compact"
        terminal = console.is_terminal
        keep = list(range(len(t.columns)))
        caption = t.captions(caption=not compact)
        width = options.max_width
        if self._span(keep, compact=compact) <= width:
            yield self._rich(keep, title=t.title, caption=caption, compact=compact, terminal=terminal)
            return
        keys = [i for i in keep if i < t.left]
        blocks: list[list[int]] = []
        for i in (i for i in keep if i >= t.left):
            if blocks and self._span(keys + blocks[-1] + [i], compact=compact) <= width:
                blocks[-1].append(i)
            else:
                blocks.append([i])
        for n, block in enumerate(blocks):
            title = t.title if n == 0 else f"{t.title or 'table'} (continued, {n + 1} of {len(blocks)})"
            table = self._rich(keys + block, title=title, caption="", compact=compact, terminal=terminal)
            # A block of one column wider than the console is drawn at its own width: a line longer than the
            # terminal, but no cell cut.
            need = self._span(keys + block, compact=compact)
            yield from console.render(table, options.update(max_width=max(width, need)))
        if caption:  # under the last block, as wide as the console rather than that block
            from rich.text import Text

            yield Text(caption, style="dim italic")
