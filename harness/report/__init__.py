"""Report: terminal tables and the live view (HTML and Markdown reports build on the same figures).

>>> from harness.report import fmt
>>> fmt(0.00321, ".2f", scale=1e3, suffix=" ms")
'3.21 ms'
"""

from harness.report._live import LiveView
from harness.report._tables import fmt, sustained_tables

__all__ = ["LiveView", "fmt", "sustained_tables"]
