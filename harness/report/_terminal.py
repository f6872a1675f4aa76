"""How a `ReportTable` is drawn in a terminal, a pipe or a log: whole cells, never a cut or split number.

- Columns with no value in any row (NVML and in-band clocks on a CPU: every cell "-") are left out, and the
  caption names them, so an empty column never costs a narrow terminal its width.
- Numbers and names never wrap. Prose columns (a limiter list, why a kernel was not timed) wrap at spaces,
  off a terminal at most `PROSE_LOG_WIDTH` wide, so a log line stays readable without cutting a word.
- When the table still does not fit the width (80 columns), its columns are dealt into blocks, each block a
  table of its own that repeats the row's key columns (input, kernel): whole cells move to the next block
  instead of rich folding `6.1417` into `6.141` / `7`.
- When even the key columns and one more do not fit (a 40-50 column terminal: `compare`'s kernel, input A and
  input B take 39), the rows are numbered instead: every block repeats the row number `#` alone, the key
  columns get blocks of their own, headers wrap at spaces, and a column may stand alone in its block. Only a
  name wider than the whole terminal folds; a number never does.
- `--format compact` draws the same cells without box lines or captions (two spaces between columns), for
  narrow terminals and CI logs; the note of left-out columns is kept.

The console's `table_format` attribute ("table" or "compact", set by the CLI's `--format`) picks the style.
"""

from __future__ import annotations

from dataclasses import replace

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

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


NUMBER = "#"


class TerminalTable:
    """The rich renderable of a ReportTable (`ReportTable.to_rich()`), laid out at print time for the console's
    width and kind (module docstring). `numbered`: the rows carry their number as the only key column."""

    def __init__(self, table, *, numbered: bool = False) -> None:
        self.table = table if numbered else table.shown()
        self.numbered = numbered

    def _prose(self, i: int) -> bool:
        return self.table.columns[i] in PROSE or self.table.columns[i] in self.table.prose_columns

    def _cells(self, i: int) -> int:
        return max([cell_len(Text.from_markup(str(r[i])).plain) for r in self.table.rows] or [0])

    def _widths(self, i: int) -> tuple[int, int]:
        """(narrowest, natural) width of column i: a number or name is only ever drawn whole, so its narrowest
        is its natural width (numbered: its widest cell, the header wrapping at spaces); prose may wrap at
        spaces, down to its longest word."""
        header = self.table.columns[i]
        texts = [header, *(Text.from_markup(str(r[i])).plain for r in self.table.rows)]
        natural = max(cell_len(x) for x in texts)
        if not self._prose(i):
            if self.numbered:
                return max(self._cells(i), *(cell_len(w) for w in header.split() or [""])), natural
            return natural, natural
        return max(cell_len(w) for x in texts for w in (x.split() or [""])), natural

    def _span(self, cols, *, compact: bool, natural: bool = False) -> int:
        """The table's width with `cols` at their narrowest (or natural) widths: rich's own arithmetic for
        pad_edge=False and padding (0, 1): 3 per column but one with box lines, 2 between columns without."""
        inner = sum(self._widths(i)[1 if natural else 0] for i in cols)
        return inner + (2 * (len(cols) - 1) if compact else 3 * len(cols) - 1)

    def _rich(self, cols, *, title, caption, compact, terminal, width=None):
        t = self.table
        table = Table(title=title or None, title_justify="left", header_style="bold", pad_edge=False,
                      caption=caption or None, caption_justify="left",
                      box=None if compact else box.HEAVY_HEAD, show_edge=not compact, padding=(0, 1))
        for i in cols:
            prose = self._prose(i)
            narrowest, natural = self._widths(i)
            # Off a terminal (no width) prose wraps at PROSE_LOG_WIDTH, never below its longest word.
            cap = None if terminal or not prose else max(PROSE_LOG_WIDTH, narrowest)
            if self.numbered and not prose:
                # Numbered blocks: the header wraps at spaces, the cells never (min_width); only a cell wider
                # than the whole terminal (a very long name) folds rather than being cut off at its edge.
                alone = width is not None and self._span([0, i] if i else [i], compact=compact) > width
                table.add_column(t.columns[i], justify="left" if t._left(i) else "right", no_wrap=False,
                                 overflow="fold", width=None if alone else narrowest)
                continue
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
        nkeys = 1 if self.numbered else t.left
        keys = [i for i in keep if i < nkeys]
        if not self.numbered and any(self._span(keys + [i], compact=compact) > width for i in keep if i >= nkeys):
            yield from self._numbered().__rich_console__(console, options)
            if caption:
                yield Text(caption, style="dim italic")
            return
        blocks: list[list[int]] = []
        for i in (i for i in keep if i >= nkeys):
            if blocks and self._span(keys + blocks[-1] + [i], compact=compact) <= width:
                blocks[-1].append(i)
            else:
                blocks.append([i])
        for n, block in enumerate(blocks):
            title = t.title if n == 0 else f"{t.title or 'table'} (continued, {n + 1} of {len(blocks)})"
            if self.numbered:
                # Above the block, wrapped at the console's width (spaces only), not folded into a narrow block's
                # width where a run id would be split; later blocks say only where they are.
                title = t.title if n == 0 else f"(continued, {n + 1} of {len(blocks)})"
                if title:
                    yield Text(title, style="italic", overflow="fold")
                title = ""
            table = self._rich(keys + block, title=title, caption="", compact=compact, terminal=terminal, width=width)
            yield from console.render(table, options)
        if caption:  # under the last block, as wide as the console rather than that block
            yield Text(caption, style="dim italic")

    def _numbered(self) -> "TerminalTable":
        """This table with its rows numbered: `#` is its only key column, the old keys ordinary columns (first)."""
        t = self.table
        rows = tuple((str(n), *r) for n, r in enumerate(t.rows, 1))
        numbered = replace(t, columns=(NUMBER, *t.columns), rows=rows, left=1 + t.left, caption="", omitted="",
                           title=(t.title + " (rows numbered: # in every block)") if t.title else "")
        return TerminalTable(numbered, numbered=True)
