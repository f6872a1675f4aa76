"""What every view of a report draws: a `ReportTable` (rendered as a rich table, Markdown or HTML from the same
strings), a `Figure` (PNG bytes with its caption) and a `Section` that holds them. The Markdown and HTML
writers, the terminal and the figures all build on these, so this module imports none of them.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass, field, replace

from harness.report._terminal import PROSE, TerminalTable, empty_columns

__all__ = ["Figure", "ReportTable", "Section"]


@dataclass(frozen=True, kw_only=True)
class ReportTable:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    left: int = 2  # leading text columns; the rest are numbers and align right ...
    text_tail: int = 0  # ... except this many trailing text columns (limiter, verdict)
    prose_columns: tuple[str, ...] = ()  # columns of prose, wrapped at spaces (beside _terminal.PROSE's)
    omitted: str = ""  # set by shown(): which empty columns were left out

    def shown(self) -> "ReportTable":
        """This table without its columns that have no value in any row (a CPU run's NVML and in-band clocks,
        power, energy), `omitted` naming them; every view draws this, so none prints a column of dashes."""
        gone = empty_columns(self.columns, self.rows, keep=self.left)
        if not gone:
            return self
        keep = [i for i in range(len(self.columns)) if i not in gone]
        return replace(self, columns=tuple(self.columns[i] for i in keep),
                       rows=tuple(tuple(r[i] for i in keep) for r in self.rows),
                       text_tail=sum(1 for i in keep if i >= len(self.columns) - self.text_tail),
                       omitted="not shown, no value in any row: " + ", ".join(self.columns[i] for i in gone))

    def captions(self, *, caption: bool = True) -> str:
        """The caption and the note of left-out columns, each a sentence of its own (a caption ending in "."
        followed by "; not shown ..." read ".;"); `caption=False`: the note alone (--format compact)."""
        parts = [x.strip() for x in ((self.caption if caption else ""), self.omitted) if x and x.strip()]
        out = parts[0] if parts else ""
        for p in parts[1:]:
            out += (" " if out.endswith(".") else "; ") + p
        return out

    def _left(self, i: int) -> bool:
        return i < self.left or i >= len(self.columns) - self.text_tail

    def to_rich(self):
        """The terminal's rendering: whole cells at any width, empty columns left out (`_terminal`)."""
        return TerminalTable(self)

    def __rich__(self):
        return self.to_rich()

    def to_markdown(self) -> str:
        if not self.omitted and self.shown() is not self:
            return self.shown().to_markdown()
        esc = [[c.replace("|", "\\|") for c in row] for row in (self.columns, *self.rows)]
        align = ["---" if self._left(i) else "---:" for i in range(len(self.columns))]
        lines = ([f"**{self.title}**", ""] if self.title else []) + [
            "| " + " | ".join(esc[0]) + " |", "| " + " | ".join(align) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
        if self.captions():
            lines += ["", f"_{self.captions()}_"]
        return "\n".join(lines)

    def to_html(self) -> str:
        if not self.omitted and self.shown() is not self:
            return self.shown().to_html()
        e = _html.escape
        # Trailing prose (limiter, verdict) keeps a readable width: squeezed beside nowrap numbers, its header
        # stood a dozen lines tall (the H200 fixture's decomposition table).
        # Key columns (a kernel's or an input's name) never wrap: a browser breaks "sdpa-kvcache-cudnn" at its hyphens
        # in a wide table otherwise. Prose among them (a provenance value) may.
        def key(i):
            prose = self.columns[i] in PROSE or self.columns[i] in self.prose_columns
            if self.columns[i] in self.prose_columns:  # named prose among the keys (a verdict moved forward)
                return ' class="prose"'
            return ' class="key"' if i > 0 and not prose else ''

        cls = [' class="prose"' if i >= len(self.columns) - self.text_tail else key(i) if self._left(i) else ' class="num"'
               for i in range(len(self.columns))]
        head = "".join(f"<th{cls[i]}>{e(c)}</th>" for i, c in enumerate(self.columns))
        body = "".join("<tr>" + "".join(f"<td{cls[i]}>{e(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                       for r in self.rows)
        cap = f'<p class="caption">{e(self.captions())}</p>' if self.captions() else ""
        head_html = f"<h3>{e(self.title)}</h3>" if self.title else ""
        return (f"{head_html}<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}"
                f"</tbody></table></div>{cap}")


@dataclass(frozen=True, kw_only=True)
class Figure:
    key: str  # file-name friendly
    title: str
    caption: str
    png: bytes


@dataclass(frozen=True, kw_only=True)
class Section:
    title: str
    text: str = ""
    tables: tuple[ReportTable, ...] = ()
    figures: tuple[Figure, ...] = field(default=())
    points: tuple[str, ...] = ()  # one sentence per row (the verdicts in words): a list, one item each
