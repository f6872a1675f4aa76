"""Matplotlib for the report's figures: the Agg backend with the report's fonts (`pyplot`), a figure as PNG bytes
(`png`), and margins fixed in inches (`fixed_layout`). Every module that draws a figure of the report uses these,
so all figures share one look and one resolution.
"""

from __future__ import annotations

import io

__all__ = ["DPI", "fixed_layout", "png", "pyplot"]

DPI = 150  # readable when the page scales a 13-inch figure to its 1300 px column (80 dpi blurred the text)


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 11, "axes.grid": True, "grid.alpha": 0.3,
                         "legend.fontsize": 10, "xtick.labelsize": 10, "ytick.labelsize": 10, "figure.dpi": DPI})
    return plt


def png(fig) -> bytes:
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # margins are set already; bbox "tight" would draw it twice
    plt.close(fig)
    return buf.getvalue()


def fixed_layout(fig, *, rows: int, cols: int, left: float, right: float, top: float, bottom: float, wgap: float,
                 hgap: float) -> None:
    """Margins and gaps in inches. tight_layout would measure every label with an extra draw of the
    figure, which is a third of the report's time; these figures have known labels, so fixed room will do."""
    w, h = fig.get_size_inches()
    ax_w = (w - left - right - (cols - 1) * wgap) / cols
    ax_h = (h - top - bottom - (rows - 1) * hgap) / rows
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h,
                        wspace=wgap / ax_w, hspace=hgap / ax_h)
